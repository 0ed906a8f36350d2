"""The python sandbox contains faults and reports them; the sandbox stays usable afterwards."""

import os
import socket
import threading
import time

import pytest

from agentkit.tools import TOOLS, Tool, openai_schema
from agentkit.tools.sandbox import Sandbox, SandboxConfig


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(cpu_s=1, wall_s=3, memory_mb=512, max_output=200, pool_size=2,
                               idle_timeout_s=1.0)) as sb:
        yield sb


def test_prints_and_final_expression(sandbox):
    r = sandbox.run("print(1 + 1)\nx = 21\nx * 2")
    assert r.ok and r.output == "2\n42\n"
    r = sandbox.run("1/0")
    assert not r.ok and "ZeroDivisionError" in r.output


def test_infinite_loop_hits_cpu_limit(sandbox):
    r = sandbox.run("while True:\n    pass")
    assert not r.ok and r.meta["limit"] in ("cpu", "killed") and "limit" in r.output
    assert sandbox.run("print('alive')").output == "alive\n"


def test_sleeping_hits_wall_limit(sandbox):
    t = time.perf_counter()
    r = sandbox.run("import time\ntime.sleep(60)")
    assert not r.ok and r.meta["limit"] == "wall" and time.perf_counter() - t < 10


def test_memory_bomb(sandbox):
    r = sandbox.run("chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 2**20))")
    assert not r.ok and "memory limit" in r.output


def test_fork_bomb_and_subprocess(sandbox):
    r = sandbox.run("import os\nwhile True:\n    os.fork()")
    assert not r.ok and "not allowed" in r.output
    r = sandbox.run("import subprocess\nsubprocess.run(['ls', '/'])")
    assert not r.ok and "not allowed" in r.output


def test_network_connection_is_refused(sandbox):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(2)
    port = server.getsockname()[1]
    got = []
    t = threading.Thread(target=lambda: got.append(_accept(server)))
    t.start()
    r = sandbox.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1).send(b'x')")
    t.join()
    server.close()
    assert not r.ok and got == [None]  # the test's listener saw no connection


def _accept(server):
    try:
        return server.accept()
    except OSError:
        return None


def test_writes_are_confined(sandbox, tmp_path):
    target = tmp_path / "escaped.txt"
    r = sandbox.run(f"open({str(target)!r}, 'w').write('x')")
    assert not r.ok and "PermissionError" in r.output and not target.exists()
    r = sandbox.run(f"import os\nfd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)")
    assert not r.ok and not target.exists()
    r = sandbox.run("open('inside.txt', 'w').write('ok')\nprint(open('inside.txt').read())")
    assert r.ok and r.output == "ok\n"


def test_huge_output_is_truncated(sandbox):
    r = sandbox.run("print('x' * 10**6)")
    assert r.meta["truncated"] and len(r.output) < 400 and "output truncated" in r.output
    r = sandbox.run("while True:\n    print('spam')")  # a runaway printer is stopped, not left to hit the CPU limit
    assert not r.ok and r.meta["truncated"] and len(r.output) < 1000


def test_sessions_persist_and_idle_out(sandbox):
    assert sandbox.run("a = 41", session_id="s1").ok
    assert sandbox.run("a + 1", session_id="s1").output == "42\n"
    assert "NameError" in sandbox.run("a", session_id="s2").output  # sessions are separate
    time.sleep(3.5)  # idle timeout 1 s; the reaper checks every 0.5 s
    assert "NameError" in sandbox.run("a", session_id="s1").output


def test_concurrent_calls(sandbox):
    results = [None] * 8
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, sandbox.run(f"print({i} * {i})")))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.output for r in results] == [f"{i * i}\n" for i in range(8)]


def test_python_tool_protocol(sandbox):
    tool = TOOLS.get("python")(sandbox=sandbox)
    assert isinstance(tool, Tool) and openai_schema(tool)["function"]["parameters"]["required"] == ["code"]
    assert tool(code="print(6 * 7)").output == "42\n"
    assert not tool(code="").ok and not tool(cmd="x").ok


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and the drop to nobody need root")
def test_isolation_level_as_root(sandbox):
    r = sandbox.run("import os\nprint(os.getuid())")
    assert r.output == "65534\n" and r.meta["isolation"] == "namespaces+nobody"


def test_sandbox_bench_runs():
    from agentkit.eval.bench.sandbox import run

    res = run(n=3, pool_size=1)
    assert res["sandbox"]["p50_ms"] > 0 and res["python_c"]["p50_ms"] > 0 and res["isolation"]


# The worker's result channel is a descriptor of the sandboxed process itself: code can find it by number.
CHANNEL_ATTACK = """import os, time
for fd in [1] + list(range(3, 64)):
    try:
        os.write(fd, {payload!r})
    except OSError:
        pass
{after}"""


def _bounded(fn, seconds: float):
    """``fn()`` in a thread; fails the test instead of hanging it when ``fn`` blocks past ``seconds``."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert out, f"the call was still blocked after {seconds:g} s"
    return out[0]


def test_a_partial_line_on_the_channel_cannot_outlive_the_wall_limit(sandbox):
    """Code writes half a result line where the parent reads results, then sleeps: the parent's read has the
    call's deadline (it used to block in readline for ever)."""
    code = CHANNEL_ATTACK.format(payload=b'{"ok": tr', after="time.sleep(60)")
    r = _bounded(lambda: sandbox.run(code), 3 + 5)
    assert not r.ok and r.meta["limit"] == "wall"
    assert sandbox.run("print('alive')").output == "alive\n"


def test_garbage_on_the_channel_is_an_error_result(sandbox):
    """Garbage where the parent reads results is an error result, never an exception from the tool."""
    for payload, after in ((b"garbage\n", ""), (b"\xff" * 70_000, "time.sleep(0.5)"), (b"[1, 2]\n", "")):
        code = CHANNEL_ATTACK.format(payload=payload, after=after)
        r = _bounded(lambda code=code: sandbox.run(code), 3 + 5)
        assert not r.ok and r.meta["limit"] == "protocol" and "unreadable result" in r.output
    assert sandbox.run("print('alive')").output == "alive\n"


def test_raw_writes_to_stdout_do_not_reach_the_channel(sandbox):
    """``os.write(1, …)`` (C extensions print this way too) cannot forge a result line."""
    r = sandbox.run("import os\nos.write(1, b'{\"ok\": true, \"stdout\": \"FORGED\"}\\n')\nprint('real')")
    assert r.ok and r.output == "real\n"


def test_the_pool_holds_its_size_under_a_burst():
    """16 calls at once on a pool of 2: the calls that found no idle worker started their own, and afterwards
    the pool is back to 2 idle workers (it used to keep one more per call: 18 after this burst)."""
    with Sandbox(SandboxConfig(pool_size=2, wall_s=5)) as sb:
        results = []
        threads = [threading.Thread(target=lambda: results.append(sb.run("print(7)"))) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.output for r in results] == ["7\n"] * 16
        deadline = time.monotonic() + 20
        while getattr(sb, "_pending", 0) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(sb._pool) == 2 and sb._pending == 0


def test_no_worker_or_directory_outlives_the_process(tmp_path):
    """A program that uses the sandbox (calls killed at the wall limit among them) and exits without closing it
    leaves no worker directory and no worker process: close() runs at exit and waits for the reaping."""
    import subprocess
    import sys

    script = ("from agentkit.tools.sandbox import Sandbox, SandboxConfig\n"
              "sb = Sandbox(SandboxConfig(pool_size=2, wall_s=1, cpu_s=1))\n"
              "for code in ['print(1)', 'import time; time.sleep(5)', 'while True: pass', 'print(2)']:\n"
              "    sb.run(code)\n"
              "sb.run('x = 1', session_id='s')\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("agentkit-sbx-")] == []
    alive = subprocess.run(["pgrep", "-f", f"{tmp_path}/agentkit-sbx-"], capture_output=True, text=True).stdout
    assert alive.strip() == ""
