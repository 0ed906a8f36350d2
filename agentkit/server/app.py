"""The OpenAI-compatible HTTP API (FastAPI): ``create_app`` puts the routes (``agentkit.server.routes``) over an
``OpenAIServing`` and adds the API key and OpenAI-shaped errors on every path.

Served models: the engine's model under its name, and each agent (``agentkit/tir``), which runs the tool loop
server-side and returns the final answer with the trace in an ``agentkit`` extension field.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from agentkit.agent import AgentConfig
from agentkit.engines.base import ContextLengthError
from agentkit.server.base import OpenAIServing
from agentkit.server.http import install_error_handlers, openai_error, require_bearer_key
from agentkit.server.protocol import ChatCompletionChunk
from agentkit.server.response_store import ResponseStore
from agentkit.server.routes import ROUTERS
from agentkit.server.serving import ServeLimits


def create_app(
    engine,
    model_name: str,
    api_key: str | None = None,
    tools: dict[str, Any] | None = None,
    agent_name: str = "agentkit/tir",
    agent_config: AgentConfig | None = None,
    window_s: float = 0.01,
    services: dict[str, Any] | None = None,
    limits: ServeLimits | None = None,
    responses: ResponseStore | None = None,
    reasoning_parser: str | None = None,
    runtime_lora: bool = False,
) -> FastAPI:
    """The app serving ``engine`` as ``model_name``.

    Args:
        engine: the engine to serve (``agentkit.engines``).
        model_name: the name clients use for it.
        api_key: when given, every route but ``/health`` and the API's description needs ``Bearer KEY``.
        tools: the tools of the agent model ``agent_name`` (none: no agent model).
        agent_name: the agent model's name.
        agent_config: its loop settings (default: ``AgentConfig(max_wall_s=600)``).
        window_s: how long the batcher waits for more requests when the engine is idle.
        services: more agent models, name → an object with ``answer(engine, question, system, extension) ->
            (text, extension out, usage)`` (``agentkit.ace.serve``).
        limits: what one request may ask (``ServeLimits``: prompts, n, body size and depth, jobs at once).
        responses: the Responses API's store (default: in memory, lost at exit; ``agentkit serve`` keeps a file).
        reasoning_parser: split replies' think-tag reasoning into ``reasoning_content`` (``qwen3``,
            ``deepseek_r1``: vLLM's ``--reasoning-parser``); None: replies are content as they are.
        runtime_lora: allow ``POST /v1/load_lora_adapter`` / ``unload_lora_adapter`` (adapters loaded before are
            served either way: ``engine.load_adapter``).

    Returns:
        the FastAPI app; ``app.state.serving`` is its ``OpenAIServing``, ``app.state.batcher`` its batcher.
    """
    app = FastAPI(title="agentkit", version="1", description="OpenAI-compatible API over agentkit engines and agents")
    serving = OpenAIServing(
        engine,
        model_name,
        agents={agent_name: tools} if tools else {},
        agent_config=agent_config,
        services=services,
        limits=limits,
        window_s=window_s,
        responses=responses,
        reasoning_parser=reasoning_parser,
        runtime_lora=runtime_lora,
    )
    app.state.serving, app.state.batcher = serving, serving.batcher
    app.state.body_limits = (serving.limits.max_body_bytes, serving.limits.max_json_depth)
    for router in ROUTERS:
        app.include_router(router)
    require_bearer_key(app, api_key)
    install_error_handlers(app)

    app.openapi = _described(app.openapi)

    @app.exception_handler(ContextLengthError)
    async def too_long(_: Request, e: ContextLengthError):  # a service's own prompt (the ACE roles')
        return openai_error(400, str(e), param="messages", code="context_length_exceeded")

    return app


def _described(default_openapi):
    """FastAPI's API description, completed: the stream's ``ChatCompletionChunk`` events as the schema of the
    chat routes' ``text/event-stream`` answers, and no 422 answers (a body that does not validate is a 400 here, as OpenAI's)."""

    def openapi() -> dict[str, Any]:
        spec = default_openapi()
        if "ChatCompletionChunk" in spec["components"]["schemas"]:
            return spec  # completed on an earlier call (FastAPI keeps the description)
        chunk = ChatCompletionChunk.model_json_schema(ref_template="#/components/schemas/{model}")
        spec["components"]["schemas"].update(chunk.pop("$defs", {}), ChatCompletionChunk=chunk)
        for path, route in spec["paths"].items():
            for op in route.values():
                op["responses"].pop("422", None)
                stream = op["responses"].get("200", {}).get("content", {}).get("text/event-stream")
                if stream is not None and path != "/v1/responses":  # its events: openai's ResponseStreamEvent
                    stream["schema"] = {"$ref": "#/components/schemas/ChatCompletionChunk"}
        for unused in ("HTTPValidationError", "ValidationError"):
            spec["components"]["schemas"].pop(unused, None)
        return spec

    return openapi
