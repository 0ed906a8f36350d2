"""Tool-call parsers: round trips and robustness (they never raise on model output)."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.tools.parsers import (
    ToolCall,
    format_hermes_call,
    format_tag_call,
    format_tag_result,
    parse_answer,
    parse_hermes_calls,
    parse_openai_tool_calls,
    parse_tag_call,
    tag_stop_strings,
    to_openai,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(), c, max_size=4),
    max_leaves=12,
)


names = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)


@settings(max_examples=300)
@given(st.text())
def test_parsers_never_raise_on_text(text):
    parse_tag_call(text)
    parse_answer(text)
    content, calls = parse_hermes_calls(text, known={"python"})
    assert isinstance(content, str) and all(isinstance(c, ToolCall) for c in calls)


@settings(max_examples=200)
@given(json_values)
def test_openai_parser_never_raises(obj):
    for c in (
        parse_openai_tool_calls(obj)
        + parse_openai_tool_calls([obj])
        + parse_openai_tool_calls(
            [{"function": {"name": "f", "arguments": obj if isinstance(obj, str) else json.dumps(obj)}}]
        )
    ):
        assert isinstance(c, ToolCall)


code_bodies = st.text(min_size=1).filter(
    lambda s: s.strip() and "</python>" not in s and s == s.strip("\n") and "```" not in s
)


@given(st.text().filter(lambda s: "<python>" not in s and "</" not in s), code_bodies)
def test_tag_round_trip(prefix, code):
    call = ToolCall("python", {"code": code})
    got = parse_tag_call(prefix + format_tag_call(call))
    assert got is not None and got.error is None and got.arguments == {"code": code}


@given(names, st.dictionaries(st.text(), json_values, max_size=5), st.text().filter(lambda s: "<tool_call>" not in s))
def test_hermes_and_openai_round_trip(name, args, content):
    call = ToolCall(name, args)
    text, calls = parse_hermes_calls(content + format_hermes_call(call) + format_hermes_call(call))
    assert text == content.strip() and len(calls) == 2
    assert all(c.error is None and c.name == name and c.arguments == args for c in calls)
    (back,) = parse_openai_tool_calls([to_openai(call)])
    assert back.name == name and back.arguments == args and back.id == call.id


def test_malformed_calls_become_errors():
    assert "not valid JSON" in parse_hermes_calls('<tool_call>{"name": "python", "arg')[1][0].error
    assert (
        "unknown tool 'shell'"
        in parse_hermes_calls('<tool_call>{"name": "shell", "arguments": {}}</tool_call>', known={"python"})[1][0].error
    )
    assert (
        "must be a JSON object"
        in parse_hermes_calls('<tool_call>{"name": "f", "arguments": [1]}</tool_call>')[1][0].error
    )
    bad = parse_openai_tool_calls([{"id": "c1", "function": {"name": "python", "arguments": "{oops"}}])[0]
    assert bad.id == "c1" and "not valid JSON" in bad.error
    assert "without an opening" in parse_tag_call("print(1)</python>").error


def test_fenced_code_and_results():
    call = parse_tag_call("<python>\n```python\nprint(2)\n```\n</python>")
    assert call.arguments == {"code": "print(2)"}
    assert parse_tag_call("<search> capital of Kaldoria </search>").arguments == {"query": "capital of Kaldoria"}
    assert format_tag_result("4\n") == "\n<result>\n4\n</result>\n"
    assert tag_stop_strings() == ["</python>", "</search>", "</answer>"]
    assert parse_answer("<answer>unterminated 42") == "unterminated 42"
