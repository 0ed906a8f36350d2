"""A playbook on disk: ``FILE`` (the current playbook, JSON, written atomically) and beside it the append-only
delta log ``FILE.log.jsonl``, one entry per version, so any version can be rebuilt, inspected or restored.

Log entries (one JSON object per line, fsynced before the playbook file is replaced)::

    {"version": 0, "time": …, "source": "init", "playbook": {…}}          the starting playbook
    {"version": 5, "time": …, "source": "curator", "deltas": [...], "sha256": …}   resolved deltas
    {"version": 9, "time": …, "source": "rollback", "to": 3, "sha256": …}  the state of version 3 again

``sha256`` is the hash of the playbook's JSON after the entry, so replaying the log is checked byte for byte
(``verify``). A crash between the log append and the file write leaves the file one version behind: ``open``
replays the entries it lacks. A line cut by a crash (no newline) is the last one: it is ignored, and the next
write replaces it. A rollback keeps ``next_id``: ids are never reused, so a bullet id names one text in the whole
history.

One writer at a time: every write (a learning server, ``agentkit ace rollback``, a recipe) takes the file's
inter-process lock (``agentkit.files.locked``), reads the entries other processes appended since it last looked,
and only then applies its change on top of the newest version. Replaying is one pass over the log: each version's
playbook is kept as its JSON while the pass goes on, so a rollback entry takes its target's state instead of
replaying the log again (the cost is linear in the log's length however many rollbacks it holds). A store reads
only what was appended since it last looked, and a version encodes only the bullets its batch changed
(``Playbook.to_json``'s line cache): a batch into a 10,000-bullet playbook costs milliseconds, not a re-parse.

Every entry is checked as it is read, and a log that breaks a rule is one error naming its line: versions are
integers, each one more than the last; ``init`` holds a playbook, a rollback an earlier version's number, any
other entry a list of deltas.
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
from agentkit.files import atomic_write, locked


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def log_path(path: Path) -> Path:
    return path.with_name(path.name + ".log.jsonl")


class PlaybookStore:
    """``PlaybookStore.create(FILE, playbook)`` starts a history; ``PlaybookStore(FILE)`` opens one.
    ``commit(deltas, source)`` applies a batch and records it; ``at(version)`` rebuilds an old version;
    ``rollback(version)`` makes it current again (as a new version); ``refresh()`` takes in what other processes
    wrote. Every write takes the file's inter-process lock and re-reads the log under it.

    Args:
        path: the playbook file (its log: ``FILE.log.jsonl`` beside it).

    Raises:
        AgentkitError: no such file, a malformed log (its line named), or a file that differs from its log's
            replay (edited by hand).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.log = log_path(self.path)
        if not self.path.is_file():
            raise AgentkitError(
                f"{self.path} does not exist", "create it with `agentkit run ace` or PlaybookStore.create"
            )
        self.entries: list[dict[str, Any]] = []
        self._texts: list[str] = []  # each entry's playbook JSON, in log order
        self._lines: dict[int, tuple[Any, str]] = {}  # Playbook.to_json's cache: each bullet's JSON line
        self._log_size = -1
        self._offset = 0  # bytes of the log read and taken: whole lines, each ending in a newline
        with locked(self.path):
            self._read_new()
            current = _read_text(self.path)
            on_file = Playbook.from_json(current, str(self.path))
            if on_file.version < self.playbook.version:  # a crash came between the log append and the file write
                atomic_write(self.path, self._texts[-1])
            elif current != self._texts[-1]:
                raise AgentkitError(
                    f"{self.path}: differs from the replay of its log (version {on_file.version} on file, "
                    f"{self.playbook.version} in the log)",
                    "was it edited by hand? `agentkit ace verify` names the first mismatch",
                )

    @property
    def playbook(self) -> Playbook:
        """The newest version this store has read (``refresh()`` reads what others wrote since). Read-only: its
        bullets are shared with the versions after it; change it through ``commit``."""
        return self._current

    @classmethod
    def create(cls, path: str | Path, playbook: Playbook | None = None, overwrite: bool = False) -> PlaybookStore:
        path = Path(path)
        pb = Playbook() if playbook is None else playbook  # an empty playbook (its own sections) is falsy
        with locked(path):
            if (path.exists() or log_path(path).exists()) and not overwrite:
                raise AgentkitError(f"{path} already exists", "open it, or pass overwrite=True to start a new history")
            log_path(path).unlink(missing_ok=True)
            entry = {"version": pb.version, "time": _now(), "source": "init", "playbook": pb.to_dict()}
            _append(log_path(path), entry)
            atomic_write(path, pb.to_json())
        return cls(path)

    # --- writing -----------------------------------------------------------------------------------------
    def commit(self, deltas: list[Delta], source: str = "curator", meta: dict[str, Any] | None = None) -> BatchResult:
        """Apply a batch to the newest version (other processes' writes included) and record it.

        Args:
            deltas: the operations (``agentkit.ace.deltas`` rules: each applied or rejected with its reason).
            source: who proposed them (``curator``, ``reflector``, ``refine``…), kept in the log.
            meta: more to keep in the log entry (the step).

        Returns:
            What was applied, added and rejected; a batch that changes nothing is not recorded.
        """
        with locked(self.path):
            self._read_new()
            pb = self._current.copy()
            res = apply_batch(pb, deltas)
            if res.changed:
                text = pb.to_json(self._lines)
                entry = {
                    "version": pb.version,
                    "time": _now(),
                    "source": source,
                    "deltas": [d.to_dict() for d in res.applied],
                    "sha256": _sha(text),
                    **({"meta": meta} if meta else {}),
                }
                self._write(entry, text, pb)
        return res

    def rollback(self, version: int) -> Playbook:
        """Make an old version current again, recorded as a new version (the history keeps everything).

        Args:
            version: the version to restore.

        Returns:
            The new current playbook.

        Raises:
            AgentkitError: no such version.
        """
        with locked(self.path):
            self._read_new()
            old = self.at(version)
            old.version = self._current.version + 1
            old.next_id = self._current.next_id
            text = old.to_json()
            entry = {"version": old.version, "time": _now(), "source": "rollback", "to": version, "sha256": _sha(text)}
            self._write(entry, text, old)
        return old

    def refresh(self) -> Playbook:
        """Read the entries other processes appended since this store last looked; the newest playbook."""
        if _size(self.log) != self._log_size:
            with locked(self.path):
                self._read_new()
        return self._current

    def _write(self, entry: dict[str, Any], text: str, pb: Playbook) -> None:
        if _size(self.log) > self._offset:  # a line cut by a crash mid-append: the new entry replaces it
            os.truncate(self.log, self._offset)
        _append(self.log, entry)
        self._offset = self._log_size = _size(self.log)  # under the lock: nobody appended after this entry
        self._take(entry, text, pb)
        atomic_write(self.path, text)

    def _take(self, entry: dict[str, Any], text: str, pb: Playbook) -> None:
        self.entries.append(entry)
        self._texts.append(text)
        self._current = pb

    # --- reading -----------------------------------------------------------------------------------------
    def at(self, version: int) -> Playbook:
        """The playbook as it was at a version, rebuilt from the log.

        Args:
            version: a version of the log.

        Returns:
            That version's playbook (a copy).

        Raises:
            AgentkitError: no such version (the range is named).
        """
        versions = [e["version"] for e in self.entries]
        if isinstance(version, bool) or not isinstance(version, int) or version not in versions:
            raise AgentkitError(f"{self.path}: no version {version}", f"versions {versions[0]}..{versions[-1]}")
        return Playbook.from_json(self._texts[version - versions[0]])

    def verify(self) -> None:
        """Check every version's recorded hash against the replay (done as the log is read) and the file against
        the newest version; raises naming the first mismatch. The log and the file are read under the lock, so a
        writer in another process never shows a file a version ahead of the log read."""
        with locked(self.path):
            self._read_new()
            on_file = _read_text(self.path)
        for e, text in zip(self.entries, self._texts):
            if "sha256" in e and _sha(text) != e["sha256"]:
                raise AgentkitError(f"{self.log}: replaying version {e['version']} does not give its recorded hash")
        if on_file != self._texts[-1]:
            raise AgentkitError(f"{self.path}: differs from the replay of its log", "the file was edited by hand?")

    def history(self) -> list[dict[str, Any]]:
        """One row per version: version, time, source, operation counts, bullets after it."""
        rows = []
        for e, text in zip(self.entries, self._texts):
            ops = Counter(d["op"] for d in e.get("deltas", []))
            what = ", ".join(f"{k} {v}" for k, v in sorted(ops.items()))
            if e["source"] == "rollback":
                what = f"to version {e['to']}"
            bullets = len(Playbook.from_json(text))
            rows.append(
                {"version": e["version"], "time": e["time"], "source": e["source"], "changes": what, "bullets": bullets}
            )
        return rows

    def _read_new(self) -> None:
        """Read and replay the log's entries after those already taken (all of them the first time)."""
        if not self.log.is_file():
            raise AgentkitError(f"{self.log} is missing", "a playbook's history lives beside it; was it moved alone?")
        with open(self.log, "rb") as f:  # only what was appended since the last read
            f.seek(self._offset)
            raw = f.read()
        self._log_size = self._offset + len(raw)
        *lines, cut = raw.split(b"\n")  # cut: a last line without its newline, from a crash mid-append
        for line in lines:
            n = len(self.entries) + 1
            try:
                e = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError as err:
                raise AgentkitError(f"{self.log}:{n}: not UTF-8 text (byte {err.start})", _WHAT_LOG) from None
            except json.JSONDecodeError:
                raise AgentkitError(f"{self.log}:{n}: not valid JSON") from None
            problem = self._entry_problem(e, n)
            if problem:
                raise AgentkitError(f"{self.log}:{n}: {problem}")
            pb = self._replay(e, f"{self.log}:{n}: version {e['version']}")
            self._take(e, pb.to_json(self._lines), pb)
            self._offset += len(line) + 1
        if not self.entries:
            try:
                cut.decode("utf-8")
            except UnicodeDecodeError as err:
                raise AgentkitError(f"{self.log}: not UTF-8 text (byte {err.start})", _WHAT_LOG) from None
            raise AgentkitError(f"{self.log}: the first entry must be the init playbook")

    def _entry_problem(self, e: Any, n: int) -> str | None:
        if not isinstance(e, dict):
            return f"an entry must be a JSON object, got {type(e).__name__}"
        v, source = e.get("version"), e.get("source")
        if isinstance(v, bool) or not isinstance(v, int):
            return f"version must be an integer, got {v!r}"
        if not isinstance(source, str):
            return f"source must be a string, got {source!r}"
        if n == 1:
            return None if source == "init" else "the first entry must be the init playbook"
        if source == "init":
            return "only the first entry may be an init playbook"
        last = self.entries[-1]["version"]
        if v != last + 1:
            return f"version {v} follows version {last} (each entry is one version more)"
        if source == "rollback":
            to = e.get("to")
            if isinstance(to, bool) or not isinstance(to, int) or not self.entries[0]["version"] <= to < v:
                return f"a rollback needs 'to', an earlier version ({self.entries[0]['version']}..{v - 1}), got {to!r}"
        elif not isinstance(e.get("deltas"), list):
            return "an entry needs 'deltas', a list of operations"
        if "sha256" in e and not isinstance(e["sha256"], str):
            return "sha256 must be a string"
        return None

    def _replay(self, e: dict[str, Any], where: str) -> Playbook:
        """The playbook after entry ``e``, from the state after the entries before it."""
        if e["source"] == "init":
            return Playbook.from_dict(e["playbook"], where)
        if e["source"] == "rollback":
            old = self.at(e["to"])
            old.version, old.next_id = e["version"], self._current.next_id
            return old
        pb = self._current.copy()
        try:
            res = apply_batch(pb, [Delta.parse(d, resolved=True) for d in e["deltas"]])
        except ValueError as err:
            raise AgentkitError(f"{where}: {err}") from None
        if pb.version != e["version"] or res.rejected:
            raise AgentkitError(f"{where} does not replay ({len(res.rejected)} rejected)")
        return pb


_WHAT_LOG = "is it a playbook's log?"


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise AgentkitError(f"{path}: not UTF-8 text (byte {e.start})", "is it a playbook (JSON)?") from None
    except OSError as e:
        raise AgentkitError(f"{path}: cannot be read ({e.strerror})") from None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _append(path: Path, entry: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
