"""Tool servers on loopback: contract, auth, errors, concurrency limits; remote tools work like local ones."""

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from agentkit.agent import rollout
from agentkit.data import MultiHopKB
from agentkit.server.http import ServerProcess
from agentkit.testing.processes import gone
from agentkit.testing.scripted import ScriptedEngine
from agentkit.testing.servers import serve_in_thread
from agentkit.tool_servers.python_sandbox import create_app as python_app
from agentkit.tool_servers.search import create_app as search_app
from agentkit.tools.remote import RemoteTool
from agentkit.tools.sandbox import SandboxConfig
from agentkit.tools.search import SearchTool


def _post(url, body, key=None, raw=None):
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    req = urllib.request.Request(url, data=raw if raw is not None else json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def python_server():
    with serve_in_thread(
        python_app(SandboxConfig(pool_size=2, cpu_s=2, wall_s=5), api_key="k1", max_concurrency=2)
    ) as url:
        yield url


def test_python_server_contract_and_auth(python_server):
    with urllib.request.urlopen(python_server + "/health") as r:
        assert json.loads(r.read()) == {"status": "ok", "tool": "python"}  # no key needed
    code, body = _post(python_server + "/v1/call", {"arguments": {"code": "print(1)"}})
    assert code == 401 and body["error"]["type"] == "authentication_error"
    code, body = _post(python_server + "/v1/call", None, key="k1", raw=b"{not json")
    assert code == 400 and body["error"]["type"] == "invalid_request_error"
    code, body = _post(python_server + "/v1/call", {"arguments": "nope"}, key="k1")
    assert code == 400 and body["error"]["param"] == "arguments"
    with urllib.request.urlopen(python_server + "/openapi.json") as r:
        assert "/v1/call" in json.loads(r.read())["paths"]


def test_remote_python_tool_with_sessions(python_server):
    tool = RemoteTool(python_server, api_key="k1")
    assert tool.name == "python" and tool.parameters["required"] == ["code"]
    assert tool(code="print(6 * 7)").output == "42\n"
    assert tool(code="x = 5", session_id="s").ok and tool(code="x + 1", session_id="s").output == "6\n"
    tool.close_session("s")  # DELETE /v1/sessions/s: its globals are gone
    assert "NameError" in tool(code="x", session_id="s").output
    tool.close_session("never-opened")  # an unknown id is no error
    bad = RemoteTool(python_server, api_key="k1")
    bad.api_key = "wrong"
    r = bad(code="print(1)")
    assert not r.ok and "401" in r.output


def test_remote_tools_in_the_agent_loop(python_server):
    script = {"17 x 23": ["<python>print(17 * 23)</python>", "<answer>391</answer>"]}
    (t,) = rollout(ScriptedEngine(script), ["17 x 23"], [RemoteTool(python_server, api_key="k1")])
    assert t.answer == "391" and "391" in t.segments[1].text


def test_concurrency_limit_answers_503_when_full():
    with serve_in_thread(python_app(SandboxConfig(pool_size=1, wall_s=5), max_concurrency=1)) as url:
        slow = threading.Thread(
            target=_post, args=(url + "/v1/call", {"arguments": {"code": "import time\ntime.sleep(1.5)"}})
        )
        slow.start()
        time.sleep(0.3)
        codes = []
        ts = [
            threading.Thread(target=lambda: codes.append(_post(url + "/v1/call", {"arguments": {"code": "1"}})[0]))
            for _ in range(3)
        ]
        for t in ts:
            t.start()
        for t in ts + [slow]:
            t.join()
        assert codes.count(200) == 3  # waiting requests are served once the slot frees up
    from agentkit.tool_servers.app import build_app
    from agentkit.tools.python import PythonTool

    tool = PythonTool(SandboxConfig(pool_size=1, wall_s=5))
    try:
        with serve_in_thread(build_app(tool, max_concurrency=1, max_queue=0)) as url:
            slow = threading.Thread(
                target=_post, args=(url + "/v1/call", {"arguments": {"code": "import time\ntime.sleep(2)"}})
            )
            slow.start()
            time.sleep(0.8)  # the slow call holds the only slot by now
            code, body = _post(url + "/v1/call", {"arguments": {"code": "1"}})
            slow.join()
            assert code == 503 and body["error"]["type"] == "server_busy"
    finally:
        tool.close()


def test_search_server_matches_local(tmp_path):
    kb = MultiHopKB.build(seed=3)
    path = kb.write_corpus(tmp_path / "corpus.jsonl")
    local = SearchTool(path)
    with serve_in_thread(search_app(str(path))) as url:
        remote = RemoteTool(url)
        q = kb.questions(1, seed=3)[0].question
        assert remote(query=q).output == local(query=q).output
        assert not remote(query="").ok


def test_a_busy_server_answers_health_and_503_with_retry_after():
    """Every slot busy and the queue's wait over: 503 with Retry-After, not silence; /health answers meanwhile."""
    from agentkit.tool_servers.app import build_app
    from agentkit.tools.python import PythonTool

    tool = PythonTool(SandboxConfig(pool_size=1, wall_s=5))
    try:
        with serve_in_thread(build_app(tool, max_concurrency=1, queue_timeout_s=0.5)) as url:
            slow = threading.Thread(
                target=_post, args=(url + "/v1/call", {"arguments": {"code": "import time\ntime.sleep(3)"}})
            )
            slow.start()
            time.sleep(0.5)
            t = time.perf_counter()
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                assert r.status == 200 and time.perf_counter() - t < 1
            req = urllib.request.Request(
                url + "/v1/call", data=b'{"arguments": {"code": "1"}}', headers={"Content-Type": "application/json"}
            )
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=10)
            assert e.value.code == 503 and e.value.headers["Retry-After"] == "1"
            assert json.loads(e.value.read())["error"]["type"] == "server_busy"
            slow.join()
    finally:
        tool.close()


# Hostile code through `agentkit tool-server python` started as a user would, an API key on its command line.
PARTIAL = (
    "import os, time\nfor fd in range(1, 64):\n    try: os.write(fd, b'{\"ok\": tr')\n    except OSError: pass\n"
    "time.sleep(60)"
)


UNHOOK = "import gc\nfor o in gc.get_objects():\n    if isinstance(o, set) and 'subprocess.Popen' in o: o.clear()\n"


def test_attacks_through_the_cli_tool_server(tmp_path):
    key = f"key-{time.time_ns()}"
    args = [
        "-m",
        "agentkit",
        "tool-server",
        "python",
        "--api-key",
        key,
        "--max-concurrency",
        "4",
        "--wall-s",
        "3",
        "--cpu-s",
        "1",
        "--memory-mb",
        "515",
    ]
    with ServerProcess(args, tmp_path / "server.log", startup_timeout_s=60) as server:
        tool = RemoteTool(server.url, api_key=key)
        # 8 calls that write half a result line and sleep: each ends at its wall limit, the server keeps answering
        results, t = [], time.perf_counter()
        threads = [threading.Thread(target=lambda: results.append(tool(code=PARTIAL))) for _ in range(8)]
        for th in threads:
            th.start()
        time.sleep(0.5)
        with urllib.request.urlopen(server.url + "/health", timeout=2) as r:
            assert r.status == 200
        for th in threads:
            th.join(30)
        assert len(results) == 8 and all(r.meta.get("limit") == "wall" for r in results), results
        assert time.perf_counter() - t < 15
        # the server's command line (its API key) is out of sight; killing everything reaches only the caller
        scan = UNHOOK + (
            "import os\nhits = 0\nfor p in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try: hits += b'" + key + "' in open(f'/proc/{p}/cmdline', 'rb').read()\n"
            "    except OSError: pass\nprint(hits)"
        )
        assert tool(code=scan).output == "0\n"
        assert tool(code="x = 1", session_id="other").ok
        assert not tool(code=UNHOOK + "import os, signal\nos.kill(-1, signal.SIGKILL)").ok
        assert tool(code="x + 1", session_id="other").output == "2\n"
        forged = (
            UNHOOK + 'import os\nfor fd in range(1, 64):\n    try: os.write(fd, b\'{"ok": true, "error": ""}\\n\')\n'
            "    except OSError: pass\n1/0"
        )
        r = tool(code=forged)
        assert not r.ok and "ZeroDivisionError" in r.output
        assert tool(code="print('up')").output == "up\n"
    assert gone('"memory_mb": 515', seconds=5)  # and nothing of the server's sandboxes outlives it


def test_cli_tool_server_subprocess(tmp_path):
    kb = MultiHopKB.build(seed=4)
    path = kb.write_corpus(tmp_path / "corpus.jsonl")
    with ServerProcess(
        ["-m", "agentkit", "tool-server", "search", "--corpus", str(path), "--api-key", "secret"],
        tmp_path / "server.log",
        startup_timeout_s=60,
    ) as server:
        tool = RemoteTool(server.url, api_key="secret")
        assert tool(query=kb.questions(1, seed=4)[0].question).output.startswith("[1] ")
    r = subprocess.run([sys.executable, "-m", "agentkit", "tool-server", "search"], capture_output=True, text=True)
    assert r.returncode == 2 and "needs --corpus" in r.stderr
