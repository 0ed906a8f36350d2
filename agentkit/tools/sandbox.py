"""A sandbox for model-written Python, isolated by the kernel: one process tree per call (or per session).

Each call runs in a worker (``_worker.py``) started under **bubblewrap** (``bwrap``, the sandbox Flatpak uses)
and taken from a pre-warmed pool, so a call pays a round trip (a few milliseconds), not a start-up. What
holds it is the kernel, not Python:

- **namespaces**: its own PID namespace with its own ``/proc`` (it sees no host process, and the whole tree
  dies with the namespace's init when the call ends or is killed), no network (a network namespace with no
  interface), its own IPC and UTS namespaces;
- **files**: a read-only root holding only ``/usr``, the interpreter and its site-packages, a few ``/etc``
  files and this worker (not the project, not ``/root`` or ``/home``); writable are only its working
  directory ``/sandbox``, ``/tmp`` and ``/dev/shm``, private size-limited tmpfs mounts that vanish with it;
- **identity**: as root each worker drops to a uid of its own (so it can signal no other process and read no
  private file); without root bwrap maps it to ``nobody`` in a user namespace. ``no_new_privs`` is set;
- **limits**: RLIMIT_CPU per call (SIGXCPU, then SIGKILL one second later), RLIMIT_AS, RLIMIT_FSIZE,
  RLIMIT_NPROC (per uid, so per sandbox as root) and 64 descriptors, inherited by every child; and, where this
  process may make cgroups (root here), a memory cgroup per worker so the whole tree shares ``memory_mb``
  (``meta["memory_cgroup"]`` says whether it did);
- **wall time**: the parent kills the worker at the call's deadline, and the namespace takes every process
  with it;
- **results**: the code runs in a child of the worker's supervisor and never holds the result channel; the
  parent reads that channel against the call's deadline, and anything but a well-formed result is an error
  result (``limit: "protocol"``), never an exception;
- **syscalls**: a seccomp filter (pyseccomp over libseccomp) refuses ptrace, new namespaces, mounts, keyrings,
  BPF, perf events, userfaultfd, io_uring and module loading with EPERM (``meta["seccomp"]`` says it ran);
- **defence in depth**: an audit hook refuses subprocesses, sockets, ctypes and writes outside the writable
  directories (code can remove the hook; the kernel boundary stays).

Where the kernel refuses namespaces (no bwrap, or no user namespaces without root) ``Sandbox`` refuses to start,
unless ``isolation="rlimits-only"`` opts in, by name, to a weaker mode: rlimits, the audit hook, the
supervisor split and (as root) an own uid, but the host's files stay readable, there is no network or PID
isolation, and a child that starts a new session may outlive its call. Every result's ``meta["isolation"]``
names the mode that ran.

Sessions (``session_id``) keep one worker and its globals across calls, as the TIR papers' Python tools do;
processes a call starts are killed when it returns, and a session idle for ``idle_timeout_s`` is closed.
"""

from __future__ import annotations

import atexit
import functools
import itertools
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
import warnings
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from agentkit.errors import AgentkitError
from agentkit.tools.base import ToolResult

WORKER = str(Path(__file__).with_name("_worker.py"))
_OPEN: weakref.WeakSet[Sandbox] = weakref.WeakSet()  # closed at interpreter exit: no worker or directory left
_IN_SANDBOX_WORKER = "/run/agentkit/worker.py"
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives", "/etc/fonts", "/etc/matplotlibrc")
_UIDS = itertools.count()


@atexit.register
def _close_open_sandboxes() -> None:
    for sandbox in list(_OPEN):
        sandbox.close(timeout_s=10.0)


class SandboxUnavailable(AgentkitError):
    """Kernel isolation cannot run here, and the weaker mode was not chosen."""


@dataclass
class SandboxConfig:
    """Limits of one sandboxed call.

    cpu_s / wall_s: CPU and wall-clock seconds per call. memory_mb: address-space limit per process.
    max_output: bytes kept of stdout and of stderr. max_file_mb: largest file it may write. max_procs:
    process/thread limit. tmpfs_mb: size of each private writable mount. pool_size: workers kept warm.
    idle_timeout_s: sessions unused this long are closed. isolation: "kernel" (bubblewrap namespaces, the
    default) or "rlimits-only", the weaker mode, which must be chosen by name (here, or for every sandbox a
    program starts, with the environment variable ``AGENTKIT_SANDBOX_ISOLATION=rlimits-only``).
    """

    cpu_s: float = 5.0
    wall_s: float = 10.0
    memory_mb: int = 1024
    max_output: int = 4000
    max_file_mb: int = 16
    max_procs: int = 64
    tmpfs_mb: int = 64
    pool_size: int = 2
    idle_timeout_s: float = 300.0
    isolation: Literal["kernel", "rlimits-only"] = field(
        default_factory=lambda: os.environ.get("AGENTKIT_SANDBOX_ISOLATION", "kernel")
    )

    def __post_init__(self) -> None:
        if self.isolation not in ("kernel", "rlimits-only"):
            raise AgentkitError(f"sandbox isolation must be 'kernel' or 'rlimits-only', not {self.isolation!r}")
        for name in (
            "cpu_s",
            "wall_s",
            "memory_mb",
            "max_output",
            "max_file_mb",
            "max_procs",
            "tmpfs_mb",
            "idle_timeout_s",
        ):
            if not getattr(self, name) > 0:
                raise AgentkitError(f"sandbox {name} must be > 0, not {getattr(self, name)!r}")
        if self.pool_size < 0:
            raise AgentkitError(f"sandbox pool_size must be >= 0, not {self.pool_size!r}")

    @property
    def max_value(self) -> int:
        """Largest JSON value a call's ``result`` expression may hand back (bytes)."""
        return max(16 * self.max_output, 2**20)

    @property
    def runaway_bytes(self) -> int:
        """Output past which a program is stopped (the supervisor enforces it, the result names it)."""
        return max(64 * self.max_output, 2**20)


def _sandbox_env(home: str) -> dict[str, str]:
    """The environment sandboxed code sees: nothing of the host's, one thread per numeric library."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _interpreter_paths() -> list[str]:
    """The directories the worker's interpreter needs (its prefixes; site-packages live inside them)."""
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    paths = sorted(p for p in paths if os.path.isdir(p) and not p.startswith("/usr/"))
    return [p for p in paths if not any(p.startswith(q + os.sep) for q in paths if q != p)]


def _private_interpreter() -> str | None:
    """The first directory on the way to the interpreter that other users cannot enter or read, if any."""
    for p in _interpreter_paths():
        parts = p.split(os.sep)
        for i in range(2, len(parts) + 1):
            anc = os.sep.join(parts[:i])
            if not os.stat(anc).st_mode & (0o005 if i == len(parts) else 0o001):
                return anc
    return None


def bwrap_argv(cfg: SandboxConfig, as_root: bool) -> list[str]:
    """bubblewrap's arguments for one worker (everything before the command)."""
    argv = [
        "bwrap",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
    ]
    if not as_root:  # a user namespace: the worker is nobody there and holds no capability
        argv += ["--unshare-user", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    for f in _ETC:
        argv += ["--ro-bind-try", f, f]
    # the private writable mounts first: an interpreter under /tmp (a venv in a fresh clone there) is bound
    # on top of them, not hidden by them
    size = str(cfg.tmpfs_mb * 2**20)
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for d, mode in (("/tmp", "1777"), ("/dev/shm", "1777"), ("/sandbox", "0700" if as_root else "0777")):
        argv += ["--size", size, "--perms", mode, "--tmpfs", d]
    made: set[str] = {"/", "/usr", "/tmp", "/dev", "/dev/shm", "/sandbox", "/proc"}
    for p in [*_interpreter_paths(), os.path.dirname(_IN_SANDBOX_WORKER)]:
        parts = p.split(os.sep)
        for i in range(2, len(parts) + (p == os.path.dirname(_IN_SANDBOX_WORKER))):
            anc = os.sep.join(parts[:i])
            if anc not in made:  # parents bwrap would otherwise create with the host's (maybe private) modes
                argv += ["--perms", "0755", "--dir", anc]
                made.add(anc)
        if p != os.path.dirname(_IN_SANDBOX_WORKER):
            argv += ["--ro-bind", p, p]
    argv += ["--ro-bind", WORKER, _IN_SANDBOX_WORKER]
    argv += ["--remount-ro", "/", "--chdir", "/sandbox", "--clearenv"]
    for k, v in {**_sandbox_env("/sandbox"), "MPLCONFIGDIR": "/tmp"}.items():
        argv += ["--setenv", k, v]
    return argv


@functools.cache
def kernel_isolation_error() -> str | None:
    """Why kernel isolation cannot run here (None when it can): tried once per process with a real worker
    command."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    cmd = bwrap_argv(SandboxConfig(), os.geteuid() == 0) + [sys.executable, "-I", "-c", "pass"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap failed to start: {e}"
    if r.returncode != 0:
        return f"bubblewrap cannot create the sandbox here: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
    return None


@functools.cache
def _memory_cgroup_root() -> Path | None:
    """Where per-worker memory cgroups can be made: this process's memory cgroup (v1, or v2 with the memory
    controller delegated to its children), when it is writable; else None (then only RLIMIT_AS holds)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            root = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            if (root / "memory.limit_in_bytes").exists() and os.access(root, os.W_OK):
                return root
        if controllers == "":
            root = Path("/sys/fs/cgroup") / path.lstrip("/")
            try:
                delegated = "memory" in (root / "cgroup.subtree_control").read_text().split()
            except OSError:
                delegated = False
            if delegated and os.access(root, os.W_OK):
                return root
    return None


class _MemoryCgroup:
    """One worker's memory cgroup: the whole process tree shares ``memory_mb`` (RLIMIT_AS bounds each process
    alone, so 64 children could otherwise take 64 times as much); past it the kernel's OOM killer picks a
    process of the tree, never one outside it."""

    def __init__(self, root: Path, memory_mb: int):
        self.path = root / f"agentkit-sbx-{os.getpid()}-{next(_UIDS)}"
        self.path.mkdir()
        limit = str(memory_mb * 2**20)
        v1 = (self.path / "memory.limit_in_bytes").exists()
        for name, value in (
            (("memory.limit_in_bytes", limit), ("memory.memsw.limit_in_bytes", limit))
            if v1
            else (("memory.max", limit), ("memory.swap.max", "0"))
        ):
            if (self.path / name).exists():
                (self.path / name).write_text(value)

    @property
    def procs(self) -> Path:
        """The file a process writes its pid to to join (the worker's first process does, before bwrap)."""
        return self.path / "cgroup.procs"

    def holds(self, pid: int) -> bool:
        try:
            return str(pid) in self.procs.read_text().split()
        except OSError:
            return False

    def remove(self) -> None:
        for _ in range(50):  # the tree's processes exit a moment after the kill
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


@functools.cache
def _libraries() -> dict[str, str]:
    """The shared libraries the worker's seccomp binding loads, looked up once here instead of in every worker."""
    import ctypes.util

    return {name: path for name in ("c", "seccomp") if (path := ctypes.util.find_library(name))}


def _next_uid() -> int:
    """A uid no other process has: one per worker, from a range of 10^4 per host process (as root only)."""
    return 1_000_000_000 + (os.getpid() % 100_000) * 10_000 + next(_UIDS) % 10_000


def _processes_of(uid: int) -> int:
    n = 0
    for name in os.listdir("/proc"):
        try:
            n += name.isdigit() and os.stat(f"/proc/{name}").st_uid == uid
        except OSError:
            pass
    return n


class _Worker:
    def __init__(self, cfg: SandboxConfig, session: bool):
        as_root = os.geteuid() == 0
        kernel = cfg.isolation == "kernel"
        self.workdir = None if kernel else tempfile.mkdtemp(prefix="agentkit-sbx-")
        workdir = "/sandbox" if kernel else self.workdir
        uid = _next_uid() if as_root else None
        # RLIMIT_NPROC counts every process of the uid: an own uid starts at zero, a shared one does not
        nproc = cfg.max_procs if as_root else _processes_of(os.getuid()) + cfg.max_procs
        wcfg = {
            **asdict(cfg),
            "workdir": workdir,
            "writable": [workdir, "/tmp"] if kernel else [workdir],
            "session": session,
            "cpu_hard_s": int(cfg.cpu_s * 1000) + 1,
            "uid": uid,
            "nproc": nproc,
            "pid_namespace": kernel,
            "libraries": _libraries(),
            "runaway_bytes": cfg.runaway_bytes,
            "max_value": cfg.max_value,
        }
        env = _sandbox_env(workdir)  # the weaker mode's code gets it; under bwrap, bwrap sets the code's own
        if kernel:
            cmd = [*bwrap_argv(cfg, as_root), sys.executable, "-I", _IN_SANDBOX_WORKER, json.dumps(wcfg)]
        else:
            cmd = [sys.executable, "-I", WORKER, json.dumps(wcfg)]
        self.cgroup: _MemoryCgroup | None = None
        if (root := _memory_cgroup_root()) is not None:
            try:
                self.cgroup = _MemoryCgroup(root, cfg.memory_mb)
            except OSError:  # cgroups refused here: RLIMIT_AS still bounds each process
                self.cgroup = None
        if self.cgroup is not None:  # joined before bwrap starts, so the whole tree is in it from its first process
            cmd = ["/bin/sh", "-c", '{ echo $$ > "$0"; } 2>/dev/null; exec "$@"', str(self.cgroup.procs), *cmd]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=self.workdir,
            start_new_session=True,
            bufsize=0,
        )
        self.isolation = cfg.isolation
        self.seccomp = False
        self.last_used = time.monotonic()
        self.lock = threading.Lock()
        # the longest honest result line: stdout, stderr and error text cut at max_output, JSON-escaped
        self.max_line = 64 * 1024 + 6 * 10 * cfg.max_output + 8 * cfg.max_value

    def wait_ready(self, timeout: float = 30.0) -> None:
        line = self._readline(timeout)
        try:
            ready = json.loads(line)
            assert ready["ready"] is True
            self.seccomp = ready["seccomp"] is True
        except (TypeError, ValueError, KeyError, AssertionError):
            self.kill()
            raise RuntimeError("the sandbox worker failed to start") from None
        if self.cgroup is not None and not self.cgroup.holds(self.proc.pid):  # the join was refused
            self.cgroup.remove()
            self.cgroup = None

    def _readline(self, timeout: float) -> bytes | None:
        """One line from the worker, read against a deadline: None when the deadline passes first (however
        the line arrives), b"" at end of file, the bytes read so far (no newline) when the line grows past
        ``max_line``."""
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

    def call(self, code: str, cfg: SandboxConfig, result: str | None = None) -> ToolResult:
        start = time.perf_counter()
        self.last_used = time.monotonic()
        try:
            job = {"code": code, "cpu_s": cfg.cpu_s, "result": result}
            self.proc.stdin.write(json.dumps(job).encode() + b"\n")
            line = self._readline(cfg.wall_s)
        except (BrokenPipeError, OSError):
            line = b""
        meta = {
            "seconds": round(time.perf_counter() - start, 4),
            "isolation": self.isolation,
            "seccomp": self.seccomp,
            "memory_cgroup": self.cgroup is not None,
        }
        if line is None:
            self.kill()
            return ToolResult(
                f"Error: wall-time limit of {cfg.wall_s:g} s exceeded; the process was killed.",
                ok=False,
                meta={**meta, "limit": "wall"},
            )
        try:
            r = json.loads(line)
            out = _with_cut(r["stdout"], r["stdout_size"], cfg.max_output) + _with_cut(
                r["stderr"], r["stderr_size"], cfg.max_output
            )
            truncated = r["stdout_size"] > cfg.max_output or r["stderr_size"] > cfg.max_output
            limit = r["limit"]
        except (ValueError, TypeError, KeyError):  # the worker died, or its supervisor was replaced: no exception
            self.kill()
            return ToolResult(
                "Error: the sandbox's supervisor died or returned an unreadable result; the process was killed.",
                ok=False,
                meta={**meta, "limit": "crash"},
            )
        if limit is None:
            if isinstance(r.get("value"), str):
                meta["value"] = json.loads(r["value"])
            return ToolResult(out + r["error"], ok=r["ok"] is True, meta={**meta, "truncated": truncated})
        why = {
            "cpu": f"CPU-time limit of {cfg.cpu_s:g} s exceeded",
            "killed": "the process was killed (the hard CPU limit, or the memory limit of its process tree)",
            "output": f"the program printed more than {cfg.runaway_bytes} bytes and was stopped",
            "protocol": "the program wrote an unreadable status to the sandbox's status pipe",
            "crash": f"the process died ({r['error'] or 'no status'})",
        }[limit]
        return ToolResult(f"{out}Error: {why}.", ok=False, meta={**meta, "limit": limit, "truncated": truncated})

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _with_cut(text: str, size: int, limit: int) -> str:
    """``text`` (the first ``limit`` of ``size`` bytes the program wrote, decoded) with a note of what was cut.
    Sizes are bytes: comparing them with the decoded text's length called non-ASCII output truncated."""
    return text if size <= limit else f"{text}\n...[output truncated: {size - limit} more bytes]\n"


class Sandbox:
    """Runs code under ``SandboxConfig`` limits; thread-safe. Use ``run(code)`` or ``run(code, session_id=…)``.

    The pool holds ``pool_size`` idle workers: a call takes one (or starts one when none is idle) and asks for
    only as many replacements as the pool lacks, so a burst does not leave the pool larger. Workers are reaped
    and replaced off the caller's path; ``close()`` (also run at interpreter exit) waits for that work, so no
    worker process or directory outlives the sandbox.

    Args:
        config: the limits and the isolation (default: ``SandboxConfig()``).

    Raises:
        SandboxUnavailable: kernel isolation asked for but not available here (the message says how to get it).
    """

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        if self.config.isolation == "kernel" and (why := kernel_isolation_error()):
            raise SandboxUnavailable(
                f"{why}. The python sandbox needs kernel isolation (bubblewrap namespaces); install bubblewrap "
                "and allow user namespaces (sysctl kernel.unprivileged_userns_clone=1), or opt in to the weaker "
                "mode with AGENTKIT_SANDBOX_ISOLATION=rlimits-only (tool-server: --isolation rlimits-only): no file, "
                "network or PID isolation"
            )
        if self.config.isolation == "rlimits-only" and os.geteuid() == 0 and (hidden := _private_interpreter()):
            raise SandboxUnavailable(
                f"the 'rlimits-only' sandbox runs code as its own uid, which cannot read the interpreter under "
                f"{hidden}",
                "use the kernel isolation (install bubblewrap) or a Python that others may read",
            )
        if self.config.isolation == "rlimits-only":
            warnings.warn(
                "the python sandbox runs in the weaker 'rlimits-only' mode: sandboxed code can read "
                "this machine's files and see its processes",
                stacklevel=2,
            )
        self._pool: deque[_Worker] = deque()
        self._sessions: dict[str, _Worker] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._pending = self.config.pool_size  # workers being started for the pool
        self._tasks: set[threading.Thread] = set()  # background reaping and refilling
        self._starter = ThreadPoolExecutor(1, thread_name_prefix="sandbox-start")
        for _ in range(self.config.pool_size):
            self._refill()
        self._reaper = threading.Thread(target=self._reap, daemon=True)
        self._reaper.start()
        _OPEN.add(self)

    def _spawn(self, session: bool) -> _Worker:
        # bwrap's --die-with-parent follows the thread that started it: start every worker from one thread that
        # lives as long as the sandbox, or a worker started by a finished refill thread would die with it
        w = self._starter.submit(_Worker, self.config, session).result()
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
            w = None
            while self._pool and w is None:  # a worker that died while idle (killed from outside) is skipped
                w = self._pool.popleft()
                if w.proc.poll() is not None:
                    self._background(w.kill)
                    w = None
            missing = max(0, self.config.pool_size - len(self._pool) - self._pending)
            self._pending += missing
        for _ in range(missing):  # keep the pool warm in the background
            self._background(self._refill)
        return w or self._spawn(session=False)

    def run(self, code: str, session_id: str | None = None, result: str | None = None) -> ToolResult:
        """Run ``code`` in a fresh worker, or in a session's.

        Args:
            code: Python source.
            session_id: run in that session's worker (created on first use), whose globals and files persist
                until ``close_session``; None: a fresh worker, used once.
            result: a Python expression evaluated after ``code`` in its namespace; its value, which must be JSON,
                comes back as ``meta["value"]`` over the sandbox's result channel, never over what the program
                prints. The code then runs in a child process holding no channel to the supervisor, so printing,
                or writing to any descriptor, cannot forge a value (``agentkit.gamerl.code2logic`` takes its
                answers this way). Only for calls without a session.

        Returns:
            What the code printed (and its final expression's value), ``ok`` False on an error or a limit
            (``meta["limit"]``: wall, cpu, memory…).

        Raises:
            ValueError: ``result`` with a ``session_id``.
        """
        if result is not None and session_id is not None:
            raise ValueError("a result expression is only for calls without a session")
        if session_id is None:
            w = self._take()
            try:
                return w.call(code, self.config, result)
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
        """End a session: its worker, globals and files are gone (an unknown id is ignored)."""
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
        self._starter.shutdown(wait=False)
        _OPEN.discard(self)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
