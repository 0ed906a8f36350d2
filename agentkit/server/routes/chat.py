"""``POST /v1/chat/completions``: the engine's model (whole or streamed token by token), or an agent model
(``agentkit.server.agents``)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from agentkit.server import agents
from agentkit.server.base import OpenAIServing, Serving, grammar_error
from agentkit.server.chat import ReplyParser, chat_response, constraint_param, to_messages
from agentkit.server.http import CheckedJSONRoute
from agentkit.server.protocol import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    DeltaFunction,
    DeltaToolCall,
    UsageInfo,
)
from agentkit.server.routes.errors import ERRORS
from agentkit.server.streaming import DONE, ChunkStream, drain, sse_error

router = APIRouter(route_class=CheckedJSONRoute, responses=ERRORS)

SSE = {
    200: {
        "content": {"text/event-stream": {}},
        "description": "the completion; with stream=true, ChatCompletionChunk events",
    }
}


@router.post(
    "/v1/chat/completions", response_model=ChatCompletionResponse, response_model_exclude_unset=True, responses=SSE
)
async def create_chat_completion(req: ChatCompletionRequest, request: Request, serving: Serving):
    """A chat completion: text, tool calls (client-side tools in the hermes format), or output constrained by
    ``response_format`` / ``structured_outputs``; ``stream=true`` sends ``ChatCompletionChunk`` events."""
    serving.check_model(req.model)
    serving.check_n(req.n)
    if req.model in serving.agents:
        return await agents.run_agent(serving, request, req)
    if req.model in serving.services:
        return await agents.run_service(serving, request, req)
    engine = serving.engine
    msgs, prefill, constraint = to_messages(req)
    ids = engine.encode(msgs) + (engine.tokenize(prefill) if prefill else [])
    params = serving.fit(
        ids,
        serving.sampling(req.model, req.to_sampling_params(constraint=constraint)),
        req.max_completion_tokens or req.max_tokens,
    )
    if req.stream:
        return StreamingResponse(_live_stream(serving, req, prefill, ids, params), media_type="text/event-stream")
    (outs,) = await serving.generate(request, [ids], params, constraint_param(req))
    return chat_response(req, prefill, outs, len(ids), engine, req.model, reasoning_parser=serving.reasoning_parser)


async def _live_stream(serving: OpenAIServing, req: ChatCompletionRequest, prefill: str, ids: list[int], params):
    """Token-by-token SSE: deltas are sent as the engine produces them, parsed as they come (``ReplyParser``):
    content, ``reasoning_content``, and tool calls (name first, then argument pieces)."""
    loop = asyncio.get_running_loop()
    deltas: asyncio.Queue = asyncio.Queue()
    fut = serving.batcher.submit([ids], params, lambda _i, j, d: loop.call_soon_threadsafe(deltas.put_nowait, (j, d)))
    parsers = [ReplyParser(req, prefill, serving.reasoning_parser) for _ in range(params.n)]
    try:
        async for event in _live_events(req, len(ids), parsers, fut, deltas):
            yield event
    finally:  # the client went away mid-stream: its generation ends at the next decode step
        serving.batcher.cancel(fut)


async def _live_events(req: ChatCompletionRequest, prompt_tokens: int, parsers: list[ReplyParser], fut, deltas):
    done = asyncio.wrap_future(fut)
    out = ChunkStream(req.model, req.include_usage())
    for j in range(len(parsers)):
        yield out.delta(j, role="assistant", content="")
    sent = [0] * len(parsers)  # characters streamed per sample
    async for j, delta in drain(deltas, done):
        sent[j] += len(delta)
        for chunk in _chunks(out, j, parsers[j].feed(delta)):
            yield chunk
    try:
        (outs,) = done.result()
        failed = next((c for c in outs if c.finish_reason == "error"), None)
        if failed is not None:
            raise grammar_error(failed, constraint_param(req))
    except Exception as e:
        yield sse_error(e)
        return
    for j, c in enumerate(outs):  # what was not streamed (an engine without text callbacks: all of it)
        p = parsers[j]
        for chunk in _chunks(out, j, p.feed(c.text[sent[j] :]) + p.finish()):
            yield chunk
        yield out.delta(j, "tool_calls" if p.calls else c.finish_reason)
    if out.include_usage:
        yield out.usage(UsageInfo.of(prompt_tokens, sum(c.completion_tokens for c in outs)))
    yield DONE


def _chunks(out: ChunkStream, j: int, events: list[tuple]):
    """The chunks of a reply's parsed events: content, reasoning, a call's head (its id and name), its arguments."""
    for e in events:
        if e[0] == "content":
            yield out.delta(j, content=e[1])
        elif e[0] == "reasoning":
            yield out.delta(j, reasoning_content=e[1])
        elif e[0] == "call":
            head = DeltaToolCall(index=e[1], id=e[2], type="function", function=DeltaFunction(name=e[3], arguments=""))
            yield out.delta(j, tool_calls=[head])
        else:
            yield out.delta(j, tool_calls=[DeltaToolCall(index=e[1], function=DeltaFunction(arguments=e[2]))])
