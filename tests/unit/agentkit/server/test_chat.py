"""agentkit.server.chat, without HTTP: requests become the engine's messages, sampling and constraint; completions
become OpenAI choices (text or tool calls) and stream events that add up to the same message."""

import json

import pytest

from agentkit.engines.base import Completion
from agentkit.server.chat import RequestError, agent_conversation, chat_response, to_messages
from agentkit.server.chat import choice_message as _choice_message
from agentkit.server.protocol import ChatCompletionRequest
from agentkit.server.streaming import stream_chunks

ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
MUL = {"type": "function", "function": {"name": "mul", "parameters": {"type": "object"}}}


def _req(**kw):
    return ChatCompletionRequest(model="m", **{"messages": [{"role": "user", "content": "2+3?"}], **kw})


def choice_message(*args, **kw):  # as the client receives it
    return _choice_message(*args, **kw).model_dump(exclude_unset=True)


def _done(text, reason="stop"):
    return Completion(
        text=text, token_ids=list(range(len(text))), logprobs=[0.0] * len(text), finish_reason=reason, prompt_tokens=5
    )


def test_sampling_takes_openai_and_vllm_fields_with_openai_defaults():
    p = _req().to_sampling_params()
    assert (p.n, p.temperature, p.top_p, p.top_k, p.max_tokens, p.stop, p.top_logprobs) == (1, 1.0, 1.0, 0, 256, [], 0)
    p = _req(
        temperature=0, max_tokens=9, max_completion_tokens=7, stop="\n", top_k=-1, logprobs=True, top_logprobs=3, seed=4
    ).to_sampling_params()
    assert (p.temperature, p.max_tokens, p.stop, p.top_k, p.top_logprobs, p.seed) == (0, 7, ["\n"], 0, 3, 4)


def test_history_renders_tool_calls_and_results_in_hermes_text():
    msgs = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "2+3?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
    ]
    out, prefill, constraint = to_messages(_req(messages=msgs, tools=[ADD]))
    assert [m["role"] for m in out] == ["system", "system", "user", "assistant", "user"]
    assert '"name": "add"' in out[1]["content"]  # the tools prompt comes after the client's system text
    assert out[3]["content"] == '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    assert out[4]["content"] == "<tool_response>\n5\n</tool_response>"
    assert (prefill, constraint) == ("", None)
    out, _, _ = to_messages(_req(messages=msgs, tools=[ADD], tool_choice="none"))
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]  # no tools prompt


def test_a_forced_call_is_prefilled_and_constrained_to_the_functions_schema():
    _, prefill, c = to_messages(_req(tools=[ADD, MUL], tool_choice={"type": "function", "function": {"name": "add"}}))
    assert prefill == "<tool_call>"
    assert json.loads(c.json)["properties"]["name"] == {"const": "add"}
    assert json.loads(c.json)["properties"]["arguments"]["required"] == ["a", "b"]
    _, prefill, c = to_messages(_req(tools=[ADD, MUL], tool_choice="required"))  # one or more hermes calls
    assert prefill == "<tool_call>" and c.grammar.startswith('start: body ("</tool_call>" ("\\n<tool_call>" body')
    body = json.loads(c.grammar.split("%json ", 1)[1])
    assert [case["properties"]["name"]["const"] for case in body["anyOf"]] == ["add", "mul"]
    _, _, c = to_messages(_req(tools=[ADD, MUL], tool_choice="required", parallel_tool_calls=False))
    assert c.grammar.startswith('start: body ("</tool_call>")?\n')
    c.check()  # llguidance compiles it


@pytest.mark.parametrize(
    "body, param, message",
    [
        ({"tool_choice": "required"}, "tool_choice", "needs tools"),
        ({"tools": [ADD], "tool_choice": {"type": "function", "function": {"name": "sub"}}}, "tool_choice", "'sub'"),
        ({"tools": [ADD], "tool_choice": "always"}, "tool_choice", "must be"),
        ({"response_format": {"type": "xml"}}, "response_format.type", "got 'xml'"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {}}},
            "response_format.json_schema.schema",
            "JSON schema object",
        ),
        (
            {"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a+"}},
            "structured_outputs",
            "not both",
        ),
    ],
)
def test_bad_tool_choice_and_formats_are_400s_naming_the_field(body, param, message):
    with pytest.raises(RequestError) as e:
        to_messages(_req(**body))
    assert e.value.status == 400 and e.value.param == param and message in str(e.value)


def test_choices_turn_hermes_calls_into_tool_calls():
    req = _req(tools=[ADD])
    text = 'Let me add. <tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    ch = choice_message(req, "", _done(text), engine=None, index=0)
    assert ch["finish_reason"] == "tool_calls" and ch["message"]["content"] == "Let me add."
    (call,) = ch["message"]["tool_calls"]
    assert call["function"]["name"] == "add" and json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    unknown = '<tool_call>{"name": "rm", "arguments": {}}</tool_call>'  # not a tool of this request: plain text
    ch = choice_message(req, "", _done(unknown), engine=None, index=0)
    assert ch == {
        "index": 0,
        "message": {"role": "assistant", "content": unknown},
        "finish_reason": "stop",
        "logprobs": None,
    }
    two = text + '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 1}}</tool_call>'
    assert len(choice_message(req, "", _done(two), None, 0)["message"]["tool_calls"]) == 2
    assert (
        len(
            choice_message(_req(tools=[ADD], parallel_tool_calls=False), "", _done(two), None, 0)["message"][
                "tool_calls"
            ]
        )
        == 1
    )
    forced = choice_message(
        req, "<tool_call>", _done('{"name": "add", "arguments": {"a": "</tool_call>", "b": 1}}'), None, 0
    )  # a forced call's completion is exactly its JSON, tags inside strings included
    assert json.loads(forced["message"]["tool_calls"][0]["function"]["arguments"])["a"] == "</tool_call>"


def test_stream_events_add_up_to_the_response():
    req = _req(tools=[ADD])
    outs = [
        _done("a plain reply that is longer than one piece"),
        _done('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'),
    ]
    model = chat_response(req, "", outs, prompt_tokens=5, engine=None, model="m")
    resp = model.model_dump(exclude_unset=True)
    assert resp["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": sum(len(o.text) for o in outs),
        "total_tokens": 5 + sum(len(o.text) for o in outs),
    }
    events = list(stream_chunks(model, include_usage=True))
    assert events[-1] == "data: [DONE]\n\n"
    chunks = [json.loads(e[len("data: ") :]) for e in events[:-1]]
    assert chunks[-1]["usage"] == resp["usage"] and chunks[-1]["choices"] == []
    text, args, finish = {0: "", 1: ""}, {}, {}
    for ch in chunks[:-1]:
        (c,) = ch["choices"]
        d = c["delta"]
        text[c["index"]] += d.get("content") or ""
        for call in d.get("tool_calls") or []:
            args[c["index"]] = args.get(c["index"], "") + call["function"]["arguments"]
        finish[c["index"]] = c["finish_reason"] or finish.get(c["index"])
    assert text[0] == outs[0].text and finish == {0: "stop", 1: "tool_calls"}
    assert args[1] == resp["choices"][1]["message"]["tool_calls"][0]["function"]["arguments"]


def test_agent_conversation_keeps_history_and_client_system_text():
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "1+1?"},
        {"role": "assistant", "content": "<answer>2</answer>"},
        {"role": "user", "content": "17*23?"},
    ]
    req = ChatCompletionRequest(model="agentkit/tir", messages=msgs)
    question, history, system = agent_conversation(req.messages)
    assert question == "17*23?" and system == "Be brief."
    assert history == [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "<answer>2</answer>"}]
    with pytest.raises(RequestError, match="needs a user message"):
        agent_conversation(ChatCompletionRequest(model="agentkit/tir", messages=msgs[:1]).messages)
