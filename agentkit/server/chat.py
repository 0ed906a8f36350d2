"""Chat-completion logic of the server, independent of HTTP: requests → prompts → engine → OpenAI objects.

Client-side tools: the tool list is described to the model in a system message in the hermes format, and
``<tool_call>{…}</tool_call>`` in its output becomes ``message.tool_calls`` with ``finish_reason="tool_calls"``.
A named ``tool_choice`` pre-fills ``<tool_call>`` and constrains the rest to a call whose arguments follow the
function's schema; ``"required"`` pre-fills it too and constrains the reply to hermes calls to any of the tools (one
or more, each on its own line: the model stops or writes another; one with ``parallel_tool_calls=false``). ``response_format``
and ``structured_outputs`` constrain plain replies.
A reply is parsed by ``ReplyParser`` (reasoning in think tags with a reasoning parser, then tool calls), delta by
delta when streamed and whole otherwise, by the same code (``agentkit.tools.stream_parsers``).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from agentkit.engines.base import Completion
from agentkit.engines.structured import JSON_LAYOUT, Constraint, strict_schema
from agentkit.server.http import RequestError
from agentkit.server.protocol import (
    AssistantMessage,
    ChatChoice,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatMessage,
    ChoiceLogprobs,
    FunctionCall,
    FunctionDef,
    TokenLogprob,
    ToolCall,
    TopLogprob,
    UsageInfo,
)
from agentkit.tools.parsers import format_hermes_call, hermes_tools_prompt, parse_openai_tool_calls
from agentkit.tools.stream_parsers import ReasoningStream, ToolCallStream


def to_messages(req: ChatCompletionRequest) -> tuple[list[dict[str, str]], str, Constraint | None]:
    """Engine messages (tool calls and results rendered in hermes text), the assistant pre-fill, and the
    constraint on the completion.

    A forced tool call (``tool_choice`` ``"required"`` or a named function) is pre-filled with ``<tool_call>`` and
    its JSON is constrained to ``{"name": <a tool's name>, "arguments": <that tool's parameters schema>}``, so
    the arguments validate against the function's schema. Otherwise ``response_format`` or ``structured_outputs``
    constrains the reply."""
    msgs = []
    for m in req.messages:
        role = "system" if m.role == "developer" else m.role
        if m.role == "assistant" and m.tool_calls:
            calls = "".join(format_hermes_call(c) for c in parse_openai_tool_calls(m.tool_calls))
            msgs.append({"role": "assistant", "content": (m.text() + calls).strip()})
        elif m.role == "tool":
            msgs.append({"role": "user", "content": f"<tool_response>\n{m.text()}\n</tool_response>"})
        else:
            msgs.append({"role": role, "content": m.text()})
    forced = forced_functions(req)
    if req.tools and req.tool_choice != "none":
        msgs.insert(
            0 if msgs[0]["role"] != "system" else 1,
            {"role": "system", "content": hermes_tools_prompt([t.function.model_dump() for t in req.tools])},
        )
    if forced and req.tool_choice == "required":
        grammar = hermes_calls_grammar(forced, req.parallel_tool_calls)
        return msgs, "<tool_call>", _checked(Constraint(grammar=grammar), "tools")
    if forced:
        return msgs, "<tool_call>", _checked(Constraint.schema(call_schema(forced)), "tools")
    return msgs, "", constraint_of(req)


def forced_functions(req: ChatCompletionRequest) -> list[FunctionDef]:
    """The functions a reply must call (``tool_choice`` ``"required"``: any tool; a named one: that one); [] when
    the model may answer in text. Bad ``tool_choice`` values are 400 errors."""
    choice = req.tool_choice
    if choice is None or choice in ("auto", "none"):
        return []
    if not req.tools:
        raise RequestError(400, "tool_choice needs tools", param="tool_choice")
    if choice == "required":
        return [t.function for t in req.tools]
    name = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or choice.get("type", "function") != "function" or not isinstance(name, str):
        raise RequestError(
            400,
            'tool_choice must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}',
            param="tool_choice",
        )
    named = [t.function for t in req.tools if t.function.name == name]
    if not named:
        raise RequestError(400, f"tool_choice names an unknown function {name!r}", param="tool_choice")
    return named


def constraint_param(req: ChatCompletionRequest) -> str | None:
    """The field whose constraint a chat request's completion follows (what a ``grammar_error`` names)."""
    if req.tools and req.tool_choice not in (None, "auto", "none"):
        return "tools"
    return "structured_outputs" if req.structured_outputs is not None else "response_format"


def hermes_calls_grammar(functions: list[FunctionDef], several: bool = True) -> str:
    r"""A Lark grammar (llguidance's, with ``%json`` for a call's JSON, strict and compact as every schema here) of
    what follows a pre-filled ``<tool_call>``: one call to any of ``functions``, then (``several``) more calls on
    their own lines. After each call the model may stop or write another.

    >>> print(hermes_calls_grammar([FunctionDef(name="f")]).splitlines()[0])
    start: body ("</tool_call>" ("\n<tool_call>" body "</tool_call>")*)?
    """
    schema = {**strict_schema(call_schema(functions)), "x-guidance": JSON_LAYOUT}
    more = ' ("\\n<tool_call>" body "</tool_call>")*' if several else ""
    return f'start: body ("</tool_call>"{more})?\nbody: %json {json.dumps(schema)}\n'


def call_schema(functions: list[FunctionDef]) -> dict[str, Any]:
    """JSON schema of one hermes call to any of ``functions``.

    >>> call_schema([FunctionDef(name="f")])["properties"]["name"]
    {'const': 'f'}
    """
    cases = [
        {
            "type": "object",
            "properties": {"name": {"const": f.name}, "arguments": f.parameters or {"type": "object"}},
            "required": ["name", "arguments"],
        }
        for f in functions
    ]
    return cases[0] if len(cases) == 1 else {"anyOf": cases}


def constraint_of(req) -> Constraint | None:
    """The constraint a request asks for: OpenAI's ``response_format`` or vLLM's ``structured_outputs`` (400
    errors name the field, and an invalid schema, regex or grammar is refused before anything is generated)."""
    rf, so = req.response_format, req.structured_outputs
    if rf is not None and so is not None:
        raise RequestError(400, "give response_format or structured_outputs, not both", param="structured_outputs")
    if so is not None:
        try:
            return _checked(Constraint.from_body(so), "structured_outputs")
        except ValueError as e:
            raise RequestError(400, str(e), param="structured_outputs") from None
    if rf is None or rf.get("type") == "text":
        return None
    kind = rf.get("type")
    if kind == "json_object":
        return Constraint(json_object=True)
    if kind != "json_schema":
        raise RequestError(
            400,
            f"response_format.type must be text, json_object or json_schema, got {kind!r}",
            param="response_format.type",
        )
    schema = (rf.get("json_schema") or {}).get("schema") if isinstance(rf.get("json_schema"), dict) else None
    if not isinstance(schema, dict):
        raise RequestError(
            400,
            "response_format.json_schema.schema must be a JSON schema object",
            param="response_format.json_schema.schema",
        )
    return _checked(Constraint.schema(schema), "response_format.json_schema.schema")


def _checked(c: Constraint, param: str) -> Constraint:
    try:
        c.check()
    except ValueError as e:
        raise RequestError(400, f"{param} cannot be enforced: {e}", param=param) from None
    return c


def token_names(engine, ids: list[int], as_ids: bool) -> list[str]:
    """How logprob listings name tokens: their text, or ``token_id:N`` (vLLM's ``return_tokens_as_token_ids``)."""
    return [f"token_id:{t}" for t in ids] if as_ids else engine.token_strings(ids)


def _logprobs(engine, c: Completion, as_ids: bool) -> ChoiceLogprobs:
    def entry(t: int, lp: float, top: dict[int, float] | None) -> TokenLogprob:
        (s,) = token_names(engine, [t], as_ids)
        alts = list((top or {}).items())
        names = token_names(engine, [a for a, _ in alts], as_ids)
        return TokenLogprob(
            token=s,
            logprob=lp,
            bytes=list(s.encode()),
            top_logprobs=[TopLogprob(token=a, logprob=v, bytes=list(a.encode())) for a, (_, v) in zip(names, alts)],
        )

    tops = c.top_logprobs or [None] * len(c.token_ids)
    return ChoiceLogprobs(content=[entry(t, lp, top) for t, lp, top in zip(c.token_ids, c.logprobs, tops)])


class ReplyParser:
    """One reply's text → reasoning, content and tool calls, delta by delta (``feed``, then ``finish``): events
    ``("reasoning", text)``, ``("content", text)``, ``("call", k, id, name)``, ``("arguments", k, text)``.

    Reasoning is split off first (``reasoning_parser``; not in a constrained reply, which has none), then tool
    calls are parsed from the rest when the request has tools. Without either, the text is content as it is."""

    def __init__(self, req: ChatCompletionRequest, prefill: str = "", reasoning_parser: str | None = None):
        tools_on = bool(req.tools) and req.tool_choice != "none"
        constrained = (
            bool(forced_functions(req)) or req.response_format is not None or req.structured_outputs is not None
        )
        self.reasoning = ReasoningStream(reasoning_parser) if reasoning_parser and not constrained else None
        self.tools = (
            ToolCallStream({t.function.name for t in req.tools}, max_calls=None if req.parallel_tool_calls else 1)
            if tools_on
            else None
        )
        self._prefill = prefill
        self.events: list[tuple] = []  # every event so far

    def feed(self, delta: str) -> list[tuple]:
        delta, self._prefill = self._prefill + delta, ""
        out = self._split(self.reasoning.feed(delta) if self.reasoning else [("content", delta)])
        self.events += out
        return out

    def finish(self) -> list[tuple]:
        out = self._split(self.reasoning.finish() if self.reasoning else [])
        out += self.tools.finish() if self.tools else []
        self.events += out
        return out

    def text(self, kind: str) -> str:
        """All the ``content`` or ``reasoning`` so far."""
        return "".join(e[1] for e in self.events if e[0] == kind)

    def _split(self, events: list[tuple]) -> list[tuple]:
        if self.tools is None:
            return [e for e in events if e[1]]
        return [x for e in events for x in (self.tools.feed(e[1]) if e[0] == "content" else [e])]

    @property
    def calls(self) -> list[ToolCall]:
        """The reply's valid tool calls (after ``finish``)."""
        return [
            ToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=c.arguments))
            for c in (self.tools.calls if self.tools else [])
        ]


def choice_message(
    req: ChatCompletionRequest,
    prefill: str,
    c: Completion,
    engine,
    index: int,
    reasoning_parser: str | None = None,
    parser: ReplyParser | None = None,
) -> ChatChoice:
    """One choice of the response: the text, or the tool calls parsed from it (``finish_reason`` "tool_calls"),
    with ``reasoning_content`` when a reasoning parser found reasoning. ``parser``: the one that parsed ``c`` as
    it streamed, finished (its calls keep the ids they streamed with)."""
    if parser is None:
        parser = ReplyParser(req, prefill, reasoning_parser)
        parser.feed(c.text)
        parser.finish()
    content, reasoning, calls = parser.text("content"), parser.text("reasoning"), parser.calls
    message = (
        AssistantMessage(content=content or None, tool_calls=calls) if calls else AssistantMessage(content=content)
    )
    if reasoning:
        message.reasoning_content = reasoning
    logprobs = _logprobs(engine, c, req.return_tokens_as_token_ids) if req.logprobs else None
    finish = "tool_calls" if calls else c.finish_reason
    return ChatChoice(index=index, message=message, finish_reason=finish, logprobs=logprobs)


def chat_response(
    req: ChatCompletionRequest,
    prefill: str,
    outs: list[Completion],
    prompt_tokens: int,
    engine,
    model: str,
    usage: UsageInfo | None = None,
    reasoning_parser: str | None = None,
    **extra: Any,
) -> ChatCompletionResponse:
    """The response to ``req`` from its completions (``usage`` by default: the prompt once, every completion's
    tokens); ``extra``: extension fields (``agentkit``)."""
    return ChatCompletionResponse(
        id="chatcmpl-" + uuid.uuid4().hex,
        created=int(time.time()),
        model=model,
        choices=[choice_message(req, prefill, c, engine, i, reasoning_parser) for i, c in enumerate(outs)],
        usage=usage or UsageInfo.of(prompt_tokens, sum(c.completion_tokens for c in outs)),
        **extra,
    )


def agent_conversation(messages: list[ChatMessage]) -> tuple[str, list[dict[str, str]], str]:
    """(question, earlier turns, client system text) of a request to an agent model.

    The last user message is the task; the user/assistant messages before it reach the agent as conversation
    history (few-shot demonstrations work this way); system/developer text is added to the agent's own prompt.
    """
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if last is None:
        raise RequestError(400, "an agent model needs a user message", param="messages")
    history = [{"role": m.role, "content": m.text()} for m in messages[:last] if m.role in ("user", "assistant")]
    system = "\n".join(m.text() for m in messages if m.role in ("system", "developer"))
    return messages[last].text(), history, system
