"""A sandbox for model-written Python: one process per call (or per session), limits, no network.

Each call runs in a fresh worker process (``_worker.py``) taken from a pre-warmed pool, so the call pays only
the round trip (about a millisecond), not Python's start-up. The worker has:

- CPU time: RLIMIT_CPU per call (SIGXCPU ends it); wall time: the parent kills its process group;
- memory: RLIMIT_AS; files: RLIMIT_FSIZE, 64 descriptors; processes: RLIMIT_NPROC, and starting processes is
  refused by an audit hook;
- no network: a new network namespace with no interface up (as root), and an audit hook on socket calls;
- writes: only its own directory; as root it runs as ``nobody`` with private tmpfs mounts over /tmp, /var/tmp
  and /dev/shm, and an audit hook refuses opens for writing elsewhere;
- output: stdout and stderr are cut at ``max_output`` characters (a runaway printer is stopped);
- results: read against the call's wall-time deadline, so half a line written where results are read cannot
  hold the caller; anything but a well-formed result is an error result (``limit: "protocol"``), never an
  exception.

Sessions (``session_id``) keep one worker and its globals across calls, as the TIR papers' Python tools do;
a session idle for ``idle_timeout_s`` is closed.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path

from agentkit.tools.base import ToolResult

WORKER = str(Path(__file__).with_name("_worker.py"))
_OPEN: weakref.WeakSet[Sandbox] = weakref.WeakSet()  # closed at interpreter exit: no worker or directory left


@atexit.register
def _close_open_sandboxes() -> None:
    for sandbox in list(_OPEN):
        sandbox.close(timeout_s=10.0)


@dataclass
class SandboxConfig:
    """Limits of one sandboxed call.

    cpu_s / wall_s: CPU and wall-clock seconds per call. memory_mb: address-space limit. max_output: characters
    kept of stdout and of stderr. max_file_mb: largest file it may write. max_procs: process/thread limit.
    pool_size: workers kept warm. idle_timeout_s: sessions unused this long are closed. isolate: use namespaces
    and drop to nobody when running as root.
    """

    cpu_s: float = 5.0
    wall_s: float = 10.0
    memory_mb: int = 1024
    max_output: int = 4000
    max_file_mb: int = 16
    max_procs: int = 256
    tmpfs_mb: int = 64
    pool_size: int = 2
    idle_timeout_s: float = 300.0
    isolate: bool = True


class _Worker:
    def __init__(self, cfg: SandboxConfig, session: bool):
        self.workdir = tempfile.mkdtemp(prefix="agentkit-sbx-")
        wcfg = {**asdict(cfg), "workdir": self.workdir, "session": session, "cpu_hard_s": int(cfg.cpu_s * 1000) + 1}
        env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "HOME": self.workdir, "LANG": "C.UTF-8"}
        self.proc = subprocess.Popen([sys.executable, "-I", WORKER, json.dumps(wcfg)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     start_new_session=True, bufsize=0)
        self.isolation = "unknown"
        self.last_used = time.monotonic()
        self.lock = threading.Lock()
        # the longest honest result line: stdout, stderr and error text cut at max_output, JSON-escaped
        self.max_line = 64 * 1024 + 3 * 6 * 4 * cfg.max_output

    def wait_ready(self, timeout: float = 30.0) -> None:
        line = self._readline(timeout)
        try:
            self.isolation = json.loads(line)["isolation"]
        except (TypeError, ValueError, KeyError):
            self.kill()
            raise RuntimeError("the sandbox worker failed to start") from None

    def _readline(self, timeout: float) -> bytes | None:
        """One line from the worker, read against a deadline: None when the deadline passes first (however
        the line arrives: a program that writes half a line and sleeps cannot hold the read), b"" at end of
        file, the bytes read so far (no newline) when the line grows past ``max_line``."""
        fd, buf = self.proc.stdout.fileno(), bytearray()
        deadline = time.monotonic() + timeout
        while b"\n" not in buf and len(buf) <= self.max_line:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return bytes(buf)
            buf += chunk
        return bytes(buf.split(b"\n", 1)[0])

    def call(self, code: str, cfg: SandboxConfig) -> ToolResult:
        start = time.perf_counter()
        self.last_used = time.monotonic()
        try:
            self.proc.stdin.write(json.dumps({"code": code, "cpu_s": cfg.cpu_s}).encode() + b"\n")
            line = self._readline(cfg.wall_s)
        except (BrokenPipeError, OSError):
            line = b""
        meta = {"seconds": round(time.perf_counter() - start, 4), "isolation": self.isolation}
        if line is None:
            self.kill()
            return ToolResult(f"Error: wall-time limit of {cfg.wall_s:g} s exceeded; the process was killed.",
                              ok=False, meta={**meta, "limit": "wall"})
        if not line:
            code_ = self.proc.wait(timeout=5)
            why = {-signal.SIGXCPU: ("cpu", f"CPU-time limit of {cfg.cpu_s:g} s exceeded"),
                   -signal.SIGKILL: ("killed", "the process was killed (memory or CPU hard limit)")}.get(
                code_, ("crash", f"the process died (exit status {code_})"))
            return ToolResult(f"Error: {why[1]}.", ok=False, meta={**meta, "limit": why[0]})
        try:
            r = json.loads(line)
            out = _with_cut(r["stdout"], r["stdout_size"]) + _with_cut(r["stderr"], r["stderr_size"]) + r["error"]
            truncated = r["stdout_size"] > cfg.max_output or r["stderr_size"] > cfg.max_output
            return ToolResult(out, ok=r["ok"] is True, meta={**meta, "truncated": truncated})
        except (ValueError, TypeError, KeyError):  # garbage written where results are read: never an exception
            self.kill()
            return ToolResult("Error: the sandbox returned an unreadable result (the program wrote to the "
                              "sandbox's result channel); the process was killed.", ok=False,
                              meta={**meta, "limit": "protocol"})

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _with_cut(text: str, size: int) -> str:
    return text if size <= len(text) else f"{text}\n...[output truncated: {size - len(text)} more characters]\n"


class Sandbox:
    """Runs code under ``SandboxConfig`` limits; thread-safe. Use ``run(code)`` or ``run(code, session_id=…)``.

    The pool holds ``pool_size`` idle workers: a call takes one (or starts one when none is idle) and asks for
    only as many replacements as the pool lacks, so a burst does not leave the pool larger. Workers are reaped
    and replaced off the caller's path; ``close()`` (also run at interpreter exit) waits for that work, so no
    worker process or directory outlives the sandbox."""

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self._pool: deque[_Worker] = deque()
        self._sessions: dict[str, _Worker] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._pending = self.config.pool_size  # workers being started for the pool
        self._tasks: set[threading.Thread] = set()  # background reaping and refilling
        for _ in range(self.config.pool_size):
            self._refill()
        self._reaper = threading.Thread(target=self._reap, daemon=True)
        self._reaper.start()
        _OPEN.add(self)

    def _spawn(self, session: bool) -> _Worker:
        w = _Worker(self.config, session)
        w.wait_ready()
        return w

    def _background(self, fn) -> None:
        def task():
            try:
                fn()
            finally:
                with self._lock:
                    self._tasks.discard(threading.current_thread())

        t = threading.Thread(target=task, daemon=True)
        with self._lock:
            self._tasks.add(t)
        t.start()

    def _refill(self) -> None:
        try:
            w = self._spawn(session=False)
        except Exception:  # noqa: BLE001 - a worker that fails to start is retried by the next call
            with self._lock:
                self._pending -= 1
            return
        with self._lock:
            self._pending -= 1
            keep = not self._closed and len(self._pool) < self.config.pool_size
            if keep:
                self._pool.append(w)
        if not keep:
            w.kill()

    def _take(self) -> _Worker:
        with self._lock:
            w = self._pool.popleft() if self._pool else None
            missing = max(0, self.config.pool_size - len(self._pool) - self._pending)
            self._pending += missing
        for _ in range(missing):  # keep the pool warm in the background
            self._background(self._refill)
        return w or self._spawn(session=False)

    def run(self, code: str, session_id: str | None = None) -> ToolResult:
        if session_id is None:
            w = self._take()
            try:
                return w.call(code, self.config)
            finally:  # a used worker is never reused; reap it off the caller's path
                self._background(w.kill)
        with self._lock:
            w = self._sessions.get(session_id)
        if w is None or w.proc.poll() is not None:
            w = self._spawn(session=True)
            with self._lock:
                self._sessions[session_id] = w
        with w.lock:
            res = w.call(code, self.config)
        if w.proc.poll() is not None or not res.ok and res.meta.get("limit"):
            self.close_session(session_id)  # a killed session starts afresh next time
            res.meta["session_reset"] = True
        return res

    def close_session(self, session_id: str) -> None:
        with self._lock:
            w = self._sessions.pop(session_id, None)
        if w is not None:
            w.kill()

    def _reap(self) -> None:
        while not self._closed:
            time.sleep(min(5.0, self.config.idle_timeout_s / 2))
            now = time.monotonic()
            with self._lock:
                idle = [k for k, w in self._sessions.items() if now - w.last_used > self.config.idle_timeout_s]
            for k in idle:
                self.close_session(k)

    def close(self, timeout_s: float = 30.0) -> None:
        """Kill every worker and wait (up to ``timeout_s``) for the reaping and refilling under way."""
        with self._lock:
            self._closed = True
            workers = list(self._pool) + list(self._sessions.values())
            self._pool.clear()
            self._sessions.clear()
        for w in workers:
            w.kill()
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                tasks = list(self._tasks)
            if not tasks or time.monotonic() > deadline:
                break
            for t in tasks:
                t.join(max(0.0, deadline - time.monotonic()))
        _OPEN.discard(self)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
