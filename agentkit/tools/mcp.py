"""Tools from any MCP server (Model Context Protocol, through the official ``mcp`` SDK), usable wherever our tools
are: the agent loop (``rollout(engine, tasks, mcp_tools(TARGET))``), the served agent models (``agentkit serve
--tools python,mcp:TARGET``, ``build_tools(["mcp:TARGET"])``), the RL trainers (``AgentGRPOTrainer(tools=...)``).

``TARGET`` is a streamable-HTTP URL (``http://127.0.0.1:8100/mcp``) or a command that speaks MCP on stdio
(``python -m some_server``). ``McpServer`` holds one connection, on a loop thread of its own, and lists the
server's tools; each becomes an ``McpTool`` with the server's name, description and JSON schema.

Every call is bounded: it gives up after ``timeout_s`` (an error result), and its text is cut to ``max_chars``
(with a note saying how much was cut). A server that fails or dies makes a call an error result the model sees,
never an exception that ends a rollout; the next call connects again (a stdio server is started again).

Sessions: the agent loop gives each trajectory a random session id; it travels in the request's ``_meta``
(``agentkit.tool_servers.mcp.SESSION_META``), never in the arguments, so an agentkit MCP server keeps that
trajectory's python globals across its calls, as the tool does locally. Other servers ignore it.
"""

from __future__ import annotations

import asyncio
import shlex
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from agentkit.errors import AgentkitError
from agentkit.tools.base import ToolResult

SESSION_META = "agentkit.dev/session"  # the _meta key naming a tool session (agentkit.tool_servers.mcp reads it)


class McpServer:
    """One MCP server's tools over one connection.

    Args:
        target: a streamable-HTTP URL, or a command line (a list, or a string split as a shell would).
        api_key: HTTP servers: sent as ``Authorization: Bearer KEY``.
        timeout_s: the longest a call (or connecting and listing the tools) may take.
        max_chars: the most characters of a result the model sees.
    """

    def __init__(
        self, target: str | list[str], api_key: str | None = None, timeout_s: float = 30.0, max_chars: int = 20_000
    ):
        self.target, self.api_key, self.timeout_s, self.max_chars = target, api_key, timeout_s, max_chars
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()
        self._conn: _Conn | None = None
        self._lock = asyncio.Lock()
        try:
            listed = self._run(self._list_tools(), f"connecting to the MCP server {self.label}")
        except Exception:
            self.close()
            raise
        self.tools = {t.name: McpTool(self, t.name, t.description or "", dict(t.input_schema or {})) for t in listed}

    @property
    def label(self) -> str:
        return self.target if isinstance(self.target, str) else shlex.join(self.target)

    # ------------------------------------------------------------------------------------- connection
    def _server(self):
        from mcp.client.stdio import StdioServerParameters

        if isinstance(self.target, str) and self.target.startswith(("http://", "https://")):
            if not self.api_key:
                return self.target
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client  # the SDK's timeouts, with our header

            http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.api_key}"})
            return streamable_http_client(self.target, http_client=http)
        argv = shlex.split(self.target) if isinstance(self.target, str) else list(self.target)
        if not argv:
            raise AgentkitError("an MCP server needs a URL or a command", "e.g. mcp:http://127.0.0.1:8100/mcp")
        return StdioServerParameters(command=argv[0], args=argv[1:])

    async def _connected(self):
        """The live client, connecting first when there is none (or the last one died)."""
        async with self._lock:
            if self._conn is None or self._conn.dead:
                from mcp import Client

                conn, ready = _Conn(), asyncio.get_running_loop().create_future()
                conn.task = asyncio.ensure_future(
                    self._hold(conn, Client(self._server(), read_timeout_seconds=self.timeout_s), ready)
                )
                conn.client = await ready
                self._conn = conn
            return self._conn.client

    @staticmethod
    async def _hold(conn: _Conn, client, ready: asyncio.Future) -> None:
        """Keep ``client`` connected until its connection is stopped, or fails (then the next call reconnects)."""
        try:
            async with client as c:
                ready.set_result(c)
                await conn.stop.wait()
        except BaseException as e:  # noqa: BLE001 - a dead server is reported to the call waiting for it
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else ConnectionError(repr(e)))
        finally:
            conn.dead = True

    async def _list_tools(self):
        client = await self._connected()
        return (await client.list_tools()).tools

    def _run(self, coro, doing: str):
        fut = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, self.timeout_s), self._loop)
        try:
            return fut.result(self.timeout_s + 5)
        except (FutureTimeout, asyncio.TimeoutError):
            fut.cancel()
            raise TimeoutError(f"{doing} took longer than {self.timeout_s:g} s") from None

    # -------------------------------------------------------------------------------------------- calls
    def call(self, name: str, arguments: dict[str, Any], session_id: str | None = None) -> ToolResult:
        """One call: its text (cut to ``max_chars``), ``ok`` False for the server's errors, timeouts and failures."""
        meta = {SESSION_META: session_id} if session_id else None

        async def go():
            client = await self._connected()
            try:
                return await client.call_tool(name, arguments, meta=meta)
            except Exception:
                await self._drop(client)
                raise

        try:
            res = self._run(go(), f"the MCP tool {name!r}")
        except TimeoutError as e:
            return ToolResult(f"Error: {e}", ok=False, meta={"timeout": True})
        except Exception as e:  # the server failed or died: the model sees it; the next call reconnects
            return ToolResult(f"Error: the MCP server {self.label} failed: {_reason(e)}", ok=False)
        text = "\n".join(_text(part) for part in res.content or [])
        if not text and getattr(res, "structured_content", None) is not None:
            import json

            text = json.dumps(res.structured_content)
        meta_out: dict[str, Any] = {}
        if len(text) > self.max_chars:
            meta_out["truncated_chars"] = len(text) - self.max_chars
            text = text[: self.max_chars] + f"\n[... {len(text) - self.max_chars} more characters cut]"
        return ToolResult(text, ok=not res.is_error, meta=meta_out)

    async def _drop(self, client) -> None:
        conn = self._conn
        if conn is not None and conn.client is client:
            conn.dead = True
            conn.stop.set()

    def close(self) -> None:
        """Disconnect (a stdio server's process ends) and stop the loop thread; idempotent."""
        if not self._thread.is_alive():
            return

        async def stop():
            conn = self._conn
            if conn is not None and conn.task is not None:
                conn.stop.set()
                await asyncio.wait({conn.task}, timeout=10)

        try:
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(15)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


class _Conn:
    """One connection: its client, the event that ends it, whether it is dead."""

    def __init__(self) -> None:
        self.client = None
        self.task: asyncio.Task | None = None
        self.stop = asyncio.Event()
        self.dead = False


def _reason(e: BaseException) -> str:
    """An error in one line: the first failure inside the SDK's exception groups."""
    while getattr(e, "exceptions", None):  # an exception group (Python 3.11's, or the backport's on 3.10)
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"


def _text(part: Any) -> str:
    kind = getattr(part, "type", "")
    if kind == "text":
        return part.text
    if kind == "resource" and getattr(part.resource, "text", None) is not None:
        return part.resource.text
    return f"[{kind} content]"


class McpTool:
    """One tool of an MCP server, with the Tool protocol (``agentkit.tools.base``)."""

    def __init__(self, server: McpServer, name: str, description: str, parameters: dict[str, Any]):
        self.server, self.name, self.description = server, name, description
        self.parameters = parameters or {"type": "object", "properties": {}}

    def __call__(self, session_id: str | None = None, **arguments: Any) -> ToolResult:
        return self.server.call(self.name, arguments, session_id)

    def close_session(self, session_id: str) -> None:
        """Sessions on the server end when they idle out (MCP has no call to end one)."""

    def close(self) -> None:
        self.server.close()


def mcp_tools(target: str | list[str], api_key: str | None = None, **bounds: Any) -> dict[str, McpTool]:
    """The tools of the MCP server at ``target`` by name (``McpServer``'s ``timeout_s``, ``max_chars``)."""
    try:
        return McpServer(target, api_key, **bounds).tools
    except AgentkitError:
        raise
    except Exception as e:
        raise AgentkitError(
            f"cannot reach the MCP server {target}: {_reason(e)}",
            "a streamable-HTTP URL (http://host:port/mcp) or a command that serves MCP on stdio",
        ) from None
