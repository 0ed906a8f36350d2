"""MCP both ways, with the official ``mcp`` SDK and real processes: ``agentkit tool-server python --mcp`` listed and
called by the SDK's own client (HTTP with a key, and stdio), sessions only through ``_meta``; tools taken from any
MCP server bounded in time and size, a crashed server an error result and then a fresh connection; and a rollout
of the embedded model through the MCP python tool equal to one with the tool in process."""

import asyncio
import sys
import textwrap
import time
from urllib.parse import urlsplit

import pytest

mcp = pytest.importorskip("mcp")

from agentkit.errors import AgentkitError  # noqa: E402
from agentkit.server.http import ServerProcess  # noqa: E402
from agentkit.tools import build_tools  # noqa: E402
from agentkit.tools.mcp import McpServer, mcp_tools  # noqa: E402

REACH = "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    print('reached')\nexcept OSError:\n    print('unreachable')"
PY_SERVER = ["-m", "agentkit", "tool-server", "python", "--mcp", "--api-key", "k-mcp", "--wall-s", "5"]


@pytest.fixture(scope="module")
def python_mcp(tmp_path_factory):
    with ServerProcess(PY_SERVER, tmp_path_factory.mktemp("mcp") / "server.log", startup_timeout_s=120) as server:
        yield server.url + "/mcp"


def _sdk(target, calls, headers=None):
    """What the SDK's own client sees: the tools listed, then each call's (text, error flag)."""

    async def go():
        server = target
        if headers is not None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            server = streamable_http_client(target, http_client=create_mcp_http_client(headers=headers))
        async with mcp.Client(server) as c:
            tools = (await c.list_tools()).tools
            out = []
            for name, args, meta in calls:
                r = await c.call_tool(name, args, meta=meta)
                out.append((r.content[0].text, r.is_error))
            return tools, out

    return asyncio.run(go())


def test_a_third_party_client_lists_and_calls_the_python_tool(python_mcp):
    tools, out = _sdk(
        python_mcp,
        [
            ("python", {"code": "x = 6 * 7\nprint(x)"}, {"agentkit.dev/session": "s-1"}),
            ("python", {"code": "print(x + 1)"}, {"agentkit.dev/session": "s-1"}),  # the session's globals
            ("python", {"code": "print(x + 1)"}, None),  # no session: nothing kept
            ("python", {"code": REACH.format(port=urlsplit(python_mcp).port)}, None),  # the kernel's network namespace
            ("nosuch", {}, None),
        ],
        headers={"Authorization": "Bearer k-mcp"},
    )
    (tool,) = tools
    assert tool.name == "python" and tool.input_schema["required"] == ["code"]
    assert out[0] == ("42\n", False) and out[1] == ("43\n", False)
    assert out[2][1] and "NameError" in out[2][0]
    assert out[3] == ("unreachable\n", False)  # the server's own port, open outside the sandbox
    assert out[4][1] and "unknown tool 'nosuch'" in out[4][0]


def test_the_key_is_required(python_mcp):
    import json
    import urllib.error
    import urllib.request

    req = urllib.request.Request(python_mcp, data=b"{}", method="POST", headers={"Authorization": "Bearer wrong"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 401 and json.loads(e.value.read())["error"]["code"] == "invalid_api_key"
    with urllib.request.urlopen(python_mcp.removesuffix("/mcp") + "/health", timeout=10) as r:  # open, as elsewhere
        assert json.loads(r.read())["tools"] == ["python"]
    with pytest.raises(AgentkitError, match="cannot reach the MCP server"):
        mcp_tools(python_mcp, api_key="wrong", timeout_s=10)


def test_stdio_server_through_our_client():
    server = McpServer([sys.executable, "-m", "agentkit", "tool-server", "python", "--mcp", "stdio"], timeout_s=60)
    try:
        tool = server.tools["python"]
        assert tool(code="print(6 * 7)").output == "42\n"
        assert tool(code="y = 1", session_id="a").ok and tool(code="print(y)", session_id="a").output == "1\n"
    finally:
        server.close()


FLAKY = textwrap.dedent(
    '''
    import os, sys, time
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("flaky")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @server.tool()
    def slow(seconds: float) -> str:
        """Sleep."""
        time.sleep(seconds)
        return "woke"

    @server.tool()
    def big(n: int) -> str:
        """n characters."""
        return "a" * n

    @server.tool()
    def crash() -> str:
        """Exit the server process."""
        os._exit(3)

    server.run("stdio")
    '''
)


def test_calls_are_bounded_and_a_crash_is_an_error_then_a_reconnect(tmp_path):
    script = tmp_path / "flaky.py"
    script.write_text(FLAKY)
    server = McpServer([sys.executable, str(script)], timeout_s=3, max_chars=100)
    try:
        tools = server.tools
        assert set(tools) == {"echo", "slow", "big", "crash"}
        assert tools["echo"].parameters["required"] == ["text"]
        assert tools["echo"](text="hi").output == "hi"
        t0 = time.monotonic()
        slow = tools["slow"](seconds=30)
        assert not slow.ok and "longer than 3 s" in slow.output and time.monotonic() - t0 < 10
        big = tools["big"](n=5000)
        assert big.ok and len(big.output) < 200 and "4900 more characters cut" in big.output
        crashed = tools["crash"]()
        assert not crashed.ok and "failed" in crashed.output
        assert tools["echo"](text="back").output == "back"  # a new server process, connected again
    finally:
        server.close()


def test_build_tools_takes_mcp_servers(python_mcp, monkeypatch):
    monkeypatch.setenv("AGENTKIT_MCP_API_KEY", "k-mcp")
    tools = build_tools(["mcp:" + python_mcp])
    try:
        assert list(tools) == ["python"] and tools["python"](code="print(1)").output == "1\n"
    finally:
        tools["python"].close()
    with pytest.raises(AgentkitError, match="cannot reach the MCP server"):
        build_tools(["mcp:http://127.0.0.1:9/mcp"])


def test_rollout_through_mcp_equals_the_direct_tool(python_mcp):
    """The embedded model's rollouts (same seeds) with the python tool in process and through MCP: the same
    trajectories, token for token, tool results included."""
    from agentkit.agent import AgentConfig, rollout
    from agentkit.agent.loop import TIR_EXAMPLES
    from agentkit.data import arithmetic_suite
    from agentkit.engines import SamplingParams
    from agentkit.engines.hf import HFEngine
    from agentkit.tools.python import PythonTool
    from agentkit.tools.sandbox import SandboxConfig

    cfg = AgentConfig(
        max_turns=3,
        max_total_tokens=320,
        examples=TIR_EXAMPLES,
        sampling=SamplingParams(n=2, max_tokens=96, temperature=0.7, seed=11),
    )
    tasks = arithmetic_suite(3, seed=7)
    direct = PythonTool(SandboxConfig(pool_size=2))
    try:
        local = rollout(HFEngine("smollm2-135m"), tasks, {"python": direct}, cfg)
    finally:
        direct.close()
    server = McpServer(python_mcp, api_key="k-mcp", timeout_s=30)
    try:
        remote = rollout(HFEngine("smollm2-135m"), tasks, server.tools, cfg)  # a fresh engine: no shared cache
    finally:
        server.close()
    assert sum(t.tool_calls for t in local) >= 2  # the tool was used
    for a, b in zip(local, remote, strict=True):
        assert [(s.kind, s.text, s.token_ids, s.ok) for s in a.segments] == [
            (s.kind, s.text, s.token_ids, s.ok) for s in b.segments
        ]
        assert (a.answer, a.finish) == (b.answer, b.finish)


def test_search_server_over_stdio(tmp_path):
    """``agentkit tool-server search --mcp stdio``: the search tool's MCP form answers as the tool does here."""
    from agentkit.data.tasks import write_jsonl
    from agentkit.tools.search import SearchTool

    corpus = tmp_path / "corpus.jsonl"
    write_jsonl(
        corpus,
        [
            {"id": "1", "title": "Paris", "text": "Paris is the capital of France."},
            {"id": "2", "title": "Berlin", "text": "Berlin is the capital of Germany."},
        ],
    )
    cmd = [sys.executable, "-m", "agentkit", "tool-server", "search", "--corpus", str(corpus), "--mcp", "stdio"]
    server = McpServer(cmd, timeout_s=60)
    try:
        (name,) = server.tools
        local = SearchTool(str(corpus), top_k=3)
        assert server.tools[name](query="capital of Germany").output == local(query="capital of Germany").output
    finally:
        server.close()
