"""agentkit.files: atomic files and directories."""

import os
import threading

import pytest

from agentkit.files import atomic_dir, atomic_write


def test_atomic_write_replaces_and_leaves_nothing(tmp_path):
    p = tmp_path / "a" / "f.json"
    atomic_write(p, "one")
    atomic_write(p, b"two")
    assert p.read_text() == "two" and os.listdir(p.parent) == ["f.json"]


def test_atomic_dir_swaps_with_no_moment_without_the_directory(tmp_path):
    final = tmp_path / "model"
    atomic_dir(final, lambda d: (d / "w").write_text("old"), marker=".done")
    seen_missing, stop = [], threading.Event()

    def watch():  # a reader polling the directory while it is replaced, as a resumed run would
        while not stop.is_set():
            if not (final / "w").exists():
                seen_missing.append(1)

    t = threading.Thread(target=watch)
    t.start()
    for i in range(30):
        atomic_dir(final, lambda d, i=i: (d / "w").write_text(f"new{i}"), marker=".done")
    stop.set()
    t.join()
    assert (final / "w").read_text() == "new29" and (final / ".done").exists()
    assert seen_missing == []
    assert sorted(os.listdir(tmp_path)) == ["model"]  # no temporary sibling left


def test_atomic_dir_failure_keeps_the_old_directory(tmp_path):
    final = tmp_path / "data"
    atomic_dir(final, lambda d: (d / "x").write_text("kept"))

    def broken(d):
        (d / "x").write_text("half")
        raise RuntimeError("crash while building")

    with pytest.raises(RuntimeError):
        atomic_dir(final, broken)
    assert (final / "x").read_text() == "kept" and sorted(os.listdir(tmp_path)) == ["data"]
