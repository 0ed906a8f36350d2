"""Server-sent events of a streamed chat completion: one home for the chunk's header, the final error event, and
draining a queue of deltas while the work that fills it runs."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from fastapi.responses import StreamingResponse

from agentkit.server.http import RequestError
from agentkit.server.protocol import (
    ChatCompletionChunk,
    ChatCompletionResponse,
    ChunkChoice,
    DeltaFunction,
    DeltaMessage,
    DeltaToolCall,
    UsageInfo,
)

DONE = "data: [DONE]\n\n"


class ChunkStream:
    """The chunks of one streamed chat completion: one ``id``, ``created`` and ``model`` for all of them; with
    ``include_usage`` each chunk carries ``usage: null`` and the last one (no choices) the usage, as OpenAI sends."""

    def __init__(self, model: str, include_usage: bool, id: str | None = None, created: int | None = None):
        self.model, self.include_usage = model, include_usage
        self.id = id or "chatcmpl-" + uuid.uuid4().hex
        self.created = int(time.time()) if created is None else created

    def chunk(self, choices: list[ChunkChoice], **extra: Any) -> str:
        """One event with this stream's header; ``extra``: ``usage`` or the ``agentkit`` extension."""
        fields = {"usage": None, **extra} if self.include_usage else extra
        return ChatCompletionChunk(id=self.id, created=self.created, model=self.model, choices=choices, **fields).sse()

    def delta(self, index: int, finish_reason: str | None = None, **delta: Any) -> str:
        """One choice's delta (``role``, ``content``, ``tool_calls``); ``finish_reason`` null until its last."""
        return self.chunk([ChunkChoice(index=index, delta=DeltaMessage(**delta), finish_reason=finish_reason)])

    def progress(self, event: dict[str, Any]) -> str:
        """An agent's progress event (``agentkit`` extension, no choices)."""
        return self.chunk([], agentkit=event)

    def usage(self, usage: UsageInfo) -> str:
        """The last event when the client asked for usage: no choices, the usage."""
        return self.chunk([], usage=usage)


def stream_chunks(resp: ChatCompletionResponse, include_usage: bool):
    """SSE events for a finished response: role delta, content deltas (or tool-call deltas), the finish chunk,
    the usage chunk if asked, then ``[DONE]``."""
    out = ChunkStream(resp.model, include_usage, resp.id, resp.created)
    for ch in resp.choices:
        i, msg = ch.index, ch.message
        yield out.delta(i, role="assistant", content="")
        for piece in pieces(msg.content or ""):
            yield out.delta(i, content=piece)
        for k, call in enumerate(msg.tool_calls or []):
            head = DeltaToolCall(
                index=k, id=call.id, type="function", function=DeltaFunction(name=call.function.name, arguments="")
            )
            yield out.delta(i, tool_calls=[head])
            for piece in pieces(call.function.arguments):
                yield out.delta(i, tool_calls=[DeltaToolCall(index=k, function=DeltaFunction(arguments=piece))])
        yield out.delta(i, ch.finish_reason)
    if include_usage:
        yield out.usage(resp.usage)
    yield DONE


def respond(req, resp: ChatCompletionResponse):
    """``resp`` itself, or streamed as chunks when the client asked for a stream (a whole response's chunks: an
    agent service's answer, which comes whole)."""
    if not req.stream:
        return resp
    return StreamingResponse(stream_chunks(resp, req.include_usage()), media_type="text/event-stream")


def pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse_error(e: Exception) -> str:
    """An error after a stream began: a final event carrying the OpenAI error object, then ``[DONE]``."""
    if isinstance(e, RequestError):
        err = {"message": e.message, "type": e.type, "param": e.param, "code": e.code}
    else:
        err = {"message": f"{type(e).__name__}: {e}", "type": "server_error", "param": None, "code": None}
    return "data: " + json.dumps({"error": err}) + "\n\n" + DONE


async def drain(items: asyncio.Queue, done: asyncio.Future):
    """What is put on ``items`` until ``done`` completes, including what was queued before it did."""
    while not done.done() or not items.empty():
        getter = asyncio.ensure_future(items.get())
        await asyncio.wait({getter, done}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            yield getter.result()
        else:
            getter.cancel()
