"""Incremental tool-call and reasoning parsing: whatever the deltas, the stream reassembles to the whole reply's
parse, byte for byte (hypothesis draws the replies and their cut points)."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.tools.stream_parsers import ReasoningStream, ToolCallStream, split_reasoning, tool_calls_of

KNOWN = {"add", "search"}


def _streamed(parser, text: str, cuts: list[int]) -> list[tuple]:
    events, last = [], 0
    for cut in sorted({min(c, len(text)) for c in cuts}) + [len(text)]:
        events += parser.feed(text[last:cut])
        last = cut
    return events + parser.finish()


def _reassembled(events: list[tuple]) -> tuple[str, list[tuple[str, str]]]:
    content = "".join(e[1] for e in events if e[0] == "content")
    calls: dict[int, list[str]] = {}
    for e in events:
        if e[0] == "call":
            assert e[1] not in calls and e[1] == len(calls)  # a call's head comes once, indices in order
            calls[e[1]] = [e[3], ""]
        elif e[0] == "arguments":
            calls[e[1]][1] += e[2]
    return content, [tuple(c) for c in calls.values()]


ARGS = st.recursive(
    st.one_of(st.integers(), st.text(max_size=6), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=6,
)
CALL = st.tuples(st.sampled_from(["add", "search", "rm"]), st.dictionaries(st.text(max_size=5), ARGS, max_size=3))


@settings(max_examples=300, deadline=None)
@given(
    before=st.text(max_size=12),
    calls=st.lists(st.tuples(CALL, st.sampled_from(["", " ", "\n"]), st.booleans()), max_size=3),
    after=st.text(max_size=6),
    cuts=st.lists(st.integers(0, 400), max_size=12),
)
def test_tags_stream_reassembles_to_the_whole_parse(before, calls, after, cuts):
    text = before.replace("<tool_call>", "")
    for (name, args), pad, ascii_ in calls:
        body = json.dumps({"name": name, "arguments": args}, ensure_ascii=ascii_)
        text += f"<tool_call>{pad}{body}{pad}</tool_call>"
    text += after
    content, whole = tool_calls_of(text, KNOWN)
    streamed_content, streamed = _reassembled(_streamed(ToolCallStream(KNOWN), text, cuts))
    assert streamed_content == content
    assert streamed == [(c["function"]["name"], c["function"]["arguments"]) for c in whole]
    expected = [(n, a) for (n, a), _, _ in calls if n in KNOWN]
    assert [(n, json.loads(a)) for n, a in streamed] == expected  # every call to a known tool, arguments intact
    if not calls:
        assert content == text.strip()


def test_the_name_streams_first_then_the_arguments_as_written():
    p = ToolCallStream(KNOWN)
    text = 'Ok.\n<tool_call>\n{"name": "add", "arguments": {"a": "}</tool_call>\\"", "b":  [1, 2]}}\n</tool_call>'
    events = [e for ch in text for e in p.feed(ch)] + p.finish()
    kinds = [e[0] for e in events]
    head = kinds.index("call")
    assert set(kinds[:head]) == {"content"} and "".join(e[1] for e in events[:head]) == "Ok."
    assert set(kinds[head + 1 :]) == {"arguments"} and len(kinds) - head > 10  # a piece per character fed
    assert "".join(e[2] for e in events[head + 1 :]) == '{"a": "}</tool_call>\\"", "b":  [1, 2]}'  # as written


@pytest.mark.parametrize(
    "text, content, calls",
    [
        (
            '<tool_call>{"name": "rm", "arguments": {}}</tool_call>',
            '<tool_call>{"name": "rm", "arguments": {}}</tool_call>',
            [],
        ),
        ('<tool_call>{"arguments": {"q": 1}, "name": "search"}</tool_call>', "", [("search", '{"q": 1}')]),
        ('<tool_call>{"name": "add"}</tool_call>', "", [("add", "{}")]),
        (
            '<tool_call>{"name": "add", "arguments": "x"}</tool_call>',
            '<tool_call>{"name": "add", "arguments": "x"}</tool_call>',
            [],
        ),
        ("  hi  <tool_cal", "hi  <tool_cal", []),
    ],
)
def test_calls_that_cannot_stream(text, content, calls):
    got_content, got = tool_calls_of(text, KNOWN)
    assert got_content == content and [(c["function"]["name"], c["function"]["arguments"]) for c in got] == calls


def test_max_calls_keeps_the_first():
    text = '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call><tool_call>{"name": "add", "arguments": {"a": 2}}</tool_call>'
    assert [c["function"]["arguments"] for c in tool_calls_of(text, KNOWN, max_calls=1)[1]] == ['{"a": 1}']


@settings(max_examples=200, deadline=None)
@given(
    reasoning=st.text(max_size=15).filter(lambda t: "think>" not in t),
    content=st.text(max_size=15),
    opened=st.booleans(),
    cuts=st.lists(st.integers(0, 60), max_size=8),
    parser=st.sampled_from(["qwen3", "deepseek_r1"]),
)
def test_reasoning_stream_reassembles(reasoning, content, opened, cuts, parser):
    text = ("<think>" if opened else "") + reasoning + "</think>" + content
    events = _streamed(ReasoningStream(parser), text, cuts)
    r = "".join(e[1] for e in events if e[0] == "reasoning")
    c = "".join(e[1] for e in events if e[0] == "content")
    assert (r or None, c) == split_reasoning(parser, text)
    if opened or parser == "deepseek_r1":
        assert r == reasoning
        assert c == content.lstrip()


def test_reasoning_parsers_differ_on_a_reply_without_the_closing_tag():
    assert split_reasoning("qwen3", "just an answer") == (None, "just an answer")
    assert split_reasoning("deepseek_r1", "still thinking") == ("still thinking", "")
    assert split_reasoning("qwen3", "<think>cut off") == ("cut off", "")
    with pytest.raises(ValueError, match="unknown reasoning parser"):
        ReasoningStream("o1")
