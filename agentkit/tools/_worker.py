"""Sandbox supervisor: run as ``python -I _worker.py CONFIG_JSON`` by agentkit.tools.sandbox. Stdlib, and
pyseccomp (ctypes over libseccomp) for the syscall filter.

Two processes, so that the sandboxed code never holds the result channel:

- the **supervisor** (this file's ``main``) owns the result channel (its stdout) and the job channel (its
  stdin). It sets the resource limits, drops to the sandbox's uid when started as root, marks itself
  non-dumpable (so code running as the same uid can neither open ``/proc/<pid>/fd/*`` nor ptrace it), and
  forks the runner;
- the **runner** closes every descriptor but its own four: stdin is /dev/null, stdout and stderr are pipes
  the supervisor reads (keeping ``max_output`` bytes, killing a runaway printer), fd 3 brings it jobs and fd 4
  takes back one status line per job. It installs the audit hook (defence in depth only: the boundary is the
  kernel, see ``sandbox.py``) and runs the code.

Before forking, the supervisor loads a seccomp filter (inherited by every descendant, irremovable): the
syscalls a program needs for computing stay allowed; the kernel interfaces a sandboxed program has no use for and
that local exploits go through fail with EPERM (``DENIED``): ptrace and cross-process memory access, new
namespaces (``unshare``, ``setns``, namespace flags of ``clone``; ``clone3`` answers ENOSYS so libc falls back to
``clone``, whose flags the filter can read), mounts, keyrings, BPF, perf events, userfaultfd, io_uring, modules,
and the clock and reboot calls.

The supervisor builds each result from what it observed: the bytes on the pipes, the runner's exit status
(SIGXCPU is the CPU limit) and its status line, which it parses strictly (anything else: ``limit: protocol``).
After every call it kills every other process the call left behind.
"""

import ast
import ctypes
import json
import os
import resource
import select
import signal
import sys
import traceback

BLOCKED_EVENTS = {
    "os.fork",
    "os.forkpty",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "subprocess.Popen",
    "pty.spawn",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.cdata",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.getaddrinfo",
}
PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE = 38, 4
DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "open_by_handle_at",
    "name_to_handle_at",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "fanotify_init",
    "lookup_dcookie",
    "vhangup",
    "personality",
)
CLONE_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080)
JOB_FD, STATUS_FD = 3, 4


def set_limits(cfg):
    mem = cfg["memory_mb"] * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["max_file_mb"] * 2**20,) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["nproc"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu_hard_s"],) * 2)


def drop_privileges(cfg):
    """As root: become the sandbox's own uid (no other process has it), with no way back to privilege."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # setuid binaries grant nothing from here on
    if cfg["uid"] is not None and os.geteuid() == 0:
        os.chown(cfg["workdir"], cfg["uid"], cfg["uid"])
        os.setgroups([])
        os.setgid(cfg["uid"])
        os.setuid(cfg["uid"])
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # same-uid code cannot read our descriptors or memory


def import_seccomp(libraries):
    """pyseccomp, or None. It looks its libraries up with ``ctypes.util.find_library`` (which runs
    ``ldconfig -p``, twice, on every start): the parent looked them up once and passes ``libraries``."""
    import ctypes.util

    lookup = ctypes.util.find_library
    ctypes.util.find_library = lambda name: libraries.get(name) or lookup(name)
    try:
        import pyseccomp
    except (ImportError, OSError, RuntimeError):
        return None
    finally:
        ctypes.util.find_library = lookup
    return pyseccomp


def load_seccomp(sc):
    """The syscall filter above; returns whether it is loaded (False: pyseccomp or libseccomp is missing)."""
    import errno

    if sc is None:
        return False
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in DENIED:
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
        except (ValueError, RuntimeError, OSError):  # a syscall this architecture or libseccomp does not know
            pass
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in CLONE_NAMESPACES:  # new user, mount, PID, net, IPC, UTS or cgroup namespaces, and CLONE_NEWTIME
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.load()
    return True


GATE = {"fork": False}  # the runner's own fork (run_apart) passes the hook; the code's never does


def audit(writable):
    def hook(event, args):
        if event in BLOCKED_EVENTS and not (event == "os.fork" and GATE["fork"]):
            what = (
                "network access"
                if event.startswith("socket")
                else "starting processes"
                if "ctypes" not in event
                else "ctypes"
            )
            raise PermissionError(f"{what} is not allowed in the sandbox ({event})")
        if event == "open" and isinstance(args[0], (str, bytes)):
            mode = args[1] if isinstance(args[1], str) else ""
            flags = args[2] if isinstance(args[2], int) else 0
            if any(c in mode for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC):
                path = os.path.realpath(os.fsdecode(args[0]))
                if not any(path == d or path.startswith(d + os.sep) for d in writable):
                    raise PermissionError(f"writing outside the sandbox directory is not allowed: {path}")

    sys.addaudithook(hook)


# ----------------------------------------------------------------------------------------------- the runner


def runner(cfg, fds):
    """The child that runs the code. ``fds``: (job_r, out_w, err_w, status_w) of pipes to the supervisor."""
    job_r, out_w, err_w, status_w = fds
    null = os.open(os.devnull, os.O_RDONLY)
    for src, dst in ((null, 0), (out_w, 1), (err_w, 2), (job_r, JOB_FD), (status_w, STATUS_FD)):
        os.dup2(src, dst)
    os.closerange(STATUS_FD + 1, 1 << 16)  # the result and job channels of the supervisor among them
    os.setpgid(0, 0)
    sys.stdin = open(0, encoding="utf-8")
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    jobs = open(JOB_FD, encoding="utf-8")
    status = open(STATUS_FD, "w", encoding="utf-8")
    audit([os.path.realpath(d) for d in cfg["writable"]])
    ns = {"__name__": "__main__"}
    for line in jobs:
        job = json.loads(line)
        used = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
        soft = max(1, round(used + job["cpu_s"]))
        hard = soft + 1 if not cfg["session"] else resource.getrlimit(resource.RLIMIT_CPU)[1]
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))  # a child that ignores SIGXCPU dies at hard
        if job.get("result") is not None and not cfg["session"]:
            line = run_apart(job["code"], job["result"], ns, cfg)
        else:
            line = {"ok": False, "error": ""}
            line["ok"], line["error"] = execute(job["code"], ns, cfg["max_output"])
            flush_output()
        status.write(json.dumps(line) + "\n")
        status.flush()
        if not cfg["session"]:
            os._exit(0 if line["ok"] else 1)  # one call: its exit status confirms the status line
    os._exit(0)


def flush_output():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass


def run_apart(code, expr, ns, cfg):
    """Run ``code`` in a child that holds neither the status nor the job channel, then evaluate ``expr`` there;
    the child hands back ``{"ok", "error", "value"}`` (``value``: the expression's JSON) on a pipe of its own, and
    this process, which never runs the code, checks it and returns the status line. What the code prints, or
    writes to any descriptor it holds, cannot become a result: only the expression's value can. A child killed
    by a signal (the CPU limit) takes this process down the same way, so the supervisor reports the limit."""
    cap = cfg["max_value"]
    r, w = os.pipe()
    GATE["fork"] = True
    try:
        pid = os.fork()
    finally:
        GATE["fork"] = False
    if pid == 0:
        try:
            os.close(r)
            os.close(STATUS_FD)
            os.close(JOB_FD)
            ok, error = execute(code, ns, cfg["max_output"])
            value = None
            if ok:
                try:
                    value = json.dumps(eval(compile(expr, "<result>", "eval"), ns))
                except BaseException as e:
                    ok, error = False, "".join(traceback.format_exception_only(type(e), e))
            flush_output()
            data = json.dumps({"ok": ok, "error": error, "value": value}).encode()
            while data:
                data = data[os.write(w, data) :]
        finally:
            os._exit(0)
    os.close(w)
    data, size = bytearray(), 0
    while chunk := os.read(r, 65536):
        size += len(chunk)
        if size > cap:  # more than a value may be: stop it
            os.kill(pid, signal.SIGKILL)
            break
        data += chunk
    os.close(r)
    status = os.waitpid(pid, 0)[1]
    if size > cap:
        return {"ok": False, "error": f"the result is larger than {cap} bytes\n", "value": None}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    try:
        out = json.loads(bytes(data))
        assert isinstance(out["ok"], bool) and isinstance(out["error"], str)
        assert out["value"] is None or isinstance(out["value"], str) and out["ok"]
        json.loads(out["value"] or "null")
    except (ValueError, KeyError, TypeError, AssertionError):
        return {"ok": False, "error": "the code's process returned an unreadable result\n", "value": None}
    return {"ok": out["ok"], "error": out["error"], "value": out["value"]}


def execute(code, ns, max_output):
    try:
        tree = ast.parse(code, "<sandbox>")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<sandbox>", "exec"), ns)
        if last is not None:  # like a REPL: show the value of a final expression
            value = eval(compile(ast.Expression(last.value), "<sandbox>", "eval"), ns)
            if value is not None:
                print(repr(value))
        return True, ""
    except BaseException as e:  # the model must see every error, including SystemExit and MemoryError
        if isinstance(e, MemoryError):
            return False, "MemoryError: the sandbox's memory limit was reached\n"
        error = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
        # keep the end of a long traceback: the error line is what the model needs
        return False, error if len(error) <= max_output else "...\n" + error[-max_output:]


# ------------------------------------------------------------------------------------------- the supervisor


class Capped:
    """Bytes from one pipe: keeps the first ``limit``, counts the rest."""

    def __init__(self, limit):
        self.limit, self.kept, self.size = limit, bytearray(), 0

    def add(self, chunk):
        if len(self.kept) < self.limit:
            self.kept += chunk[: self.limit - len(self.kept)]
        self.size += len(chunk)

    def text(self):
        return self.kept.decode("utf-8", errors="replace")


def start_runner(cfg):
    pipes = [os.pipe() for _ in range(4)]  # job, stdout, stderr, status
    pid = os.fork()
    if pid == 0:
        try:
            runner(cfg, (pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]))
        finally:
            os._exit(70)
    for r, w in pipes:  # keep the job pipe's write end and the three read ends
        os.close(r if (r, w) == pipes[0] else w)
    return pid, pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]


def kill_strays(cfg, keep=None):
    """Kill every process the call left behind except ``keep`` (a session's runner). Every process the supervisor
    may signal belongs to this sandbox when it has a PID namespace or its own uid; otherwise (the weaker mode
    without root) only the runner's process group is known to be the sandbox's."""
    own = cfg["pid_namespace"] or cfg["uid"] is not None
    if keep is None:
        try:
            os.kill(-1, signal.SIGKILL) if own else os.killpg(cfg["runner_pgid"], signal.SIGKILL)
        except OSError:
            pass
        return
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me, keep):
            continue
        try:
            if cfg["pid_namespace"] or (
                _real_uid(name) == os.getuid() if own else os.getpgid(int(name)) == cfg["runner_pgid"]
            ):
                os.kill(int(name), signal.SIGKILL)
        except OSError:
            pass


def _real_uid(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Uid:"))


def serve_job(cfg, runner_fds, job_line):
    """Forward one job to the runner, collect its output, and return the result (a dict)."""
    pid, job_w, out_r, err_r, status_r = runner_fds
    out, err, status = Capped(cfg["max_output"]), Capped(cfg["max_output"]), bytearray()
    os.write(job_w, job_line)
    pidfd = os.pidfd_open(pid)
    streams, exit_status, limit = {out_r: out, err_r: err, status_r: None}, None, None
    while True:
        ready = select.select([*streams, pidfd], [], [])[0]
        for fd in (fd for fd in ready if fd in streams):
            chunk = os.read(fd, 65536)
            if streams[fd] is not None:
                streams[fd].add(chunk)
            else:
                status += chunk
            if (
                not chunk
                or streams[fd] is None
                and (cfg["session"] and b"\n" in status or len(status) > 16 * cfg["max_output"] + 8 * cfg["max_value"])
            ):
                del streams[fd]  # end of file, a session's status line, or more than a status line can be
        if out.size + err.size > cfg["runaway_bytes"]:  # a runaway printer: stop it now, not at the CPU limit
            os.kill(pid, signal.SIGKILL)
            limit = "output"
        if pidfd in ready or limit:
            exit_status = os.waitpid(pid, 0)[1]
            break
        if cfg["session"] and status_r not in streams:
            break
    os.close(pidfd)
    kill_strays(cfg, keep=pid if exit_status is None else None)
    drain(out_r, out)
    drain(err_r, err)
    result = {
        "stdout": out.text(),
        "stderr": err.text(),
        "stdout_size": out.size,
        "stderr_size": err.size,
        "ok": False,
        "error": "",
        "limit": limit,
    }
    if limit is None and exit_status is not None and os.WIFSIGNALED(exit_status):
        sig = os.WTERMSIG(exit_status)
        result["limit"] = {signal.SIGXCPU: "cpu", signal.SIGKILL: "killed"}.get(sig, "crash")
        result["error"] = f"signal {sig}, {signal.Signals(sig).name}"
    code = 0 if exit_status is None or os.WIFSIGNALED(exit_status) else os.waitstatus_to_exitcode(exit_status)
    if not result["limit"] and code not in (0, 1):  # the runner exits 0 or 1; anything else is the code's doing
        result["limit"], result["error"] = "crash", f"exit status {code}"
    if result["limit"]:
        return result
    try:
        # a session's call ends at its first status line; a single call's runner exits, and its last line and
        # its exit status decide (so a forged line written before an exception changes nothing)
        lines = bytes(status).split(b"\n")
        parsed = json.loads(lines[0] if cfg["session"] else lines[-2] if len(lines) > 1 else b"")
        assert isinstance(parsed, dict) and isinstance(parsed["ok"], bool) and isinstance(parsed["error"], str)
        assert parsed.get("value") is None or isinstance(parsed["value"], str)
    except (ValueError, UnicodeDecodeError, KeyError, AssertionError):
        result["limit"] = "protocol" if status else "crash"
        result["error"] = "" if status else f"exit status {code}"
        return result
    result["ok"], result["error"] = parsed["ok"] and code == 0, parsed["error"][-8 * cfg["max_output"] :]
    if result["ok"] and parsed.get("value") is not None:
        result["value"] = parsed["value"]
    return result


def drain(fd, sink):
    os.set_blocking(fd, False)
    try:
        while chunk := os.read(fd, 65536):
            sink.add(chunk)
    except OSError:
        pass


def main():
    cfg = json.loads(sys.argv[1])
    sc = import_seccomp(cfg["libraries"])
    set_limits(cfg)
    drop_privileges(cfg)
    seccomp = load_seccomp(sc)
    os.chdir(cfg["workdir"])
    channel = sys.stdout.buffer
    runner_fds = start_runner(cfg)
    cfg["runner_pgid"] = runner_fds[0]
    channel.write(json.dumps({"ready": True, "seccomp": seccomp}).encode() + b"\n")
    channel.flush()
    for line in sys.stdin.buffer:
        result = serve_job(cfg, runner_fds, line)
        channel.write(json.dumps(result).encode() + b"\n")
        channel.flush()
        if not cfg["session"] or result["limit"]:
            break


if __name__ == "__main__":
    main()
