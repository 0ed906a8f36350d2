"""Sandbox worker: run as ``python -I _worker.py CONFIG_JSON`` by agentkit.tools.sandbox. Stdlib only.

Start-up, while still privileged (root): new network namespace (no interface is up, so nothing is reachable,
not even loopback) and mount namespace with private tmpfs over /tmp, /var/tmp and /dev/shm; resource limits;
then drop to ``nobody``. Without root these steps are skipped and only the limits and the audit hook apply.
Then: print ``READY`` and answer one JSON job per stdin line with one JSON result line on the result channel
(a copy of the original stdout); descriptors 1 and 2 are pointed at /dev/null first, so raw writes there
(``os.write(1, …)``, C code) reach no result line. The channel is still a descriptor of this process, which
sandboxed code can find by number: the parent reads it against the call's deadline and turns anything that is not
a well-formed result into an error result.
"""

import ast
import ctypes
import io
import json
import os
import resource
import sys
import traceback

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 0x1000, 0x2000, 0x4000, 0x40000
BLOCKED_EVENTS = {"os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                  "subprocess.Popen", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
                  "socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo"}


def isolate(cfg):
    """Namespaces and privilege drop (root only). Returns the isolation level reached."""
    if os.geteuid() != 0:
        return "limits"
    libc = ctypes.CDLL(None, use_errno=True)
    level = "limits"
    if libc.unshare(CLONE_NEWNET | CLONE_NEWNS) == 0:
        level = "namespaces"
        libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
        for d in (b"/tmp", b"/var/tmp", b"/dev/shm"):
            libc.mount(b"tmpfs", d, b"tmpfs", 0, f"size={cfg['tmpfs_mb']}m,mode=1777".encode())
        expose_interpreter(libc)
    os.makedirs(cfg["workdir"], exist_ok=True)
    os.chown(cfg["workdir"], 65534, 65534)
    set_limits(cfg)
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    return level + "+nobody"


def expose_interpreter(libc):
    """Let ``nobody`` read Python's own files when they sit under a private directory (e.g. /root/.pyenv).

    For each ancestor that others cannot enter, mount an empty tmpfs over it (hiding the rest of it, e.g.
    root's home) and move back only the entries that lead to the interpreter's paths.
    """
    needed = {os.path.realpath(p) for p in [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path] if p}
    needed = {p for p in needed if os.path.exists(p)}
    closed = {}
    for p in needed:
        parts = p.split(os.sep)
        for i in range(2, len(parts)):
            anc = os.sep.join(parts[:i])
            if not os.stat(anc).st_mode & 0o001:
                closed.setdefault(anc, set()).add(parts[i])
                break
    for k, (anc, children) in enumerate(sorted(closed.items())):
        stage = f"/tmp/.expose-{k}"
        for child in children:
            os.makedirs(f"{stage}/{child}")
            libc.mount(f"{anc}/{child}".encode(), f"{stage}/{child}".encode(), None, MS_BIND | MS_REC, None)
        libc.mount(b"tmpfs", anc.encode(), b"tmpfs", 0, b"size=1m,mode=0755")
        for child in children:
            os.makedirs(f"{anc}/{child}")
            libc.mount(f"{stage}/{child}".encode(), f"{anc}/{child}".encode(), None, MS_MOVE, None)


def set_limits(cfg):
    mem = cfg["memory_mb"] * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["max_file_mb"] * 2**20,) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["max_procs"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu_hard_s"],) * 2)


class Capped(io.TextIOBase):
    """A text sink that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit):
        self.limit, self.parts, self.size, self.overflow_writes = limit, [], 0, 0

    def write(self, s):
        if self.size < self.limit:
            self.parts.append(s[: self.limit - self.size])
        elif (n := self.overflow_writes + 1) > 10_000:  # a runaway printer: stop it instead of burning its CPU
            raise RuntimeError("output limit exceeded: the program kept printing after its output was cut")
        else:
            self.overflow_writes = n
        self.size += len(s)
        return len(s)

    def text(self):
        return "".join(self.parts)


def audit(workdir):
    def hook(event, args):
        if event in BLOCKED_EVENTS:
            what = "network access" if event.startswith("socket") else "starting processes" if "ctypes" not in event \
                else "ctypes"
            raise PermissionError(f"{what} is not allowed in the sandbox ({event})")
        if event == "open" and isinstance(args[0], (str, bytes)):
            mode = args[1] if isinstance(args[1], str) else ""
            flags = args[2] if isinstance(args[2], int) else 0
            if any(c in mode for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC):
                path = os.path.realpath(os.fsdecode(args[0]))
                if not (path == workdir or path.startswith(workdir + os.sep)):
                    raise PermissionError(f"writing outside the sandbox directory is not allowed: {path}")
    sys.addaudithook(hook)


def run(code, ns, cfg, cpu_s):
    used = resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime
    soft = int(used + cpu_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.getrlimit(resource.RLIMIT_CPU)[1]))
    out, err = Capped(cfg["max_output"]), Capped(cfg["max_output"])
    real = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    ok, error = True, ""
    try:
        tree = ast.parse(code, "<sandbox>")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<sandbox>", "exec"), ns)
        if last is not None:  # like a REPL: show the value of a final expression
            value = eval(compile(ast.Expression(last.value), "<sandbox>", "eval"), ns)
            if value is not None:
                print(repr(value))
    except BaseException as e:  # the model must see every error, including SystemExit and MemoryError
        ok = False
        if isinstance(e, MemoryError):
            error = "MemoryError: the sandbox's memory limit was reached\n"
        else:  # keep the end of a long traceback: the error line is what the model needs
            error = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
            if len(error) > cfg["max_output"]:
                error = "...\n" + error[-cfg["max_output"]:]
    finally:
        sys.stdout, sys.stderr = real
    return {"ok": ok, "stdout": out.text(), "stderr": err.text(), "stdout_size": out.size, "stderr_size": err.size,
            "error": error}


def main():
    cfg = json.loads(sys.argv[1])
    level = isolate(cfg) if cfg["isolate"] else "limits"
    if level == "limits":
        set_limits(cfg)
    os.chdir(cfg["workdir"])
    channel = os.fdopen(os.dup(1), "w")
    quiet = os.open(os.devnull, os.O_WRONLY)  # raw writes to fd 1 and 2 (os.write, C code) reach no result line
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    os.close(quiet)
    audit(os.path.realpath(cfg["workdir"]))
    sys.stdin = io.TextIOWrapper(os.fdopen(0, "rb"))
    channel.write(json.dumps({"ready": True, "isolation": level}) + "\n")
    channel.flush()
    ns = {"__name__": "__main__"}
    for line in sys.stdin:
        job = json.loads(line)
        result = run(job["code"], ns, cfg, job["cpu_s"])
        channel.write(json.dumps(result) + "\n")
        channel.flush()
        if not cfg["session"]:
            break


if __name__ == "__main__":
    main()
