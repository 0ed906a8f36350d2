"""The playbook file and its delta log: history, rebuilding any version, rollback as a new version, byte-exact
replay, recovery from a crash between the log append and the file write, and clear errors on bad files."""

import json

import pytest

from agentkit.ace.deltas import Delta
from agentkit.ace.playbook import Playbook
from agentkit.ace.store import PlaybookStore, log_path
from agentkit.errors import AgentkitError


def grown(tmp_path):
    store = PlaybookStore.create(tmp_path / "pb.json")
    store.commit([Delta("ADD", section="OTHERS", content="one"), Delta("ADD", section="OTHERS", content="two")])
    store.commit([Delta("TAG", id="misc-00001", tag="helpful")], source="reflector")
    store.commit([Delta("MERGE", ids=("misc-00001", "misc-00002"), content="one and two")])
    store.commit([Delta("REMOVE", id="nope-1")])  # changes nothing: not recorded
    return store


def test_history_rebuild_and_verify(tmp_path):
    store = grown(tmp_path)
    rows = store.history()
    assert [(r["version"], r["source"], r["changes"], r["bullets"]) for r in rows] == [
        (0, "init", "", 0),
        (1, "curator", "ADD 2", 2),
        (2, "reflector", "TAG 1", 2),
        (3, "curator", "MERGE 1", 1),
    ]
    assert [b.content for b in store.at(1).ordered()] == ["one", "two"]
    store.verify()
    again = PlaybookStore(store.path)
    assert again.playbook.to_json() == store.path.read_text() == store.playbook.to_json()


def test_rollback_is_a_new_version_and_keeps_ids_unique(tmp_path):
    store = grown(tmp_path)
    pb = store.rollback(1)
    assert pb.version == 4 and [b.id for b in pb.ordered()] == ["misc-00001", "misc-00002"]
    res = store.commit([Delta("ADD", section="OTHERS", content="three")])
    assert res.added == ["misc-00003"]  # numbering goes on from before the rollback
    store.verify()
    assert PlaybookStore(store.path).at(3).bullets["misc-00001"].content == "one and two"
    assert store.history()[4]["changes"] == "to version 1"


def test_a_crash_before_the_file_write_is_finished_on_open(tmp_path):
    store = grown(tmp_path)
    stale = store.path.read_text()
    store.commit([Delta("ADD", section="OTHERS", content="late")])
    store.path.write_text(stale)  # as if the process died after appending the log entry
    reopened = PlaybookStore(store.path)
    assert reopened.playbook.version == 4 and "late" in reopened.playbook.to_text()
    reopened.verify()


def test_a_cut_last_line_is_ignored_and_others_are_errors(tmp_path):
    store = grown(tmp_path)
    with open(log_path(store.path), "a") as f:
        f.write('{"version": 9, "sou')
    assert PlaybookStore(store.path).playbook.version == 3
    lines = log_path(store.path).read_text().splitlines()
    log_path(store.path).write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    with pytest.raises(AgentkitError, match=r"pb.json.log.jsonl:2: not valid JSON"):
        PlaybookStore(store.path)


def test_a_hand_edited_file_fails_verify(tmp_path):
    store = grown(tmp_path)
    d = json.loads(store.path.read_text())
    d["bullets"][0]["content"] = "edited"
    store.path.write_text(json.dumps(d))
    with pytest.raises(AgentkitError, match="differs from the replay"):
        PlaybookStore(store.path).verify()


def test_missing_files_and_unknown_versions(tmp_path):
    with pytest.raises(AgentkitError, match="does not exist"):
        PlaybookStore(tmp_path / "none.json")
    store = grown(tmp_path)
    with pytest.raises(AgentkitError, match="already exists"):
        PlaybookStore.create(store.path)
    with pytest.raises(AgentkitError, match=r"no version 7 \(versions 0..3\)"):
        store.at(7)
    log_path(store.path).unlink()
    with pytest.raises(AgentkitError, match="log.jsonl is missing"):
        PlaybookStore(store.path)


def test_an_empty_starting_playbook_keeps_its_sections(tmp_path):
    """An empty playbook is falsy (no bullets): created from one, the store keeps it, not a default one."""
    store = PlaybookStore.create(tmp_path / "pb.json", Playbook(sections=["RULES"], next_id=40))
    assert (store.playbook.sections, store.playbook.next_id) == (["RULES"], 40)
    assert PlaybookStore(store.path).playbook.sections == ["RULES"]


def _log_with(store, *entries):
    """The store's log with ``entries`` (objects or raw lines) appended."""
    with open(log_path(store.path), "a") as f:
        for e in entries:
            f.write((e if isinstance(e, str) else json.dumps(e)) + "\n")
        f.write("\n")  # a last line that is whole, so that the entries above are read


BAD_LOGS = {
    "a string version": ({"version": "4", "source": "curator", "deltas": []}, "version must be an integer, got '4'"),
    "a version skipped": ({"version": 9, "source": "curator", "deltas": []}, "version 9 follows version 3"),
    "no deltas": ({"version": 4, "source": "curator"}, "needs 'deltas', a list of operations"),
    "an unknown operation": (
        {"version": 4, "source": "curator", "deltas": [{"op": "EXPLODE"}]},
        "version 4: unknown operation 'EXPLODE'",
    ),
    "a rollback to itself": ({"version": 4, "source": "rollback", "to": 4}, "an earlier version (0..3), got 4"),
    "a rollback without to": ({"version": 4, "source": "rollback"}, "an earlier version (0..3), got None"),
    "a second init": ({"version": 4, "source": "init", "playbook": {}}, "only the first entry may be an init"),
    "a list": ([1, 2], "an entry must be a JSON object, got list"),
}


@pytest.mark.parametrize("case", sorted(BAD_LOGS))
def test_a_bad_log_entry_is_one_error_naming_its_line(tmp_path, case):
    entry, words = BAD_LOGS[case]
    store = grown(tmp_path)
    _log_with(store, entry)
    with pytest.raises(AgentkitError) as e:
        PlaybookStore(store.path)
    assert "pb.json.log.jsonl:5: " in str(e.value) and words in str(e.value) and "\n" not in str(e.value)


def test_binary_files_are_one_error(tmp_path):
    store = grown(tmp_path)
    store.path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(AgentkitError, match="pb.json: not UTF-8 text"):
        PlaybookStore(store.path)
    log_path(store.path).write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(AgentkitError, match="pb.json.log.jsonl: not UTF-8 text"):
        PlaybookStore(store.path)


def test_a_thousand_chained_rollbacks_replay_in_one_pass(tmp_path, monkeypatch):
    """Each rollback takes its target's state from the same pass; replaying a rollback used to replay the log
    again, so history and verify time doubled with each chained rollback."""
    import time

    from agentkit.ace import store as store_mod

    store = grown(tmp_path)
    for k in range(1000):
        store.rollback(store.playbook.version - 1 - k % 3)
    parsed = []
    real = store_mod.Playbook.from_json
    monkeypatch.setattr(store_mod.Playbook, "from_json", lambda text, where="": parsed.append(1) or real(text, where))
    start = time.perf_counter()
    again = PlaybookStore(store.path)
    again.verify()
    seconds = time.perf_counter() - start
    assert len(again.entries) == 1004 and len(parsed) <= 2 * 1004 + 2  # linear: at most two parses per entry
    assert seconds < 1.0, seconds
    assert again.playbook.to_json() == store.playbook.to_json()


def test_a_second_writer_is_read_before_writing(tmp_path):
    """Two stores on one file (two processes, in effect): each write re-reads the log under the lock."""
    a = grown(tmp_path)
    b = PlaybookStore(a.path)
    a.rollback(1)
    res = b.commit([Delta("ADD", section="OTHERS", content="from b")])  # on top of a's rollback, as version 5
    assert b.playbook.version == 5 and res.added == ["misc-00003"]
    assert a.refresh().version == 5 and "from b" in a.playbook.to_text()
    assert [e["version"] for e in PlaybookStore(a.path).entries] == [0, 1, 2, 3, 4, 5]
    PlaybookStore(a.path).verify()


def test_verify_reads_what_another_writer_added_since_opening(tmp_path):
    """`ace verify` opened just before a server's commit: the file is a version ahead of the log it read at
    opening, and verify reads the rest under the lock instead of calling the file hand-edited."""
    a = grown(tmp_path)
    opened = PlaybookStore(a.path)
    a.commit([Delta("ADD", section="OTHERS", content="after opening")])
    opened.verify()
    assert opened.playbook.version == a.playbook.version == 4


def test_a_commit_leaves_the_previous_version_untouched_and_encodes_like_a_fresh_encoder(tmp_path):
    """Versions share unchanged bullets (``Playbook.copy``) and each bullet's JSON line is cached by object: a
    commit must not change the version before it, and the file must equal an encoding without the cache."""
    store = grown(tmp_path)
    store.commit([Delta("ADD", section="OTHERS", content="three"), Delta("ADD", section="OTHERS", content="four")])
    before = store.playbook
    frozen = before.to_json()
    store.commit(
        [
            Delta("TAG", id="misc-00001", tag="harmful"),
            Delta("UPDATE", id="misc-00003", content="three, rewritten"),
            Delta("MERGE", ids=("misc-00001", "misc-00004"), content="one, two and four"),
        ]
    )
    assert before.to_json() == frozen  # the old version's bullets were replaced, not mutated
    after = store.playbook
    assert after.bullets["misc-00001"].harmful == 1 and after.bullets["misc-00001"].content == "one, two and four"
    assert after.bullets["misc-00003"].content == "three, rewritten"
    fresh = Playbook.from_json(store.path.read_text())
    assert store.path.read_text() == after.to_json() == fresh.to_json()  # cached lines == a fresh encoding
    assert after.bullets["misc-00003"] is not before.bullets["misc-00003"]
    store.verify()
    PlaybookStore(store.path).verify()


def test_a_cut_line_is_replaced_by_the_next_write(tmp_path):
    store = grown(tmp_path)
    with open(log_path(store.path), "a") as f:
        f.write('{"version": 4, "source": "cut-mark')  # a crash in the middle of an append
    reopened = PlaybookStore(store.path)
    reopened.commit([Delta("ADD", section="OTHERS", content="after the crash")])
    text = log_path(store.path).read_text()
    assert "cut-mark" not in text and text.endswith("\n")
    again = PlaybookStore(store.path)
    assert again.playbook.version == 4 and "after the crash" in again.playbook.to_text()
    again.verify()


def test_content_with_line_breaks_and_separators_replays(tmp_path):
    """A Delta built in Python holds the content its bullet will (whitespace runs as one space), so the log
    replays to the file; and JSON leaves U+2028 unescaped, so the log splits at newlines only."""
    store = PlaybookStore.create(tmp_path / "pb.json")
    store.commit([Delta("ADD", section="OTHERS", content="before\u2028after \u0085 end\n\nnext")])
    assert store.playbook.bullets["misc-00001"].content == "before after end next"
    store.commit([Delta("ADD", section="OTHERS", content="a \u2028 b")])
    log_path(store.path).write_bytes(log_path(store.path).read_bytes().replace(b" b", b"\xe2\x80\xa8b"))
    store = PlaybookStore(store.path)  # a log line holding a raw U+2028 (another writer's) is still one entry
    assert store.playbook.bullets["misc-00002"].content == "a b" and store.playbook.version == 2
    store.commit([Delta("TAG", id="misc-00001", tag="helpful")])
    reopened = PlaybookStore(store.path)
    assert reopened.playbook.version == 3 and reopened.playbook.bullets["misc-00001"].helpful == 1
    reopened.verify()
