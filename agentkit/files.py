"""Files and directories written atomically: a reader (or a resumed run) sees the old content or the new, never
half of either, and never a moment with neither."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_RENAME_EXCHANGE = 2  # renameat2(2): swap two paths in one step
_AT_FDCWD = -100


def _umask() -> int:
    """The process's umask (read from /proc; setting it to read it back would race other threads)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):
        return 0o022


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write a file so that readers see the old or the new content, never half of it. The file gets the mode
    ``open`` would give it (0666 less the umask), not the temporary file's 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the inter-process lock of ``path`` (``flock`` on ``.NAME.lock`` beside it) while the block runs: one
    writer at a time across processes (servers, CLI commands, recipes). The lock dies with its holder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


OWNER_MARK = ".agentkit-output"


def claim_output_dir(path: str | Path, owner: str, force: bool = False) -> Path:
    """An output folder for the command ``owner`` (``"uncertainty score"``): a new or empty folder, or one this
    same command wrote before (a mark file inside says so), which it may write again. Anything else that exists
    (another command's run, a file, someone's folder) is refused with one line unless ``force``: nothing is
    overwritten by accident."""
    from agentkit.errors import AgentkitError

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise AgentkitError(f"{path} is a file, not a folder", "give a folder for the output")
    mark = path / OWNER_MARK
    if path.is_dir() and any(path.iterdir()) and not force:
        ours = mark.is_file() and mark.read_text(errors="replace").strip() == owner
        if not ours:
            raise AgentkitError(
                f"{path} already exists and holds files that `{owner}` did not write",
                "pick another folder, or pass --force to write into it",
            )
    path.mkdir(parents=True, exist_ok=True)
    mark.write_text(owner + "\n")
    return path


def records_problem(path: Path) -> str | None:
    """Why a records file (``append_records``) cannot be resumed from, or None. Every line but a last one cut by a
    crash must be ``{"key": str, "value": …}``, and the values of one file share one JSON type (a run writes one
    kind of record per file): anything else was not written by the run and would fail it after its models load."""
    try:
        lines = Path(path).read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return f"{path}: not UTF-8 text"
    kind = None
    for n, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                break  # cut by a crash: the item is redone
            return f"{path}:{n}: not valid JSON"
        if not isinstance(row, dict) or set(row) != {"key", "value"} or not isinstance(row["key"], str):
            return f'{path}:{n}: a record is {{"key": string, "value": ...}}'
        name = type(row["value"]).__name__
        if kind is None:
            kind = name
        elif name != kind:
            return f"{path}:{n}: a {name} value among {kind} values"
    return None


def read_records(path: Path) -> dict[str, Any]:
    """key → value of a records file (JSON lines ``{"key", "value"}``, see ``append_records``). A line cut by a
    crash is skipped, so its item is simply redone."""
    out: dict[str, Any] = {}
    path = Path(path)
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
                out[row["key"]] = row["value"]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return out


def append_records(path: Path, items: dict[str, Any]) -> None:
    """Append finished items to a records file, flushed and fsynced: a crash loses at most the batch in flight.
    This is how every resumable loop remembers its finished work (``RunContext.record``, generation)."""
    if not items:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for k, v in items.items():
            f.write(json.dumps({"key": k, "value": v}, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def atomic_dir(final: Path, build: Callable[[Path], object], marker: str | None = None) -> Path:
    """``build(tmp)`` fills a fresh sibling directory, which then takes ``final``'s place in one step: an existing
    ``final`` is swapped out with renameat2(RENAME_EXCHANGE) and removed afterwards, so there is no moment when
    neither exists, and a crash leaves the old directory and no temporary one. ``marker``: a file written last,
    inside, to say the directory is complete."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        tmp.chmod(0o777 & ~_umask())  # as mkdir would make it, not mkdtemp's 0700
        build(tmp)
        if marker:
            (tmp / marker).write_text("ok\n")
        if final.exists() and _exchange(tmp, final):
            pass  # tmp now holds the old directory, removed below
        else:
            if final.exists():  # no renameat2 (not Linux, or an old kernel): the short gap is unavoidable
                shutil.rmtree(final)
            os.replace(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def save_pretrained_dir(final: Path, model, tokenizer) -> Path:
    """A model and its tokenizer (``save_pretrained``) written to ``final`` through ``atomic_dir``: loadable by any
    engine, and never half written."""

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    return atomic_dir(final, write)


def weights_digest(model) -> str:
    """sha256 over a model's tensors (names, dtypes, shapes and bytes, in name order): equal digests mean the
    same weights bit for bit, e.g. a warm start rebuilt in a later session against the one a run recorded."""
    import hashlib

    import torch

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _exchange(a: Path, b: Path) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    return fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0
