"""Agent models on ``/v1/chat/completions``: the tool loop (``agentkit/tir``) or a service (ACE) runs server-side in a
worker thread over the batched engine, so its turns share the engine with every other client's requests; the reply
is the final answer, with the trace in the ``agentkit`` extension field (streamed: progress events first)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from agentkit.agent import AgentConfig, rollout
from agentkit.agent.trajectory import Trajectory
from agentkit.engines.base import Completion
from agentkit.server.base import OpenAIServing
from agentkit.server.chat import agent_conversation, chat_response
from agentkit.server.http import RequestError
from agentkit.server.protocol import ChatCompletionRequest, ChatCompletionResponse, UsageInfo
from agentkit.server.serving import BatchedEngine
from agentkit.server.streaming import ChunkStream, drain, respond, sse_error, stream_chunks

MAX_TURNS = 16  # the most a request may ask with the ``max_turns`` extension field


def _refuse_formats(req: ChatCompletionRequest) -> None:
    for field in ("response_format", "structured_outputs", "tools"):
        if getattr(req, field) is not None:  # an agent's turns are its own format; its answer is text
            raise RequestError(400, f"the agent model {req.model!r} does not take {field}", param=field)


async def run_service(serving: OpenAIServing, request: Request, req: ChatCompletionRequest):
    _refuse_formats(req)
    if req.n != 1:
        raise RequestError(400, f"the agent model {req.model!r} answers with n=1", param="n")
    question, _history, system = agent_conversation(req.messages)
    ext = (req.model_extra or {}).get("agentkit")
    bengine = BatchedEngine(serving.batcher)
    work = asyncio.ensure_future(run_in_threadpool(serving.services[req.model].answer, bengine, question, system, ext))
    text, ext_out, usage = await serving.wait(request, work, bengine.cancel)
    plain = req.model_copy(update={"logprobs": False, "tools": None})
    resp = chat_response(
        plain,
        "",
        [Completion(text, [], [], "stop", 0)],
        0,
        serving.engine,
        req.model,
        UsageInfo(**usage),
        agentkit=ext_out,
    )
    return respond(req, resp)


async def run_agent(serving: OpenAIServing, request: Request, req: ChatCompletionRequest):
    """The tool loop on the request's question, with its sampling (``max_turns``: an extension field, 1 to 16)."""
    if req.stream:  # progress events go out while the loop runs
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()
        emit = lambda e: loop.call_soon_threadsafe(events.put_nowait, e)  # noqa: E731
        work, bengine = start_agent(serving, req, emit)
        return StreamingResponse(_agent_stream(serving, req, bengine, work, events), media_type="text/event-stream")
    work, bengine = start_agent(serving, req)
    trajs = await serving.wait(request, work, bengine.cancel)
    return _agent_response(serving, req, bengine, trajs)


def start_agent(
    serving: OpenAIServing,
    req: ChatCompletionRequest,
    emit: Callable[[dict[str, Any]], None] | None = None,
    max_tool_calls: int | None = None,
) -> tuple[asyncio.Future, BatchedEngine]:
    """The tool loop on ``req``'s question started in a worker thread over the batched engine: (its future
    trajectories, the engine, whose ``cancel`` stops it). ``emit`` is told of each turn and tool call."""
    question, cfg = agent_settings(serving, req, max_tool_calls)
    tools, bengine = serving.agents[req.model], BatchedEngine(serving.batcher)
    # anyio's thread pool (40 threads), not asyncio's default executor (cpu + 4: 6 agents at once here)
    return asyncio.ensure_future(run_in_threadpool(rollout, bengine, [question], tools, cfg, emit)), bengine


def agent_settings(
    serving: OpenAIServing, req: ChatCompletionRequest, max_tool_calls: int | None = None
) -> tuple[str, AgentConfig]:
    """(the question, the loop's settings) of a request to an agent model: the server's ``agent_config`` with the
    request's sampling, ``max_turns`` (an extension field, 1 to 16), ``max_tool_calls`` (at most the server's), its
    earlier turns as examples and its system text after the agent's. Request errors are raised here."""
    _refuse_formats(req)
    cfg = serving.agent_config
    params = req.to_sampling_params(default_max=cfg.sampling.max_tokens)
    turns = (req.model_extra or {}).get("max_turns")  # extra_body={"max_turns": 3}
    if turns is not None and (not isinstance(turns, int) or isinstance(turns, bool) or not 1 <= turns <= MAX_TURNS):
        raise RequestError(400, f"max_turns must be an integer from 1 to {MAX_TURNS}", param="max_turns")
    question, history, system = agent_conversation(req.messages)
    return question, dataclasses.replace(
        cfg,
        sampling=dataclasses.replace(
            params, seed=params.seed if params.seed is not None else cfg.sampling.seed, entropy=cfg.sampling.entropy
        ),
        max_turns=turns or cfg.max_turns,
        max_tool_calls=min(max_tool_calls, cfg.max_tool_calls) if max_tool_calls else cfg.max_tool_calls,
        examples=[*cfg.examples, *history],
        system_prompt=f"{cfg.system_prompt}\n\n{system}" if system else cfg.system_prompt,
    )


async def _agent_stream(serving, req, bengine, work, events: asyncio.Queue):
    out = ChunkStream(req.model, False)
    try:
        async for progress in drain(events, work):
            yield out.progress(progress)
        try:
            resp = _agent_response(serving, req, bengine, work.result())
        except Exception as e:
            yield sse_error(e)
            return
        for chunk in stream_chunks(resp, req.include_usage()):
            yield chunk
    finally:  # the client went away mid-stream (or the stream ended): nothing more runs for it
        bengine.cancel()


def _agent_response(serving, req, bengine, trajs) -> ChatCompletionResponse:
    outs = [Completion(final_text(t), t.completion_ids, [], "stop", len(t.prompt_ids)) for t in trajs]
    plain = req.model_copy(update={"logprobs": False, "tools": None})
    usage = UsageInfo.of(bengine.usage["prompt_tokens"], bengine.usage["completion_tokens"])
    return chat_response(plain, "", outs, 0, serving.engine, req.model, usage, agentkit=[trace(t) for t in trajs])


def final_text(t: Trajectory) -> str:
    """What an agent model answers: the trajectory's answer, else its last segment's text."""
    return t.answer if t.answer is not None else t.segments[-1].text if t.segments else ""


def trace(t: Trajectory) -> dict[str, Any]:
    """The ``agentkit`` extension field of an agent's answer: how the loop ended and each segment."""
    return {
        "finish": t.finish,
        "tool_calls": t.tool_calls,
        "answer": t.answer,
        "trace": [{"kind": s.kind, "text": s.text, "tool": s.tool, "ok": s.ok} for s in t.segments],
    }
