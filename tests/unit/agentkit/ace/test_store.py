"""The playbook file and its delta log: history, rebuilding any version, rollback as a new version, byte-exact
replay, recovery from a crash between the log append and the file write, and clear errors on bad files."""

import json

import pytest

from agentkit.ace.deltas import Delta
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
