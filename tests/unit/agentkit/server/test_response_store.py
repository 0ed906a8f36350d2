"""The Responses API's store: bounds, expiry, deletion, a file that outlives its server, one writer at a time."""

import threading

import pytest

from agentkit.server.response_store import ResponseStore


def _resp(i: int, pad: int = 0) -> dict:
    return {"id": f"resp_{i}", "status": "completed", "pad": "x" * pad}


def test_size_bound_drops_the_oldest_and_refuses_one_too_large():
    store = ResponseStore(":memory:", max_mb=3000 / 2**20)  # 3000 bytes of JSON
    for i in range(4):
        assert store.put(_resp(i, 900), [])
    assert [store.get(f"resp_{i}") is not None for i in range(4)] == [False, True, True, True]
    assert not store.put(_resp(9, 4000), [])  # alone larger than the bound: not stored, nothing evicted for it
    assert store.get("resp_9") is None and len(store) == 3


def test_expiry(monkeypatch):
    import agentkit.server.response_store as rs

    clock = [1000.0]
    monkeypatch.setattr(rs.time, "time", lambda: clock[0])
    store = ResponseStore(":memory:", ttl_s=60)
    store.put(_resp(1), [{"role": "user"}])
    clock[0] += 59
    assert store.get("resp_1") is not None
    clock[0] += 2
    assert store.get("resp_1") is None and len(store) == 0
    store.put(_resp(2), [])  # the write sweeps expired rows
    assert store._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 1


def test_file_store_survives_a_restart_and_overwrites(tmp_path):
    path = tmp_path / "sub" / "responses.db"
    a = ResponseStore(path)
    a.put({"id": "resp_1", "status": "queued"}, [{"type": "message"}])
    a.put({"id": "resp_1", "status": "completed"}, [{"type": "message"}])
    a.close()
    b = ResponseStore(path)
    assert b.get("resp_1") == ({"id": "resp_1", "status": "completed"}, [{"type": "message"}])
    assert b.delete("resp_1") and not b.delete("resp_1") and b.get("resp_1") is None


def test_concurrent_writers_keep_every_row(tmp_path):
    store = ResponseStore(tmp_path / "r.db")
    threads = [
        threading.Thread(target=lambda k=k: [store.put(_resp(k * 100 + i), []) for i in range(50)]) for k in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store) == 200


@pytest.mark.parametrize("bad", [{"max_responses": 0}, {"max_mb": -1}, {"ttl_s": 0}])
def test_bad_bounds(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        ResponseStore(":memory:", **bad)
