"""The Responses API's logic, independent of HTTP: items → chat messages → engine → output items and events.

A request's **conversation** is the stored context of ``previous_response_id`` (``ResponseStore``), that response's
output items, then the request's ``input`` items. It becomes a chat request (``ChatCompletionRequest``) and runs as
one (``agentkit.server.chat``): ``instructions`` is the system message (never inherited), function tools are the
client-side tools, ``text.format`` is the ``response_format``. Output items come back from the chat choice:

- text → a ``message`` item with one ``output_text`` part (``logprobs`` when ``include`` asks for them);
- each tool call → a ``function_call`` item; the client answers it with a ``function_call_output`` item naming its
  ``call_id``, in the next request's ``input`` or after ``previous_response_id`` (an output naming no earlier call
  is a 400, as OpenAI's);
- an agent model's server-side tool calls → ``code_interpreter_call`` (python), ``file_search_call`` (search) or
  ``mcp_call`` (any other tool) items, each before the final ``message``.

Streaming (``stream: true``) sends the typed events OpenAI sends: ``response.created``, ``response.in_progress``,
then for each item ``response.output_item.added``, its own events (``response.content_part.added``,
``response.output_text.delta`` … ``.done``; ``response.function_call_arguments.delta`` … ``.done``;
``response.code_interpreter_call.*``), ``response.output_item.done``, and last ``response.completed`` (or
``response.incomplete`` / ``response.failed``), each with its ``sequence_number``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from agentkit.server.http import RequestError
from agentkit.server.protocol import (
    ChatChoice,
    ChatCompletionRequest,
    ChatMessage,
    CodeInterpreterCallItem,
    CodeInterpreterLogs,
    FileSearchCallItem,
    FileSearchResult,
    FunctionCallItem,
    McpCallItem,
    MessageItem,
    OutputItem,
    OutputText,
    ReasoningItem,
    ReasoningText,
    ResponseObject,
    ResponsesRequest,
    ResponseUsage,
)
from agentkit.server.response_store import ResponseStore
from agentkit.server.streaming import pieces as _pieces

LOGPROBS = "message.output_text.logprobs"  # the ``include`` value that asks for output tokens' logprobs
BUILTIN_TOOLS = {"python": "code_interpreter", "search": "file_search"}  # agent tool -> Responses built-in tool
_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


# ------------------------------------------------------------------------------------------------ input


def input_items(req: ResponsesRequest) -> list[dict[str, Any]]:
    """The request's ``input`` as items, each with a ``type`` and an ``id`` (a text is one user message)."""
    raw = [{"role": "user", "content": req.input}] if isinstance(req.input, str) else req.input
    items = []
    for i, item in enumerate(raw):
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in ("message", "function_call", "function_call_output", "reasoning", *_AGENT_ITEMS):
            raise RequestError(
                400,
                f"input[{i}] has type {kind!r}; this server takes message, function_call, function_call_output and "
                "reasoning items (and the output items it returned)",
                param=f"input[{i}].type",
            )
        item = {**item, "type": kind, "id": item.get("id") or new_id(_ID_PREFIX.get(kind, "item"))}
        if kind == "message" and isinstance(item.get("content"), str):  # stored as OpenAI lists it: text parts
            part = "output_text" if item.get("role") == "assistant" else "input_text"
            item["content"] = [{"type": part, "text": item["content"]}]
        items.append(item)
    return items


_AGENT_ITEMS = ("code_interpreter_call", "file_search_call", "mcp_call")
_ID_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}


def conversation(req: ResponsesRequest, store: ResponseStore) -> list[dict[str, Any]]:
    """The items the model sees, in order: the stored conversation of ``previous_response_id`` (its context, then
    its output), then this request's input."""
    own = input_items(req)
    if req.previous_response_id is None:
        return own
    got = store.get(req.previous_response_id)
    if got is None:
        raise RequestError(
            404,
            f"previous response {req.previous_response_id!r} not found (never stored, deleted or expired)",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    prev, context = got
    return [*context, *prev["output"], *own]


def chat_messages(items: list[dict[str, Any]], instructions: str | None) -> list[ChatMessage]:
    """Chat messages of a conversation: function calls join the assistant message before them as ``tool_calls``,
    ``function_call_output`` items become ``tool`` messages; reasoning and server-side tool items are left out
    (the agent's final message carries its answer)."""
    msgs: list[ChatMessage] = [ChatMessage(role="system", content=instructions)] if instructions else []
    calls: set[str] = set()
    for i, item in enumerate(items):
        kind = item["type"]
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise RequestError(
                    400, f"input[{i}].role must be user, system, developer or assistant", param=f"input[{i}].role"
                )
            msgs.append(ChatMessage(role=role, content=_text(item.get("content"), f"input[{i}].content")))
        elif kind == "function_call":
            for field in ("call_id", "name", "arguments"):
                if not isinstance(item.get(field), str):
                    raise RequestError(400, f"input[{i}].{field} must be a string", param=f"input[{i}].{field}")
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            if msgs and msgs[-1].role == "assistant" and not isinstance(msgs[-1].content, list):
                msgs[-1].tool_calls = [*(msgs[-1].tool_calls or []), call]
            else:
                msgs.append(ChatMessage(role="assistant", content="", tool_calls=[call]))
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                raise RequestError(
                    400,
                    f"input[{i}] is the output of call {item.get('call_id')!r}, but no function_call with that call_id "
                    "comes before it",
                    param=f"input[{i}].call_id",
                )
            output = _text(item.get("output"), f"input[{i}].output")
            msgs.append(ChatMessage(role="tool", tool_call_id=item["call_id"], content=output))
    if not msgs or all(m.role == "system" for m in msgs):
        raise RequestError(400, "the input has no message for the model to answer", param="input")
    return msgs


def _text(content: Any, param: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for k, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in _TEXT_PARTS:
                raise RequestError(
                    400,
                    f"{param}[{k}] has type {kind!r}; only text parts (input_text, output_text) are taken",
                    param=f"{param}[{k}]",
                )
            out.append(part.get("text") or part.get("refusal") or "")
        return "".join(out)
    raise RequestError(400, f"{param} must be a text or a list of text parts", param=param)


def function_tools(req: ResponsesRequest, builtin: set[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the request's function tools as chat tools, the built-in tools it names). A built-in tool the model does
    not have (``builtin``: the agent model's) is a 400."""
    functions, named = [], []
    for i, tool in enumerate(req.tools or []):
        kind = tool.get("type")
        if kind == "function":
            if not isinstance(tool.get("name"), str):
                raise RequestError(400, f"tools[{i}].name must be a string", param=f"tools[{i}].name")
            fn = {k: tool[k] for k in ("name", "description", "parameters") if tool.get(k) is not None}
            functions.append({"type": "function", "function": fn})
        elif kind in builtin:
            named.append(kind)
        else:
            have = ", ".join(sorted(builtin)) or "none (agent models have them)"
            raise RequestError(
                400,
                f"tools[{i}] has type {kind!r}; this model takes function tools and its built-in tools: {have}",
                param=f"tools[{i}].type",
            )
    return functions, named


def chat_request(
    req: ResponsesRequest, messages: list[ChatMessage], functions: list[dict[str, Any]]
) -> ChatCompletionRequest:
    """The chat request a Responses request runs as."""
    body: dict[str, Any] = {
        "model": req.model,
        "messages": messages,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "max_completion_tokens": req.max_output_tokens,
        "seed": req.seed,
        "parallel_tool_calls": req.parallel_tool_calls,
        "logprobs": LOGPROBS in (req.include or []),
        "top_logprobs": req.top_logprobs,
        "response_format": _response_format(req.text),
    }
    if functions:
        body["tools"] = functions
        body["tool_choice"] = _tool_choice(req.tool_choice)
    elif req.tool_choice not in ("auto", "none"):
        raise RequestError(400, "tool_choice needs function tools", param="tool_choice")
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as e:  # checked by ResponsesRequest already; anything left names the Responses field
        raise RequestError(400, f"the request cannot run as a chat completion: {e.errors()[0]['msg']}") from None


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise RequestError(
        400, 'tool_choice must be "auto", "none", "required" or {"type": "function", "name": ...}', param="tool_choice"
    )


def _response_format(text: dict[str, Any] | None) -> dict[str, Any] | None:
    fmt = (text or {}).get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise RequestError(400, "text.format.type must be text, json_object or json_schema", param="text.format.type")
    if fmt["type"] != "json_schema":
        return {"type": fmt["type"]}
    if not isinstance(fmt.get("schema"), dict):
        raise RequestError(400, "text.format.schema must be a JSON schema object", param="text.format.schema")
    return {"type": "json_schema", "json_schema": {k: fmt[k] for k in ("name", "schema", "strict") if k in fmt}}


# ----------------------------------------------------------------------------------------------- output


def choice_items(choice: ChatChoice) -> list[OutputItem]:
    """A chat choice as output items: its reasoning (a ``reasoning`` item, when a reasoning parser found some), its
    text (a ``message``, also when empty and there is no call), then one ``function_call`` per tool call."""
    status = "incomplete" if choice.finish_reason == "length" else "completed"
    msg = choice.message
    items: list[OutputItem] = []
    if msg.reasoning_content:
        items.append(reasoning_item(msg.reasoning_content, status))
    if msg.content or not msg.tool_calls:
        logprobs = None
        if choice.logprobs is not None:
            logprobs = [t.model_dump() for t in choice.logprobs.content]
        items.append(message_item(msg.content or "", status, logprobs))
    for call in msg.tool_calls or []:
        items.append(
            FunctionCallItem(
                id=new_id("fc"),
                call_id=call.id,
                name=call.function.name,
                arguments=call.function.arguments,
                status="completed",
            )
        )
    return items


def message_item(text: str, status: str = "completed", logprobs: list[dict[str, Any]] | None = None) -> MessageItem:
    part = OutputText(text=text, annotations=[], logprobs=logprobs if logprobs is not None else [])
    return MessageItem(id=new_id("msg"), status=status, content=[part])


def reasoning_item(text: str, status: str = "completed") -> ReasoningItem:
    return ReasoningItem(id=new_id("rs"), summary=[], content=[ReasoningText(text=text)], status=status)


def tool_item(event: dict[str, Any], container: str) -> OutputItem:
    """An agent's tool call (the loop's ``tool`` event) as the built-in tool's output item."""
    args, ok, output = event.get("arguments") or {}, event.get("ok", True), str(event.get("output", ""))
    if event["tool"] == "python":
        return CodeInterpreterCallItem(
            id=new_id("ci"),
            code=str(args.get("code", "")),
            container_id=container,
            outputs=[CodeInterpreterLogs(logs=output)],
            status="completed" if ok else "failed",
        )
    if event["tool"] == "search":
        return FileSearchCallItem(
            id=new_id("fs"),
            queries=[str(args.get("query", ""))],
            status="completed" if ok else "failed",
            results=[FileSearchResult(text=output)],
        )
    return McpCallItem(
        id=new_id("mcp"),
        server_label="agentkit",
        name=event["tool"],
        arguments=json.dumps(args),
        output=output if ok else None,
        error=None if ok else output,
        status="completed" if ok else "failed",
    )


def response_object(
    req: ResponsesRequest,
    rid: str,
    created_at: int,
    status: str,
    output: list[OutputItem],
    usage: ResponseUsage | None,
    error: dict[str, Any] | None = None,
    **extra: Any,
) -> ResponseObject:
    """The response to ``req``: the request's settings echoed, its output, status and usage."""
    incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
    return ResponseObject(
        id=rid,
        created_at=created_at,
        status=status,
        model=req.model,
        output=output,
        instructions=req.instructions,
        tools=req.tools or [],
        tool_choice=req.tool_choice,
        parallel_tool_calls=req.parallel_tool_calls,
        temperature=req.temperature,
        top_p=req.top_p,
        max_output_tokens=req.max_output_tokens,
        max_tool_calls=req.max_tool_calls,
        previous_response_id=req.previous_response_id,
        text=req.text or {"format": {"type": "text"}},
        truncation=req.truncation or "disabled",
        store=req.store,
        background=req.background,
        metadata=req.metadata or {},
        user=req.user,
        error=error,
        incomplete_details=incomplete,
        usage=usage,
        **extra,
    )


def status_of(items: list[OutputItem]) -> str:
    return "incomplete" if any(getattr(i, "status", None) == "incomplete" for i in items) else "completed"


def now() -> int:
    return int(time.time())


# ----------------------------------------------------------------------------------------------- events


class ResponseEvents:
    """The typed server-sent events of one streamed response, numbered in order (``sequence_number``). An item
    streams as ``opened`` (``response.output_item.added``; a message's content part), ``delta``s of its text
    (message, reasoning) or arguments (function call), and ``closed`` (the ``….done`` events); ``item`` sends a
    finished item's events at once."""

    def __init__(self) -> None:
        self.seq = 0

    def event(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n"

    def start(self, resp: ResponseObject) -> Iterator[str]:
        body = _dump(resp)
        yield self.event("response.created", response=body)
        yield self.event("response.in_progress", response=body)

    def end(self, resp: ResponseObject) -> str:
        kind = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
            resp.status, "response.failed"
        )
        return self.event(kind, response=_dump(resp))

    def opened(self, index: int, item: OutputItem) -> Iterator[str]:
        empty = {"status": "in_progress"}
        if isinstance(item, (MessageItem, ReasoningItem)):
            empty["content"] = []
        elif isinstance(item, FunctionCallItem):
            empty["arguments"] = ""
        yield self.event("response.output_item.added", output_index=index, item=_dump(item.model_copy(update=empty)))
        if isinstance(item, MessageItem):
            part = {"type": "output_text", "text": "", "annotations": []}
            yield self.event(
                "response.content_part.added", item_id=item.id, output_index=index, content_index=0, part=part
            )

    def delta(self, index: int, item: OutputItem, text: str) -> str:
        ids = {"item_id": item.id, "output_index": index}
        if isinstance(item, FunctionCallItem):
            return self.event("response.function_call_arguments.delta", **ids, delta=text)
        if isinstance(item, ReasoningItem):
            return self.event("response.reasoning_text.delta", **ids, content_index=0, delta=text)
        return self.event("response.output_text.delta", **ids, content_index=0, delta=text, logprobs=[])

    def closed(self, index: int, item: OutputItem) -> Iterator[str]:
        ids = {"item_id": item.id, "output_index": index}
        if isinstance(item, MessageItem):
            part = item.content[0]
            yield self.event(
                "response.output_text.done", **ids, content_index=0, text=part.text, logprobs=part.logprobs or []
            )
            yield self.event("response.content_part.done", **ids, content_index=0, part=_dump(part))
        elif isinstance(item, ReasoningItem):
            yield self.event("response.reasoning_text.done", **ids, content_index=0, text=item.content[0].text)
        elif isinstance(item, FunctionCallItem):
            yield self.event("response.function_call_arguments.done", **ids, name=item.name, arguments=item.arguments)
        elif isinstance(item, CodeInterpreterCallItem):
            yield self.event("response.code_interpreter_call.in_progress", **ids)
            yield self.event("response.code_interpreter_call_code.delta", **ids, delta=item.code or "")
            yield self.event("response.code_interpreter_call_code.done", **ids, code=item.code or "")
            yield self.event("response.code_interpreter_call.interpreting", **ids)
            yield self.event("response.code_interpreter_call.completed", **ids)
        elif isinstance(item, FileSearchCallItem):
            for stage in ("in_progress", "searching", "completed"):
                yield self.event(f"response.file_search_call.{stage}", **ids)
        elif isinstance(item, McpCallItem):
            yield self.event("response.mcp_call.in_progress", **ids)
            yield self.event("response.mcp_call_arguments.done", **ids, arguments=item.arguments)
            yield self.event("response.mcp_call." + ("completed" if item.status == "completed" else "failed"), **ids)
        yield self.event("response.output_item.done", output_index=index, item=_dump(item))

    def item(self, index: int, item: OutputItem) -> Iterator[str]:
        """All the events of a finished item, its text or arguments in pieces."""
        yield from self.opened(index, item)
        for piece in _pieces(streamed_text(item)):
            yield self.delta(index, item, piece)
        yield from self.closed(index, item)


def streamed_text(item: OutputItem) -> str:
    """What an item's deltas carry: a message's or reasoning's text, a call's arguments (others: nothing)."""
    if isinstance(item, (MessageItem, ReasoningItem)):
        return item.content[0].text
    return item.arguments if isinstance(item, FunctionCallItem) else ""


def _dump(model) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_unset=True)
