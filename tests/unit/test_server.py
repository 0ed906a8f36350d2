"""The OpenAI-compatible server on loopback, driven by the official openai client (tiny model, scripted agent)."""

import json
import threading
import urllib.error
import urllib.request

import openai
import pytest

from agentkit.engines import SamplingParams
from agentkit.server import create_app
from agentkit.testing.servers import serve_in_thread
from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig


@pytest.fixture(scope="module")
def server(tiny_engine):
    tool = PythonTool(SandboxConfig(pool_size=2))
    app = create_app(tiny_engine, "tiny", api_key="sk-test", tools={"python": tool})
    with serve_in_thread(app) as url:
        yield url, app
    tool.close()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="sk-test", max_retries=0)


def test_models_and_auth(server, client):
    assert [m.id for m in client.models.list().data] == ["tiny", "agentkit/tir"]
    bad = openai.OpenAI(base_url=server[0] + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_chat_matches_engine(client, tiny_engine):
    msgs = [{"role": "user", "content": "hi"}]
    r = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=8, seed=3, temperature=1.0, n=2,
                                       logprobs=True, top_logprobs=3)
    local = tiny_engine.generate([msgs], SamplingParams(n=2, max_tokens=8, seed=3))[0]
    assert [c.message.content for c in r.choices] == [c.text for c in local]
    assert [t.logprob for t in r.choices[0].logprobs.content] == pytest.approx(local[0].logprobs, abs=1e-5)
    assert len(r.choices[0].logprobs.content[0].top_logprobs) == 3
    assert r.usage.completion_tokens == sum(c.completion_tokens for c in local)
    assert r.usage.prompt_tokens == local[0].prompt_tokens


def test_streaming_chunks(client):
    kw = dict(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=6, seed=1)
    full = client.chat.completions.create(**kw).choices[0].message.content
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == full
    assert chunks[-2].choices[0].finish_reason in ("stop", "length")
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def test_tool_choice_named_returns_tool_calls(client):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
                                               "parameters": {"type": "object", "properties": {}}}}]
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "weather?"}],
                                       tools=tools, tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                       max_tokens=40, seed=0, stop=["</tool_call>"])
    choice = r.choices[0]
    # the random model rarely closes the JSON; when it does, the call is returned as tool_calls
    if choice.finish_reason == "tool_calls":
        assert choice.message.tool_calls[0].function.name == "get_weather"
        json.loads(choice.message.tool_calls[0].function.arguments)
    else:
        assert choice.message.content.startswith('<tool_call>{"name": "get_weather"')


def test_completions_and_echo_scoring(client, tiny_engine):
    r = client.completions.create(model="tiny", prompt="abc", max_tokens=5, seed=2, logprobs=2)
    assert len(r.choices[0].logprobs.token_logprobs) == len(r.choices[0].logprobs.tokens) <= 5
    e = client.completions.create(model="tiny", prompt="the context and more", max_tokens=0, echo=True, logprobs=1)
    ids = tiny_engine.encode("the context and more")
    want = tiny_engine.score([ids[:1]], [ids[1:]])[0].logprobs
    assert e.choices[0].logprobs.token_logprobs[1:] == pytest.approx(want, abs=1e-4)


def _raw(url, body: bytes, key="sk-test"):
    req = urllib.request.Request(url + "/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_errors_in_openai_shape(server, client, tiny_engine):
    url = server[0]
    code, body = _raw(url, b"{oops")
    assert code == 400 and body["error"]["type"] == "invalid_request_error"
    code, body = _raw(url, json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "x"}],
                                       "temperature": "hot"}).encode())
    assert code == 400 and body["error"]["param"] == "temperature"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="context length"):
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x" * 3000}])
    # unknown fields (client extra_body) are accepted
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}], max_tokens=2,
                                       extra_body={"top_k": 5, "something_new": 1})
    assert r.choices[0].message.content is not None


def test_concurrent_requests_share_engine_calls(server, client):
    batcher = server[1].state.batcher
    before = batcher.calls
    results = []

    def ask(i):
        r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": f"q{i}"}],
                                           max_tokens=4, seed=7)
        results.append(r.choices[0].message.content)

    ts = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(results) == 8 and batcher.calls - before < 8  # some requests were batched together


def test_agent_model_runs_tools_server_side(client):
    r = client.chat.completions.create(model="agentkit/tir", messages=[{"role": "user", "content": "What is 2+2?"}],
                                       max_tokens=16, seed=0)
    extra = r.model_extra["agentkit"][0]
    assert extra["finish"] in {"answer", "no_call", "max_turns", "max_tool_calls", "max_tokens"}
    assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0
    chunks = list(client.chat.completions.create(model="agentkit/tir", stream=True, max_tokens=8, seed=0,
                                                 messages=[{"role": "user", "content": "What is 2+2?"}]))
    assert chunks[-1].choices[0].finish_reason == "stop"
    progress = [i for i, c in enumerate(chunks) if (c.model_extra or {}).get("agentkit")]
    first_content = next(i for i, c in enumerate(chunks) if c.choices)
    assert progress and max(progress) < first_content  # progress arrives during the loop, before the answer
    assert chunks[progress[0]].model_extra["agentkit"]["type"] == "turn"


def test_live_stream_with_n_samples(client):
    kw = dict(model="tiny", messages=[{"role": "user", "content": "two"}], max_tokens=10, seed=4, n=2)
    full = [c.message.content for c in client.chat.completions.create(**kw).choices]
    parts = {0: [], 1: []}
    finishes = {}
    for chunk in client.chat.completions.create(stream=True, **kw):
        for ch in chunk.choices:
            if ch.delta.content:
                parts[ch.index].append(ch.delta.content)
            if ch.finish_reason:
                finishes[ch.index] = ch.finish_reason
    assert ["".join(parts[0]), "".join(parts[1])] == full and set(finishes) == {0, 1}
    assert len(parts[0]) > 1  # token by token, not one block


def test_agent_conversation_keeps_history_and_client_system_text():
    from agentkit.server.chat import RequestError, agent_conversation
    from agentkit.server.protocol import ChatCompletionRequest

    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"},
            {"role": "assistant", "content": "<answer>2</answer>"}, {"role": "user", "content": "17*23?"}]
    req = ChatCompletionRequest(model="agentkit/tir", messages=msgs)
    question, history, system = agent_conversation(req.messages)
    assert question == "17*23?" and system == "Be brief."
    assert history == [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "<answer>2</answer>"}]
    with pytest.raises(RequestError, match="needs a user message"):
        agent_conversation(ChatCompletionRequest(model="agentkit/tir", messages=msgs[:1]).messages)
