"""Tool-call formats: the TIR papers' tags and OpenAI/hermes JSON calls. Parsers never raise on model output.

Tag style (Tool-Light, Tool-Star, TIPS): the model writes ``<python>code</python>`` or ``<search>query</search>``;
generation stops at the closing tag; the tool's output comes back as ``<result>…</result>``; the final answer
is ``<answer>…</answer>`` (often with ``\\boxed{}``).

JSON style: OpenAI ``tool_calls`` (``{"id", "type": "function", "function": {"name", "arguments": "<JSON>"}}``)
and, for local models, hermes text ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``.

A malformed call is not an exception: it becomes a ``ToolCall`` with ``error`` set, whose message is shown to
the model as the tool's result, so it can correct itself.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

TAG_TOOLS = ("python", "search")
_FENCE = re.compile(r"^\s*```(?:python|py)?\s*\n(.*?)\n?\s*```\s*$", re.S)


@dataclass
class ToolCall:
    """One requested call. ``error`` is set (and ``name``/``arguments`` may be partial) when it was malformed."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: "call_" + uuid.uuid4().hex[:24])
    error: str | None = None


# ---- tag style ------------------------------------------------------------------------------------------------
def tag_stop_strings(tools: tuple[str, ...] = TAG_TOOLS) -> list[str]:
    """Stop strings for tag-style generation: each tool's closing tag, and the answer's."""
    return [f"</{t}>" for t in tools] + ["</answer>"]


def parse_tag_call(text: str, tools: tuple[str, ...] = TAG_TOOLS) -> ToolCall | None:
    """The call at the end of ``text`` (generation stopped at its closing tag), or None if it ends otherwise.

    The argument is the tag's body: ``code`` for python (a Markdown fence inside is removed), ``query`` else.

    >>> parse_tag_call("Let me compute. <python>print(17*23)</python>").arguments
    {'code': 'print(17*23)'}
    >>> parse_tag_call("<search></search>").error
    'empty <search> call: put the query between <search> and </search>'
    >>> parse_tag_call("no call here") is None
    True
    """
    if not isinstance(text, str):
        return None
    stripped = text.rstrip()
    for name in tools:
        close = f"</{name}>"
        if not stripped.endswith(close):
            continue
        start = stripped.rfind(f"<{name}>")
        if start < 0:
            return ToolCall(name=name, error=f"found {close} without an opening <{name}>")
        body = stripped[start + len(name) + 2 : -len(close)]
        if name == "python":
            m = _FENCE.match(body)
            body = m.group(1) if m else body
        body = body.strip("\n") if name == "python" else body.strip()
        if not body.strip():
            return ToolCall(name=name, error=f"empty <{name}> call: put the {_arg(name)} between <{name}> and {close}")
        return ToolCall(name=name, arguments={_arg(name): body})
    return None


def _arg(tool: str) -> str:
    return "code" if tool == "python" else "query"


def format_tag_call(call: ToolCall) -> str:
    body = call.arguments.get(_arg(call.name), "")
    return f"<{call.name}>{body}</{call.name}>"


def format_tag_result(output: str) -> str:
    """The tool's output as the TIR papers feed it back."""
    return f"\n<result>\n{output.rstrip()}\n</result>\n"


def parse_answer(text: str) -> str | None:
    """The final answer inside the last ``<answer>…</answer>``, if any.

    >>> parse_answer("so <answer>\\\\boxed{391}</answer>")
    '\\\\boxed{391}'
    """
    if not isinstance(text, str):
        return None
    m = re.findall(r"<answer>(.*?)(?:</answer>|$)", text, flags=re.S)
    return m[-1].strip() if m else None


# ---- JSON style -----------------------------------------------------------------------------------------------
_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
# The hermes tools block in the words of Qwen 2.5's chat template (tool-tuned models widely share it), so a
# prompt built here reads as that template's own rendering of the same tools.
HERMES_TOOLS_PROMPT = (
    "{intro}\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
    'XML tags:\n<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


def hermes_tools_prompt(functions: list[dict[str, Any]], intro: str = "You are a helpful assistant.") -> str:
    """The system text that describes ``functions`` (OpenAI ``function`` objects) in the hermes format, after
    ``intro``."""
    tools = "\n".join(json.dumps({"type": "function", "function": f}) for f in functions)
    return HERMES_TOOLS_PROMPT.format(intro=intro, tools=tools)


def format_hermes_result(output: str) -> str:
    return f"\n<tool_response>\n{output.rstrip()}\n</tool_response>\n"


def parse_hermes_calls(text: str, known: set[str] | None = None) -> tuple[str, list[ToolCall]]:
    """Split hermes-style text into (content before the first call, calls).

    >>> content, calls = parse_hermes_calls('Sure. <tool_call>{"name": "python", "arguments": {"code": "1+1"}}</tool_call>')
    >>> content, calls[0].name, calls[0].arguments
    ('Sure.', 'python', {'code': '1+1'})
    """
    if not isinstance(text, str):
        return "", []
    first = text.find("<tool_call>")
    if first < 0:
        return text, []
    calls = [call_from_json(body, known) for body in _HERMES.findall(text[first:])]
    return text[:first].strip(), calls


def format_hermes_call(call: ToolCall) -> str:
    return "<tool_call>" + json.dumps({"name": call.name, "arguments": call.arguments}) + "</tool_call>"


def call_from_json(body: str, known: set[str] | None = None) -> ToolCall:
    """One hermes call's JSON body (``{"name": ..., "arguments": {...}}``) → a ToolCall (``error`` set if bad)."""
    try:
        obj = json.loads(body.strip())
    except (json.JSONDecodeError, RecursionError) as e:
        return ToolCall(name="", error=f"the tool call is not valid JSON ({getattr(e, 'msg', e)})")
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return ToolCall(name="", error='a tool call must be a JSON object {"name": ..., "arguments": {...}}')
    return _checked(obj["name"], obj.get("arguments", {}), known, obj.get("id"))


def parse_openai_tool_calls(tool_calls: Any, known: set[str] | None = None) -> list[ToolCall]:
    """OpenAI ``message.tool_calls`` (dicts) → ToolCalls; ``arguments`` is a JSON string there."""
    out = []
    for tc in tool_calls if isinstance(tool_calls, list) else []:
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            out.append(ToolCall(name="", error="a tool call needs function.name"))
            continue
        args: Any = fn.get("arguments") or "{}"
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (json.JSONDecodeError, RecursionError) as e:
                out.append(
                    ToolCall(
                        name=fn["name"],
                        id=tc.get("id") or ToolCall("").id,
                        error=f"arguments are not valid JSON ({getattr(e, 'msg', e)})",
                    )
                )
                continue
        out.append(_checked(fn["name"], args, known, tc.get("id")))
    return out


def _checked(name: str, args: Any, known: set[str] | None, call_id: Any) -> ToolCall:
    cid = call_id if isinstance(call_id, str) and call_id else ToolCall("").id
    if not isinstance(args, dict):
        return ToolCall(name=name, id=cid, error="arguments must be a JSON object")
    if known is not None and name not in known:
        return ToolCall(
            name=name,
            arguments=args,
            id=cid,
            error=f"unknown tool {name!r}; available: {', '.join(sorted(known)) or 'none'}",
        )
    return ToolCall(name=name, arguments=args, id=cid)


def to_openai(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
