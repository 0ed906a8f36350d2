"""OpenAI's Responses API: ``POST /v1/responses`` (whole, streamed as typed events, or in the background),
``GET /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items``, ``DELETE /v1/responses/{id}`` and
``POST /v1/responses/{id}/cancel``. The logic is ``agentkit.server.responses``; stored responses live in the app's
``ResponseStore``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from agentkit.server import agents
from agentkit.server.base import OpenAIServing, Serving, grammar_error
from agentkit.server.chat import ReplyParser, agent_conversation, choice_message, constraint_param, to_messages
from agentkit.server.http import CheckedJSONRoute, RequestError
from agentkit.server.protocol import (
    FunctionCallItem,
    InputItemList,
    MessageItem,
    OutputItem,
    ReasoningItem,
    ResponseDeleted,
    ResponseObject,
    ResponsesRequest,
    ResponseUsage,
)
from agentkit.server.responses import (
    BUILTIN_TOOLS,
    ResponseEvents,
    chat_messages,
    chat_request,
    choice_items,
    conversation,
    function_tools,
    message_item,
    new_id,
    now,
    reasoning_item,
    response_object,
    status_of,
    streamed_text,
    tool_item,
)
from agentkit.server.routes.errors import ERRORS
from agentkit.server.serving import BatchedEngine
from agentkit.server.streaming import drain

log = logging.getLogger("agentkit.server")
router = APIRouter(route_class=CheckedJSONRoute, responses=ERRORS)
stored = APIRouter(responses={k: ERRORS[k] for k in (400, 401, 404)})  # bodiless: GET, DELETE and cancel

SSE = {
    200: {
        "content": {"text/event-stream": {}},
        "description": "the response; with stream=true, its typed events (response.created … response.completed)",
    }
}


@router.post("/v1/responses", response_model=ResponseObject, response_model_exclude_unset=True, responses=SSE)
async def create_response(req: ResponsesRequest, request: Request, serving: Serving):
    """A response: from the served model (text, function calls, ``text.format`` structured output) or an agent
    model (its built-in tools run server-side and appear as output items). ``stream=true`` sends typed events;
    ``background=true`` answers at once with a ``queued`` response to poll (``GET``) or cancel; ``store`` (default
    true) keeps it for ``GET`` and ``previous_response_id``."""
    serving.check_model(req.model)
    if req.background and not req.store:
        raise RequestError(400, "background responses must be stored (store=true)", param="background")
    if req.background and req.stream:
        raise RequestError(400, "stream a response or run it in the background, not both", param="stream")
    items = conversation(req, serving.responses)
    run = _plan(serving, req, items)  # every request error is raised here, before anything is generated
    rid, created = new_id("resp"), now()
    if req.stream:
        return StreamingResponse(_stream(serving, req, items, run, rid, created), media_type="text/event-stream")
    if req.background:
        queued = response_object(req, rid, created, "queued", [], None)
        serving.responses.put(_dump(queued), items)
        task = asyncio.ensure_future(_background(serving, req, items, run, rid, created))
        serving.background[rid] = task
        task.add_done_callback(lambda _t: serving.background.pop(rid, None))
        return queued
    output, usage, extra = await run(request, _Sink())
    return _finish(serving, req, items, rid, created, output, usage, extra)


@stored.get("/v1/responses/{response_id}", response_model=ResponseObject, response_model_exclude_unset=True)
async def get_response(response_id: str, serving: Serving) -> dict[str, Any]:
    """A stored response (a background one: its status now)."""
    return _stored(serving, response_id)[0]


@stored.get("/v1/responses/{response_id}/input_items", response_model=InputItemList, response_model_exclude_unset=True)
async def list_input_items(
    response_id: str,
    serving: Serving,
    limit: int = Query(20, ge=1, le=100, description="items per page"),
    order: str = Query("desc", pattern="^(asc|desc)$", description="asc: oldest first; desc: newest first"),
    after: str | None = Query(None, description="the id of the item this page starts after"),
) -> InputItemList:
    """The input items a stored response was generated from (those inherited through ``previous_response_id``
    included), a page at a time."""
    items = _stored(serving, response_id)[1]
    items = items if order == "asc" else items[::-1]
    if after is not None:
        ids = [i.get("id") for i in items]
        if after not in ids:
            raise RequestError(400, f"no input item {after!r} in response {response_id!r}", param="after")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    return InputItemList(
        data=page,
        first_id=page[0].get("id") if page else None,
        last_id=page[-1].get("id") if page else None,
        has_more=len(items) > limit,
    )


@stored.delete("/v1/responses/{response_id}", response_model=ResponseDeleted, response_model_exclude_unset=True)
async def delete_response(response_id: str, serving: Serving) -> ResponseDeleted:
    """Delete a stored response (a background one still running is cancelled first)."""
    await _cancel(serving, response_id)
    if not serving.responses.delete(response_id):
        raise _not_found(response_id)
    return ResponseDeleted(id=response_id, deleted=True)


@stored.post("/v1/responses/{response_id}/cancel", response_model=ResponseObject, response_model_exclude_unset=True)
async def cancel_response(response_id: str, serving: Serving) -> dict[str, Any]:
    """Cancel a background response: its generation stops within a decode step and it is stored as
    ``cancelled``. A finished background response is answered as it is; any other response is a 400."""
    if not _stored(serving, response_id)[0].get("background"):
        raise RequestError(400, "only background responses can be cancelled", param="response_id")
    await _cancel(serving, response_id)
    return _stored(serving, response_id)[0]


async def _cancel(serving: OpenAIServing, response_id: str) -> None:
    """Stop a background response still running, and wait until it has stored itself as ``cancelled``."""
    task = serving.background.get(response_id)
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


# ------------------------------------------------------------------------------------------------ running


class _Sink:
    """Where a run reports its output as it goes: ``event`` (a parsed piece of the reply: ``ReplyParser``'s
    events) and ``item`` (a finished output item, in the response's order). This one ignores both: the response is
    sent whole."""

    streams = False

    def event(self, e: tuple) -> None:
        pass

    def item(self, item: OutputItem) -> None:
        pass


class _EventSink(_Sink):
    """The typed events of a stream, queued as the run reports its output: items open as their first piece is
    parsed (reasoning, the message, each function call: its name, then argument pieces), and close when the
    finished item arrives; a finished item that was not streamed is sent whole."""

    streams = True

    def __init__(self, events: ResponseEvents):
        self.events, self.queue = events, asyncio.Queue()
        self.live: list[list] = []  # [output index, item, characters sent, closed] in the order opened
        self.calls: dict[int, list] = {}  # a streamed call's index among calls -> its live entry
        self.next = 0  # the next output index

    def _put(self, *events: str) -> None:
        for e in events:
            self.queue.put_nowait(e)

    def _open(self, item: OutputItem) -> list:
        entry = [self.next, item, 0, False]
        self.next += 1
        self.live.append(entry)
        self._put(*self.events.opened(entry[0], item))
        return entry

    def _send(self, entry: list, text: str) -> None:
        entry[2] += len(text)
        self._put(self.events.delta(entry[0], entry[1], text))

    def event(self, e: tuple) -> None:
        if e[0] == "call":
            item = FunctionCallItem(id=new_id("fc"), call_id=e[2], name=e[3], arguments="", status="in_progress")
            self.calls[e[1]] = self._open(item)
        elif e[0] == "arguments":
            self._send(self.calls[e[1]], e[2])
        else:
            kind = MessageItem if e[0] == "content" else ReasoningItem
            last = self.live[-1] if self.live else None
            if last is None or not isinstance(last[1], kind) or last[3]:
                last = self._open(
                    message_item("", "in_progress") if e[0] == "content" else reasoning_item("", "in_progress")
                )
            self._send(last, e[1])

    def item(self, item: OutputItem) -> None:
        entry = next((x for x in self.live if not x[3] and _same(x[1], item)), None)
        if entry is None:  # not streamed: all of it now
            self._put(*self.events.item(self.next, item))
            self.next += 1
            return
        index, opened, sent, _ = entry
        item.id, entry[3] = opened.id, True
        rest = streamed_text(item)[sent:]
        if rest:
            self._put(self.events.delta(index, item, rest))
        self._put(*self.events.closed(index, item))


def _same(live: OutputItem, final: OutputItem) -> bool:
    if isinstance(final, FunctionCallItem):
        return isinstance(live, FunctionCallItem) and live.call_id == final.call_id
    return type(live) is type(final)


def _plan(serving: OpenAIServing, req: ResponsesRequest, items: list[dict[str, Any]]):
    """The run of ``req`` over ``items``: ``async run(request, sink) -> (output items, usage, extension fields)``.
    Everything that can be wrong with the request is checked here."""
    if req.model in serving.agents:
        return _plan_agent(serving, req, items)
    if req.model in serving.services:
        return _plan_service(serving, req, items)
    functions, _ = function_tools(req, set())
    creq = chat_request(req, chat_messages(items, req.instructions), functions)
    engine = serving.engine
    msgs, prefill, constraint = to_messages(creq)
    ids = engine.encode(msgs) + (engine.tokenize(prefill) if prefill else [])
    params = serving.sampling(req.model, creq.to_sampling_params(constraint=constraint))
    params = serving.fit(ids, params, creq.max_completion_tokens)

    async def run(request: Request, sink: _Sink):
        if sink.streams:  # parsed as generated: text, reasoning and calls stream as they come
            parser = ReplyParser(creq, prefill, serving.reasoning_parser)
            loop = asyncio.get_running_loop()
            deltas: asyncio.Queue = asyncio.Queue()
            fut = serving.batcher.submit(
                [ids], params, lambda _i, _j, d: loop.call_soon_threadsafe(deltas.put_nowait, d)
            )
            sent = 0
            try:
                async for delta in drain(deltas, asyncio.wrap_future(fut)):
                    sent += len(delta)
                    for e in parser.feed(delta):
                        sink.event(e)
            finally:
                serving.batcher.cancel(fut)  # a no-op once it finished; the client went away otherwise
            (outs,) = await serving.wait(request, fut)
            c = outs[0]
            if c.finish_reason == "error":
                raise grammar_error(c, constraint_param(creq))
            for e in parser.feed(c.text[sent:]) + parser.finish():  # what the engine did not stream
                sink.event(e)
            choice = choice_message(creq, prefill, c, engine, 0, parser=parser)
        else:
            (outs,) = await serving.generate(request, [ids], params, constraint_param(creq))
            c = outs[0]
            choice = choice_message(creq, prefill, c, engine, 0, serving.reasoning_parser)
        output = choice_items(choice)
        for item in output:
            sink.item(item)
        return output, ResponseUsage.of(len(ids), c.completion_tokens), {}

    return run


def _plan_agent(serving: OpenAIServing, req: ResponsesRequest, items: list[dict[str, Any]]):
    tools = serving.agents[req.model]
    functions, _ = function_tools(req, {BUILTIN_TOOLS.get(name, "mcp") for name in tools})
    if functions:
        raise RequestError(
            400,
            f"the agent model {req.model!r} runs its own tools; function tools go to {serving.model_name!r}",
            param="tools",
        )
    creq = chat_request(req, chat_messages(items, req.instructions), [])
    agents.agent_settings(serving, creq, req.max_tool_calls)  # a bad request fails here, not in the run

    async def run(request: Request, sink: _Sink):
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()
        work, bengine = agents.start_agent(
            serving, creq, lambda e: loop.call_soon_threadsafe(events.put_nowait, e), req.max_tool_calls
        )
        container, output = new_id("cntr"), []
        try:
            async for event in drain(events, work):
                if event.get("type") == "tool":
                    output.append(tool_item(event, container))
                    sink.item(output[-1])
            (traj,) = await serving.wait(request, work, bengine.cancel)
        finally:
            bengine.cancel()
        output.append(message_item(agents.final_text(traj)))
        sink.item(output[-1])
        usage = ResponseUsage.of(bengine.usage["prompt_tokens"], bengine.usage["completion_tokens"])
        return output, usage, {"agentkit": agents.trace(traj)}

    return run


def _plan_service(serving: OpenAIServing, req: ResponsesRequest, items: list[dict[str, Any]]):
    functions, _ = function_tools(req, set())
    if functions:
        raise RequestError(400, f"the agent model {req.model!r} takes no function tools", param="tools")
    creq = chat_request(req, chat_messages(items, req.instructions), [])
    question, _history, system = agent_conversation(creq.messages)

    async def run(request: Request, sink: _Sink):
        bengine = BatchedEngine(serving.batcher)
        ext = (req.model_extra or {}).get("agentkit")
        work = asyncio.ensure_future(
            run_in_threadpool(serving.services[req.model].answer, bengine, question, system, ext)
        )
        text, ext_out, usage = await serving.wait(request, work, bengine.cancel)
        item = message_item(text)
        sink.item(item)
        return [item], ResponseUsage.of(usage["prompt_tokens"], usage["completion_tokens"]), {"agentkit": ext_out}

    return run


def _finish(serving, req, items, rid, created, output, usage, extra) -> ResponseObject:
    resp = response_object(req, rid, created, status_of(output), output, usage, **extra)
    if req.store and not serving.responses.put(_dump(resp), items):
        log.warning("response %s is larger than the store's bound; it was not stored", rid)
    return resp


async def _stream(serving, req, items, run, rid, created):
    events = ResponseEvents()
    for e in events.start(response_object(req, rid, created, "in_progress", [], None)):
        yield e
    sink = _EventSink(events)
    work = asyncio.ensure_future(run(_Detached(), sink))
    try:
        async for e in drain(sink.queue, work):
            yield e
        try:
            output, usage, extra = work.result()
        except Exception as e:
            resp = response_object(req, rid, created, "failed", [], None, _error_body(e))
            yield events.end(resp)
            return
        yield events.end(_finish(serving, req, items, rid, created, output, usage, extra))
    finally:  # the client went away mid-stream: nothing more runs for it
        work.cancel()


async def _background(serving, req, items, run, rid, created) -> None:
    serving.responses.put(_dump(response_object(req, rid, created, "in_progress", [], None)), items)
    try:
        output, usage, extra = await run(_Detached(), _Sink())
    except asyncio.CancelledError:
        serving.responses.put(_dump(response_object(req, rid, created, "cancelled", [], None)), items)
        raise
    except Exception as e:
        serving.responses.put(_dump(response_object(req, rid, created, "failed", [], None, _error_body(e))), items)
        return
    _finish(serving, req, items, rid, created, output, usage, extra)


class _Detached:
    """The request of work that no client waits on (a background response, a stream's run): it never goes away;
    cancelling its task stops it."""

    async def is_disconnected(self) -> bool:
        return False


def _error_body(e: Exception) -> dict[str, Any]:
    if isinstance(e, RequestError):
        return {"code": e.code or e.type, "message": e.message}
    log.exception("a response failed", exc_info=e)
    return {"code": "server_error", "message": f"{type(e).__name__}: {e}"}


def _stored(serving: OpenAIServing, response_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    got = serving.responses.get(response_id)
    if got is None:
        raise _not_found(response_id)
    return got


def _not_found(response_id: str) -> RequestError:
    return RequestError(404, f"response {response_id!r} not found", param="response_id", code="not_found")


def _dump(resp: ResponseObject) -> dict[str, Any]:
    return resp.model_dump(mode="json", exclude_unset=True)
