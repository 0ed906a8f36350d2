"""A playbook on disk: ``FILE`` (the current playbook, JSON, written atomically) and beside it the append-only
delta log ``FILE.log.jsonl``, one entry per version, so any version can be rebuilt, inspected or restored.

Log entries (one JSON object per line, fsynced before the playbook file is replaced)::

    {"version": 0, "time": …, "source": "init", "playbook": {…}}          the starting playbook
    {"version": 5, "time": …, "source": "curator", "deltas": [...], "sha256": …}   resolved deltas
    {"version": 9, "time": …, "source": "rollback", "to": 3, "sha256": …}  the state of version 3 again

``sha256`` is the hash of the playbook's JSON after the entry, so replaying the log is checked byte for byte
(``verify``). A crash between the log append and the file write leaves the file one version behind: ``open``
replays the entries it lacks. A line cut by a crash is the last one and is ignored. A rollback keeps
``next_id``: ids are never reused, so a bullet id names one text in the whole history.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agentkit.ace.deltas import BatchResult, Delta, apply_batch
from agentkit.ace.playbook import Playbook
from agentkit.errors import AgentkitError
from agentkit.files import atomic_write


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def log_path(path: Path) -> Path:
    return path.with_name(path.name + ".log.jsonl")


class PlaybookStore:
    """``PlaybookStore.create(FILE, playbook)`` starts a history; ``PlaybookStore(FILE)`` opens one.
    ``commit(deltas, source)`` applies a batch and records it; ``at(version)`` rebuilds an old version;
    ``rollback(version)`` makes it current again (as a new version)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.log = log_path(self.path)
        if not self.path.is_file():
            raise AgentkitError(
                f"{self.path} does not exist", "create it with `agentkit run ace` or PlaybookStore.create"
            )
        self.entries = self._read_log()
        self.playbook = Playbook.from_json(self.path.read_text(), str(self.path))
        behind = [e for e in self.entries if e["version"] > self.playbook.version]
        if behind:  # a crash came between the log append and the file write: finish the write
            for e in behind:
                self._replay(self.playbook, e)
            atomic_write(self.path, self.playbook.to_json())

    @classmethod
    def create(cls, path: str | Path, playbook: Playbook | None = None, overwrite: bool = False) -> PlaybookStore:
        path = Path(path)
        pb = playbook or Playbook()
        if (path.exists() or log_path(path).exists()) and not overwrite:
            raise AgentkitError(f"{path} already exists", "open it, or pass overwrite=True to start a new history")
        log_path(path).unlink(missing_ok=True)
        entry = {"version": pb.version, "time": _now(), "source": "init", "playbook": pb.to_dict()}
        _append(log_path(path), entry)
        atomic_write(path, pb.to_json())
        return cls(path)

    # --- writing -----------------------------------------------------------------------------------------
    def commit(self, deltas: list[Delta], source: str = "curator", meta: dict[str, Any] | None = None) -> BatchResult:
        """Apply a batch (``agentkit.ace.deltas`` rules) and record it; a batch that changes nothing is not
        recorded."""
        res = apply_batch(self.playbook, deltas)
        if res.changed:
            text = self.playbook.to_json()
            entry = {
                "version": self.playbook.version,
                "time": _now(),
                "source": source,
                "deltas": [d.to_dict() for d in res.applied],
                "sha256": _sha(text),
                **({"meta": meta} if meta else {}),
            }
            self._write(entry, text)
        return res

    def rollback(self, version: int) -> Playbook:
        """Make version ``version`` current again, recorded as a new version (the history keeps everything)."""
        old = self.at(version)
        old.version = self.playbook.version + 1
        old.next_id = self.playbook.next_id
        self.playbook = old
        text = old.to_json()
        self._write(
            {"version": old.version, "time": _now(), "source": "rollback", "to": version, "sha256": _sha(text)}, text
        )
        return old

    def _write(self, entry: dict[str, Any], text: str) -> None:
        _append(self.log, entry)
        self.entries.append(entry)
        atomic_write(self.path, text)

    # --- reading -----------------------------------------------------------------------------------------
    def at(self, version: int) -> Playbook:
        """The playbook as it was at ``version``, rebuilt from the log."""
        versions = [e["version"] for e in self.entries]
        if version not in versions:
            raise AgentkitError(f"{self.path}: no version {version}", f"versions {versions[0]}..{versions[-1]}")
        pb = Playbook()
        for e in self.entries:
            if e["version"] > version:
                break
            pb = self._replay(pb, e)
        return pb

    def verify(self) -> None:
        """Replay the whole log and check every version's hash and the file; raises naming the first mismatch."""
        pb = Playbook()
        for e in self.entries:
            pb = self._replay(pb, e)
            if "sha256" in e and _sha(pb.to_json()) != e["sha256"]:
                raise AgentkitError(f"{self.log}: replaying version {e['version']} does not give its recorded hash")
        if pb.to_json() != self.path.read_text():
            raise AgentkitError(f"{self.path}: differs from the replay of its log", "the file was edited by hand?")

    def history(self) -> list[dict[str, Any]]:
        """One row per version: version, time, source, operation counts, bullets after it."""
        rows, pb = [], Playbook()
        for e in self.entries:
            pb = self._replay(pb, e)
            ops = Counter(d["op"] for d in e.get("deltas", []))
            what = ", ".join(f"{k} {v}" for k, v in sorted(ops.items()))
            if e["source"] == "rollback":
                what = f"to version {e['to']}"
            rows.append(
                {"version": e["version"], "time": e["time"], "source": e["source"], "changes": what, "bullets": len(pb)}
            )
        return rows

    def _replay(self, pb: Playbook, e: dict[str, Any]) -> Playbook:
        if e["source"] == "init":
            return Playbook.from_dict(e["playbook"], f"{self.log} version {e['version']}")
        if e["source"] == "rollback":
            old = self.at(e["to"])
            old.version, old.next_id = e["version"], pb.next_id
            return old
        res = apply_batch(pb, [Delta.parse(d, resolved=True) for d in e["deltas"]])
        if pb.version != e["version"] or res.rejected:
            raise AgentkitError(f"{self.log}: version {e['version']} does not replay ({len(res.rejected)} rejected)")
        return pb

    def _read_log(self) -> list[dict[str, Any]]:
        if not self.log.is_file():
            raise AgentkitError(f"{self.log} is missing", "a playbook's history lives beside it; was it moved alone?")
        lines = self.log.read_text().splitlines()
        entries = []
        for n, line in enumerate(lines, 1):
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                if n == len(lines):
                    break  # cut by a crash before its playbook was written
                raise AgentkitError(f"{self.log}:{n}: not valid JSON") from None
            if not isinstance(e, dict) or not {"version", "source"} <= e.keys():
                raise AgentkitError(f"{self.log}:{n}: an entry needs version and source")
            entries.append(e)
        if not entries or entries[0]["source"] != "init":
            raise AgentkitError(f"{self.log}: the first entry must be the init playbook")
        return entries


def _append(path: Path, entry: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
