"""One HTTP service per tool (FastAPI): the contract shared by ``agentkit tool-server python|search``.

Routes (OpenAPI at ``/openapi.json``, docs at ``/docs``):

- ``GET  /health``   → ``{"status": "ok", "tool": NAME}`` (no key needed)
- ``GET  /v1/tool``  → ``{"name", "description", "parameters"}`` (the tool's JSON schema)
- ``POST /v1/call``  ``{"arguments": {...}, "session_id": null}`` → ``{"output", "ok", "meta"}``
- ``DELETE /v1/sessions/{session_id}`` → ``{"closed": ID}``: the session's state is gone (python tool)

A session is reached by whoever names its id: clients pick unguessable ids (the agent loop sends 128 random bits)
and delete them when done; idle sessions are closed by the tool itself.

Auth: ``Authorization: Bearer KEY`` when the server has a key (401 otherwise). At most ``max_concurrency``
calls run at once; up to ``max_queue`` more wait, each at most ``queue_timeout_s`` for a slot; beyond that the
server answers 503 with ``Retry-After`` (never silence), and ``/health`` answers while every slot is busy. Errors use
the OpenAI shape ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from agentkit.server.http import install_error_handlers, openai_error, require_bearer_key
from agentkit.tools.base import Tool


class CallRequest(BaseModel):
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments")
    session_id: str | None = Field(
        None, max_length=128, description="keep state across calls (python tool); pick an unguessable id"
    )


class CallResponse(BaseModel):
    output: str
    ok: bool
    meta: dict[str, Any] = Field(default_factory=dict)


def build_app(
    tool: Tool, api_key: str | None = None, max_concurrency: int = 8, max_queue: int = 64, queue_timeout_s: float = 30.0
) -> FastAPI:
    app = FastAPI(title=f"agentkit tool server: {tool.name}", version="1", description=tool.description)
    slots = asyncio.Semaphore(max_concurrency)
    state = {"waiting": 0}
    takes_session = "session_id" in inspect.signature(tool.__call__).parameters

    require_bearer_key(app, api_key)
    install_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "tool": tool.name}

    @app.get("/v1/tool")
    async def describe() -> dict[str, Any]:
        return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}

    @app.delete("/v1/sessions/{session_id}")
    async def close_session(session_id: str) -> dict[str, str]:
        close = getattr(tool, "close_session", None)
        if close is not None:
            await run_in_threadpool(close, session_id)
        return {"closed": session_id}

    @app.post("/v1/call", response_model=CallResponse)
    async def call(req: CallRequest):
        busy = openai_error(
            503,
            f"the tool server is at its concurrency limit ({max_concurrency} calls running, "
            f"{state['waiting']} waiting); retry later",
            "server_busy",
            headers={"Retry-After": "1"},
        )
        if state["waiting"] >= max_queue:
            return busy
        state["waiting"] += 1
        try:
            await asyncio.wait_for(slots.acquire(), queue_timeout_s)
        except asyncio.TimeoutError:
            return busy
        finally:
            state["waiting"] -= 1
        try:
            kwargs = dict(req.arguments)
            if takes_session and req.session_id:
                kwargs["session_id"] = req.session_id
            res = await run_in_threadpool(lambda: tool(**kwargs))
        except Exception as e:  # a tool bug is a 500 in the OpenAI error shape, not a dropped connection
            return openai_error(500, f"the tool failed: {type(e).__name__}: {e}", "server_error")
        finally:
            slots.release()
        return CallResponse(output=res.output, ok=res.ok, meta=res.meta)

    return app
