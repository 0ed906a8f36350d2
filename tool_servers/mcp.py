"""Our tools as an MCP server (``agentkit tool-server python|search --mcp``), with the official ``mcp`` SDK's
low-level ``Server``: each tool is listed with its own JSON schema and called in a worker thread, at most
``max_concurrency`` at once.

Transports: streamable HTTP at ``/mcp`` (bound to loopback by default; with a key, every request needs
``Authorization: Bearer KEY``) or stdio (one client: the process that started the server).

Sessions. MCP's current protocol (2026-07-28) is stateless: each request stands alone. A call runs without a
session (the python tool: a fresh process, nothing kept) unless the request's ``_meta`` names one under
``SESSION_META``; then the python tool keeps that session's globals across calls, as ``session_id`` does over
the HTTP tool server. The id is never part of the tool's arguments, so a model cannot choose it: agentkit's own
client (``agentkit.tools.mcp``) sends the agent loop's random per-trajectory ids, and idle sessions are closed by
the sandbox.
"""

from __future__ import annotations

import inspect
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

from agentkit.server.http import _BearerKey
from agentkit.tools.base import Tool
from agentkit.tools.mcp import SESSION_META  # the _meta key that names a tool session, as our client sends it


def mcp_server(tools: list[Tool], name: str = "agentkit", max_concurrency: int = 8) -> Server:
    """An MCP server publishing ``tools`` (their names, descriptions and parameter schemas)."""
    by_name = {t.name: t for t in tools}
    limiter = anyio.CapacityLimiter(max_concurrency)

    async def list_tools(_ctx, _params) -> types.ListToolsResult:
        listed = [types.Tool(name=t.name, description=t.description, input_schema=t.parameters) for t in tools]
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            return _error(f"unknown tool {params.name!r}; this server has {', '.join(by_name)}")
        kwargs: dict[str, Any] = dict(params.arguments or {})
        session = (ctx.meta or {}).get(SESSION_META)
        if isinstance(session, str) and session and "session_id" in inspect.signature(tool.__call__).parameters:
            kwargs["session_id"] = session[:128]
        try:
            res = await anyio.to_thread.run_sync(lambda: tool(**kwargs), limiter=limiter)
        except Exception as e:  # a tool bug is an error result the client sees, never a dropped connection
            return _error(f"the tool failed: {type(e).__name__}: {e}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=res.output)], is_error=not res.ok)

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"Error: {message}")], is_error=True)


def mcp_http_app(tools: list[Tool], api_key: str | None = None, max_concurrency: int = 8, host: str = "127.0.0.1"):
    """The streamable-HTTP ASGI app (``/mcp``, and ``GET /health`` without a key), behind the bearer key when one
    is given; ``host`` is where it is served (the SDK's DNS-rebinding protection allows loopback names when it is
    a loopback address)."""
    from starlette.responses import JSONResponse

    server = mcp_server(tools, f"agentkit-{'-'.join(t.name for t in tools)}", max_concurrency)
    app = server.streamable_http_app(host=host)

    async def health(_request):
        return JSONResponse({"status": "ok", "tools": [t.name for t in tools]})

    app.add_route("/health", health, methods=["GET"])  # open, as on every agentkit server
    return _BearerKey(app, f"Bearer {api_key}".encode()) if api_key else app


async def serve_stdio(tools: list[Tool], max_concurrency: int = 8) -> None:
    """Serve ``tools`` over this process's stdin and stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = mcp_server(tools, f"agentkit-{'-'.join(t.name for t in tools)}", max_concurrency)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
