"""Incremental parsers of a reply as it is generated: tool calls in hermes form and reasoning in think tags. Text deltas go in; OpenAI-shaped
pieces come out, as vLLM's tool and reasoning parsers stream them. The whole reply is parsed by the same code, so
what a stream sends reassembles byte for byte to the non-streamed reply.

Tool calls (``ToolCallStream``): ``content <tool_call>{"name": "f", "arguments": {…}}</tool_call> …``. The content
before the first call streams as it comes (its leading and trailing whitespace dropped: text that may still be
``<tool_call>`` or whitespace before it is held back); text after the first call is not content. A reply whose tags
hold no call that could be streamed is all content: the rest of its text follows at the end.

Each call streams as ``("call", k, id, name)`` once its name is complete (the name first, as OpenAI and vLLM send
it), then ``("arguments", k, text)`` pieces: the arguments object exactly as the model wrote it, character for
character as generated. The scanner tracks JSON strings and nesting, so ``}`` or ``</tool_call>`` inside a string
never ends a call. A call that names an unknown function, puts ``arguments`` before ``name``, or whose arguments are
not a JSON object is not streamed; in the whole reply it is left out, as the non-streamed parser leaves it out.

Known limit: a call whose arguments turn out malformed after they began to stream (a reply cut by ``max_tokens``)
stays in the stream as sent, while the whole reply leaves it out (vLLM's hermes parser does the same).

Reasoning (``ReasoningStream``): ``<think>…</think>`` → ``reasoning_content``, the rest → ``content``
(vLLM's ``--reasoning-parser``: ``qwen3``, the tags in the reply; ``deepseek_r1``, the opening tag in the prompt,
so a reply without ``</think>`` is all reasoning).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
Event = tuple  # ("content", text) | ("call", index, id, name) | ("arguments", index, text) | ("reasoning", text)


def _held(text: str, tag: str) -> int:
    """How many trailing characters of ``text`` could begin ``tag`` (held back until the next delta says)."""
    for k in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-k:]):
            return k
    return 0


class _CallScanner:
    """One call object, fed character by character: finds ``name`` and ``arguments`` at depth 1, and knows
    where the object ends (nesting and strings tracked)."""

    def __init__(self) -> None:
        self.text = ""
        self.depth, self.in_str, self.esc = 0, False, False
        self.key: str | None = None
        self.expect = "open"  # open | key | colon | value | comma
        self.value_start: int | None = None  # where the value at depth 1 began
        self.name: str | None = None
        self.args: tuple[int, int | None] | None = None  # (start, end) of the arguments value in text
        self.args_first = False  # arguments came before name
        self.done = False
        self.bad = False

    def feed(self, ch: str) -> None:
        i = len(self.text)
        self.text += ch
        if self.in_str:
            if self.esc:
                self.esc = False
            elif ch == "\\":
                self.esc = True
            elif ch == '"':
                self.in_str = False
                if self.depth == 1:
                    self._string_end(i + 1)
            return
        if ch.isspace():
            return
        if self.expect == "open":
            if ch != "{":
                self.bad, self.done = True, True
                return
            self.depth, self.expect = 1, "key"
            return
        if self.depth == 1:
            if self.expect == "key":
                if ch == '"':
                    self.in_str, self.value_start = True, i
                elif ch == "}":
                    self.depth, self.done = 0, True
                else:
                    self.bad = True
            elif self.expect == "colon":
                self.expect = "value" if ch == ":" else self.expect
            elif self.expect == "value":
                self.value_start = i
                if self.key == "arguments":
                    if ch != "{":
                        self.bad = True
                    self.args, self.args_first = (i, None), self.name is None
                if ch == '"':
                    self.in_str = True
                elif ch in "{[":
                    self.depth += 1
                self.expect = "comma" if ch not in '"{[' else "in_value"
            elif self.expect in ("comma", "in_value"):
                if ch == ",":
                    self.expect = "key"
                elif ch == "}":
                    self.depth, self.done = 0, True
            return
        if ch == '"':
            self.in_str = True
        elif ch in "{[":
            self.depth += 1
        elif ch in "}]":
            self.depth -= 1
            if self.depth == 1:
                self._value_end(i + 1)

    def _string_end(self, end: int) -> None:
        literal = self.text[self.value_start : end]
        if self.expect == "key":
            self.key, self.expect = json.loads(literal), "colon"
        elif self.expect == "in_value":
            if self.key == "name" and self.name is None:
                self.name = json.loads(literal)
            self.expect = "comma"

    def _value_end(self, end: int) -> None:
        if self.key == "arguments" and self.args is not None and self.args[1] is None:
            self.args = (self.args[0], end)
        self.expect = "comma"

    @property
    def args_so_far(self) -> str:
        """The arguments' text written so far (all of it once their object closed)."""
        if self.args is None:
            return ""
        start, end = self.args
        return self.text[start:end] if end is not None else self.text[start:]


@dataclass
class StreamedCall:
    index: int
    id: str
    name: str
    arguments: str = ""


@dataclass
class ToolCallStream:
    """Tool calls and content of one reply, parsed as its text arrives.

    Args:
        known: the function names a call may name.
        max_calls: the most calls to stream (``parallel_tool_calls=false``: 1); later ones are ignored.

    After ``finish``: ``content`` (what streamed as content) and ``calls`` (the valid calls; their arguments are
    what streamed).

    >>> p = ToolCallStream({"add"})
    >>> events = [e for d in ['Sure. <tool', '_call>{"name": "add", "argu', 'ments": {"a": 1}}</tool_call>'] for e in p.feed(d)]
    >>> events + p.finish()  # doctest: +ELLIPSIS
    [('content', 'Sure.'), ('call', 0, 'call_...', 'add'), ('arguments', 0, '{"a": 1}')]
    """

    known: set[str]
    max_calls: int | None = None
    content: str = ""
    calls: list[StreamedCall] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._pending = ""  # text not yet classified
        self._state = "content"  # content | call | after_call | between
        self._lead = True  # content: leading whitespace is dropped
        self._scanner: _CallScanner | None = None
        self._current: StreamedCall | None = None
        self._sent = 0  # characters of the current call's arguments streamed
        self._streamed: list[StreamedCall] = []
        self._raw = ""  # the whole reply so far

    def feed(self, delta: str) -> list[Event]:
        self._pending += delta
        self._raw += delta
        out: list[Event] = []
        while self._pending:
            before = (self._state, len(self._pending))
            self._step(out)
            if (self._state, len(self._pending)) == before:
                break  # waiting for more text
        return out

    def finish(self) -> list[Event]:
        """The end of the reply: held-back content is released (trailing whitespace dropped), calls settled."""
        out: list[Event] = []
        if self._state == "content" and self._pending.strip():
            text = self._pending.rstrip()
            text = text.lstrip() if self._lead else text
            out.append(("content", text))
            self.content += text
        self._pending = ""
        if self._scanner is not None:
            self._close_call(out)
        self.calls = [c for c in self._streamed if _is_object(c.arguments)]
        if not self._streamed and self._state != "content":  # tags but no call: all text
            rest = self._raw.strip()[len(self.content) :]
            if rest:
                out.append(("content", rest))
                self.content += rest
        return out

    # ------------------------------------------------------------------------------------------------------
    def _step(self, out: list[Event]) -> None:
        s = self._state
        if s == "content":
            i = self._pending.find(OPEN)
            if i >= 0:
                self._emit_content(self._pending[:i].rstrip(), out)
                self._pending, self._state = self._pending[i + len(OPEN) :], "call"
                self._start_call()
                return
            cut = len(self._pending) - _held(self._pending, OPEN)  # what cannot be the tag's start
            cut = len(self._pending[:cut].rstrip())  # nor whitespace that may stand before it
            text, self._pending = self._pending[:cut], self._pending[cut:]
            if text:
                self._emit_content(text, out)
        elif s in ("between", "after_call"):  # text after a call: skip to the next call's tag
            if s == "after_call" and self._pending.lstrip().startswith(CLOSE):
                self._pending = self._pending.lstrip()[len(CLOSE) :]
                self._state = "between"
                return
            i = self._pending.find(OPEN)
            if i >= 0:
                self._pending, self._state = self._pending[i + len(OPEN) :], "call"
                self._start_call()
            else:
                keep = _held(self._pending, OPEN if s == "between" else CLOSE)
                self._pending = self._pending[len(self._pending) - keep :] if keep else ""
        else:  # call
            sc = self._scanner
            n = 0
            for ch in self._pending:
                n += 1
                sc.feed(ch)
                if sc.done:
                    break
            self._pending = self._pending[n:]
            self._advance_call(out)
            if sc.done:
                self._close_call(out)
                self._state = "after_call"

    def _emit_content(self, text: str, out: list[Event]) -> None:
        if self._lead:
            text = text.lstrip()
        if text:
            self._lead = False
            out.append(("content", text))
            self.content += text

    def _start_call(self) -> None:
        self._scanner, self._current, self._sent = _CallScanner(), None, 0

    def _advance_call(self, out: list[Event]) -> None:
        sc = self._scanner
        if self._current is None:
            full = self.max_calls is not None and len(self._streamed) >= self.max_calls
            if sc.name is None or sc.args_first or sc.bad or sc.name not in self.known or full or sc.args is None:
                return
            self._current = StreamedCall(len(self._streamed), "call_" + uuid.uuid4().hex[:24], sc.name)
            self._streamed.append(self._current)
            out.append(("call", self._current.index, self._current.id, self._current.name))
        args = sc.args_so_far
        if len(args) > self._sent:
            piece = args[self._sent :]
            self._sent = len(args)
            self._current.arguments += piece
            out.append(("arguments", self._current.index, piece))

    def _close_call(self, out: list[Event]) -> None:
        """A call's object ended (or the reply did): one not streamed is added whole when it is valid."""
        sc = self._scanner
        self._scanner = None
        if self._current is not None:
            return
        full = self.max_calls is not None and len(self._streamed) >= self.max_calls
        if not sc.done or sc.bad or full:
            return
        try:
            obj = json.loads(sc.text)
        except (json.JSONDecodeError, RecursionError):
            return
        if isinstance(obj, dict) and obj.get("name") in self.known and isinstance(obj.get("arguments", {}), dict):
            args = (
                sc.args_so_far
                if sc.args is not None and sc.args[1] is not None
                else json.dumps(obj.get("arguments", {}))
            )
            call = StreamedCall(len(self._streamed), "call_" + uuid.uuid4().hex[:24], obj["name"], args)
            self._streamed.append(call)
            out.append(("call", call.index, call.id, call.name))
            out.append(("arguments", call.index, args))


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (json.JSONDecodeError, RecursionError):
        return False


# ---------------------------------------------------------------------------------------------- reasoning

REASONING_PARSERS = ("qwen3", "deepseek_r1")
THINK, UNTHINK = "<think>", "</think>"


@dataclass
class ReasoningStream:
    """Reasoning and content of one reply, split as its text arrives.

    Args:
        parser: ``qwen3`` (``<think>…</think>`` in the reply; a reply without it is all content) or
            ``deepseek_r1`` (the reply starts inside the reasoning, ``<think>`` optional; without ``</think>``
            it is all reasoning).

    >>> r = ReasoningStream("qwen3")
    >>> [e for d in ["<thi", "nk>2+2 is 4</th", "ink>\\n\\nIt is 4."] for e in r.feed(d)] + r.finish()
    [('reasoning', '2+2 is 4'), ('content', 'It is 4.')]
    """

    parser: str
    reasoning: str = ""
    content: str = ""

    def __post_init__(self) -> None:
        if self.parser not in REASONING_PARSERS:
            raise ValueError(f"unknown reasoning parser {self.parser!r}; known: {', '.join(REASONING_PARSERS)}")
        self._pending = ""
        self._state = "start"  # start | reasoning | content
        self._lead = True  # content right after </think>: leading whitespace dropped

    def feed(self, delta: str) -> list[Event]:
        self._pending += delta
        out: list[Event] = []
        while True:
            before = (self._state, self._pending)
            self._step(out, final=False)
            if (self._state, self._pending) == before:
                return out

    def finish(self) -> list[Event]:
        """The end of the reply: held-back text is released."""
        out: list[Event] = []
        while True:
            before = (self._state, self._pending)
            self._step(out, final=True)
            if (self._state, self._pending) == before:
                return out

    def _step(self, out: list[Event], final: bool) -> None:
        p = self._pending
        if self._state == "start":
            stripped = p.lstrip()
            if stripped.startswith(THINK):
                self._pending, self._state = stripped[len(THINK) :], "reasoning"
            elif THINK.startswith(stripped) and not final:
                return  # may still be the opening tag
            else:
                self._state = "reasoning" if self.parser == "deepseek_r1" else "content"
            return
        if self._state == "reasoning":
            i = p.find(UNTHINK)
            if i >= 0:
                self._put("reasoning", p[:i], out)
                self._pending, self._state = p[i + len(UNTHINK) :], "content"
                return
            keep = 0 if final else _held(p, UNTHINK)
            self._put("reasoning", p[: len(p) - keep], out)
            self._pending = p[len(p) - keep :]
            return
        text = p.lstrip() if self._lead else p
        if text:
            self._lead = False
        self._put("content", text, out)
        self._pending = ""

    def _put(self, kind: str, text: str, out: list[Event]) -> None:
        if text:
            out.append((kind, text))
            setattr(self, kind, getattr(self, kind) + text)


def split_reasoning(parser: str, text: str) -> tuple[str | None, str]:
    """(reasoning or None, content) of a whole reply: what ``ReasoningStream`` streams, joined."""
    r = ReasoningStream(parser)
    r.feed(text)
    r.finish()
    return r.reasoning or None, r.content


def tool_calls_of(text: str, known: set[str], max_calls: int | None = None) -> tuple[str, list[dict[str, Any]]]:
    """(content, OpenAI tool calls) of a whole reply: what ``ToolCallStream`` streams, joined."""
    p = ToolCallStream(known, max_calls)
    p.feed(text)
    p.finish()
    calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in p.calls]
    return p.content, calls
