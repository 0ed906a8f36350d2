"""The OpenAI-compatible server on loopback, driven by the official openai client (tiny model, scripted agent).

The server tests run over HFEngine, and over VLLMEngine with ``-m vllm`` (``make test-vllm``): the same tests,
each comparing the server with its own engine."""

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


@pytest.fixture(scope="module", params=["hf", pytest.param("vllm", marks=pytest.mark.vllm)])
def engine(request, tiny_engine):
    if request.param == "hf":
        yield tiny_engine
        return
    pytest.importorskip("vllm")
    from agentkit.engines.vllm import VLLMEngine

    eng = VLLMEngine("tiny-random", dtype="float32", max_model_len=2048)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def server(engine):
    tool = PythonTool(SandboxConfig(pool_size=2))
    app = create_app(engine, "tiny", api_key="sk-test", tools={"python": tool})
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


def test_chat_matches_engine(client, engine):
    msgs = [{"role": "user", "content": "hi"}]
    r = client.chat.completions.create(
        model="tiny", messages=msgs, max_tokens=8, seed=3, temperature=1.0, n=2, logprobs=True, top_logprobs=3
    )
    local = engine.generate([msgs], SamplingParams(n=2, max_tokens=8, seed=3))[0]
    assert [c.message.content for c in r.choices] == [c.text for c in local]
    assert [t.logprob for t in r.choices[0].logprobs.content] == pytest.approx(local[0].logprobs, abs=1e-5)
    assert len(r.choices[0].logprobs.content[0].top_logprobs) == 3
    assert r.usage.completion_tokens == sum(c.completion_tokens for c in local)
    assert r.usage.prompt_tokens == local[0].prompt_tokens


def test_streaming_chunks(client):
    kw = dict(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=6, seed=1)
    whole = client.chat.completions.create(**kw)
    full = whole.choices[0].message.content
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == full
    assert chunks[-2].choices[0].finish_reason == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "weather",
        "parameters": {
            "type": "object",
            "properties": {"unit": {"enum": ["C", "F"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["unit", "days"],
        },
    },
}


ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "minimum": 0, "maximum": 9},
                "b": {"type": "integer", "minimum": 0, "maximum": 9},
            },
            "required": ["a", "b"],
        },
    },
}


@pytest.mark.parametrize("choice", [{"type": "function", "function": {"name": "get_weather"}}, "required"])
def test_forced_tool_calls_follow_the_function_schema(client, choice):
    """A named or required tool_choice always returns a call whose arguments validate against its schema, even
    from a random model."""
    import jsonschema

    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, ADD)}
    r = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "weather?"}],
        n=4,
        tools=[WEATHER, ADD],
        tool_choice=choice,
        max_tokens=64,
        seed=0,
    )
    for ch in r.choices:
        assert ch.finish_reason == "tool_calls" and ch.message.content is None
        (call,) = ch.message.tool_calls
        assert call.function.name in (["get_weather"] if isinstance(choice, dict) else schemas)
        jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])
    none = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER],
        tool_choice="none",
        max_tokens=8,
        seed=0,
    )
    assert none.choices[0].message.tool_calls is None


def _reassemble(chunks) -> dict[int, dict]:
    """Per choice: the streamed content and tool calls (a call's head, its id and name, comes once and first)."""
    out: dict[int, dict] = {}
    for c in chunks:
        for ch in c.choices:
            got = out.setdefault(ch.index, {"content": "", "calls": {}, "finish": None, "pieces": 0})
            got["content"] += ch.delta.content or ""
            for tc in ch.delta.tool_calls or []:
                if tc.id is not None:
                    assert tc.index not in got["calls"] and tc.function.name and tc.function.arguments == ""
                    got["calls"][tc.index] = [tc.id, tc.function.name, ""]
                else:
                    assert tc.function.name is None
                    got["calls"][tc.index][2] += tc.function.arguments
                    got["pieces"] += 1
            got["finish"] = ch.finish_reason or got["finish"]
    return out


@pytest.mark.parametrize("choice", [{"type": "function", "function": {"name": "add"}}, "required", "auto"])
def test_tool_calls_stream_incrementally_and_reassemble_to_the_whole_reply(client, choice, engine, tiny_engine):
    """Streamed tool calls as vLLM sends them: each call's id and name first, then its arguments in pieces as
    they are generated, reassembling byte for byte to the non-streamed reply (same seeds)."""
    kw = dict(model="tiny", messages=[{"role": "user", "content": "add"}], tools=[WEATHER, ADD], tool_choice=choice)
    kw.update(n=3, seed=4, max_tokens=64)
    whole = client.chat.completions.create(**kw)
    streamed = _reassemble(client.chat.completions.create(stream=True, **kw))
    for ch in whole.choices:
        got = streamed[ch.index]
        calls = [(c.function.name, c.function.arguments) for c in ch.message.tool_calls or []]
        assert [tuple(v[1:]) for v in got["calls"].values()] == calls
        assert got["finish"] == ch.finish_reason and got["content"] == (ch.message.content or "")
        if choice != "auto":  # the arguments came in several pieces, not whole at the end (vLLM's offline
            assert calls and got["pieces"] > (1 if engine is tiny_engine else 0)  # engine sends text when done


def test_required_may_return_several_calls_and_parallel_false_one(client):
    kw = dict(model="tiny", messages=[{"role": "user", "content": "add"}], tools=[ADD], tool_choice="required")
    many = client.chat.completions.create(n=8, seed=0, max_tokens=200, **kw)
    counts = [len(c.message.tool_calls) for c in many.choices]
    assert min(counts) >= 1 and max(counts) > 1  # a random model makes several calls in some samples
    one = client.chat.completions.create(n=8, seed=0, max_tokens=200, parallel_tool_calls=False, **kw)
    assert [len(c.message.tool_calls) for c in one.choices] == [1] * 8


def test_reasoning_content_with_a_reasoning_parser():
    """``reasoning_parser``: think-tag reasoning is ``reasoning_content``, whole and streamed; the reply after it is
    content, and tool calls are parsed from the content alone."""
    from agentkit.testing.scripted import ScriptedEngine

    script = {
        "sum": ["<think>2 and 3 make 5</think>\n\nThe sum is 5."],
        "call": [
            '<think>I should call add</think><tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
        ],
    }
    app = create_app(ScriptedEngine(script), "scripted", api_key="sk-test", reasoning_parser="qwen3")
    with serve_in_thread(app) as url:
        c = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        r = c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "sum"}])
        msg = r.choices[0].message
        assert (msg.reasoning_content, msg.content) == ("2 and 3 make 5", "The sum is 5.")
        chunks = list(
            c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "sum"}], stream=True)
        )
        deltas = [ch.choices[0].delta for ch in chunks if ch.choices]
        assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == "2 and 3 make 5"
        assert "".join(d.content or "" for d in deltas) == "The sum is 5."
        t = c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "call"}], tools=[ADD])
        m = t.choices[0].message
        assert m.reasoning_content == "I should call add" and m.tool_calls[0].function.arguments == '{"a": 2, "b": 3}'
    with pytest.raises(ValueError, match="unknown reasoning parser"):
        create_app(ScriptedEngine(script), "scripted", reasoning_parser="o1")


def test_response_format_and_structured_outputs(client):
    import jsonschema

    from agentkit.testing.conformance import SCHEMA

    msgs = [{"role": "user", "content": "describe"}]
    fmt = {"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA, "strict": True}}
    r = client.chat.completions.create(model="tiny", messages=msgs, response_format=fmt, n=3, seed=1, max_tokens=64)
    for ch in r.choices:
        jsonschema.validate(json.loads(ch.message.content), SCHEMA)
    streamed = client.chat.completions.create(
        model="tiny", messages=msgs, response_format=fmt, seed=1, max_tokens=64, stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == r.choices[0].message.content
    c = client.completions.create(
        model="tiny",
        prompt="code:",
        max_tokens=16,
        seed=2,
        n=3,
        extra_body={"structured_outputs": {"regex": "[A-Z]{2}[0-9]{3}"}},
    )
    assert all(len(ch.text) == 5 and ch.text[:2].isupper() and ch.text[2:].isdigit() for ch in c.choices)
    pick = client.chat.completions.create(
        model="tiny",
        messages=msgs,
        max_tokens=8,
        seed=3,
        extra_body={"structured_outputs": {"choice": ["red", "green"]}},
    )
    assert pick.choices[0].message.content in ("red", "green")


def test_completions_and_echo_scoring(client, engine):
    r = client.completions.create(model="tiny", prompt="abc", max_tokens=5, seed=2, logprobs=2)
    assert len(r.choices[0].logprobs.token_logprobs) == len(r.choices[0].logprobs.tokens) <= 5
    e = client.completions.create(model="tiny", prompt="the context and more", max_tokens=0, echo=True, logprobs=1)
    ids = engine.encode("the context and more")
    want = engine.score([ids[:1]], [ids[1:]])[0].logprobs
    assert e.choices[0].logprobs.token_logprobs[1:] == pytest.approx(want, abs=1e-4)
    assert e.choices[0].logprobs.token_logprobs[0] is None and e.usage.completion_tokens == 0
    # echo with generation: the prompt's text and logprobs, then the completion's (as vLLM)
    g = client.completions.create(
        model="tiny",
        prompt="the context and more",
        max_tokens=4,
        echo=True,
        logprobs=1,
        seed=2,
        extra_body={"ignore_eos": True},
    )
    plain = client.completions.create(
        model="tiny", prompt="the context and more", max_tokens=4, logprobs=1, seed=2, extra_body={"ignore_eos": True}
    )
    lp = g.choices[0].logprobs
    assert g.choices[0].text == engine.decode(ids, skip_special_tokens=False) + plain.choices[0].text
    assert lp.token_logprobs[0] is None and len(lp.token_logprobs) == len(ids) + 4
    assert lp.token_logprobs[1 : len(ids)] == pytest.approx(want, abs=1e-4)
    assert lp.token_logprobs[len(ids) :] == pytest.approx(plain.choices[0].logprobs.token_logprobs, abs=1e-4)


def test_tokenizer_as_lm_eval_reads_it(server, engine):
    """vLLM's ``GET /tokenizer_info`` and ``/tokenize`` / ``/detokenize`` without a ``model`` (what lm-eval's
    remote tokenizer sends) give the engine's own tokenizer."""
    got, info = _call(server[0], "GET", "/tokenizer_info")
    tok = engine.tokenizer
    assert got == 200 and info["eos_token"] == tok.eos_token and info["chat_template"] == tok.chat_template
    assert info["model_max_length"] == engine.max_model_len and info["tokenizer_class"] == type(tok).__name__
    body = json.dumps({"prompt": "the context", "add_special_tokens": False}).encode()
    got, ids = _call(server[0], "POST", "/tokenize", body)
    assert got == 200 and ids["tokens"] == engine.tokenize("the context")
    got, text = _call(server[0], "POST", "/detokenize", json.dumps({"tokens": ids["tokens"]}).encode())
    assert got == 200 and text["prompt"] == "the context"
    got, err = _call(server[0], "POST", "/tokenize", json.dumps({"model": "nope", "prompt": "x"}).encode())
    assert got == 404 and err["error"]["code"] == "model_not_found"  # a model named must still exist


def test_completions_as_lm_eval_sends_them(client, engine):
    """lm-evaluation-harness's ``local-completions`` scores with ``prompt`` as a list of token-id lists, ``echo``,
    ``max_tokens=1`` and ``logprobs=1``, and reads every echoed position's ``top_logprobs`` (vLLM's form: the k
    most likely tokens plus the prompt's own; ``null`` only for the first)."""
    a, b = engine.encode("the context and more"), engine.encode("a second prompt")
    r = client.completions.create(model="tiny", prompt=[a, b], max_tokens=1, echo=True, logprobs=1, temperature=0)
    assert len(r.choices) == 2
    for ids, ch in zip((a, b), sorted(r.choices, key=lambda c: c.index)):
        lp = ch.logprobs
        scored = engine.score([ids[:1]], [ids[1:]], top_logprobs=1)[0]
        assert lp.token_logprobs[1 : len(ids)] == pytest.approx(scored.logprobs, abs=1e-4)
        assert lp.top_logprobs[0] is None and all(isinstance(t, dict) for t in lp.top_logprobs[1:])
        for t, tok, best, own in zip(
            lp.top_logprobs[1 : len(ids)], lp.tokens[1:], scored.top_logprobs, scored.logprobs
        ):
            assert t[tok] == pytest.approx(own, abs=1e-4)  # the prompt's own token is always there
            assert max(t.values()) == pytest.approx(max(best.values()), abs=1e-4)  # and the most likely one
            assert len(t) in (1, 2)
        # lm-eval's greedy check: the prompt token is the most likely exactly where the engine's argmax is it
        greedy = [max(t, key=t.get) == tok for t, tok in zip(lp.top_logprobs[1 : len(ids)], lp.tokens[1:])]
        assert greedy == [next(iter(t)) == i for t, i in zip(scored.top_logprobs, ids[1:])]
    # the same prompts as texts give the same echoed figures
    t = client.completions.create(
        model="tiny", prompt="the context and more", max_tokens=0, echo=True, logprobs=1, temperature=0
    )
    assert t.choices[0].logprobs.token_logprobs[1:] == pytest.approx(
        sorted(r.choices, key=lambda c: c.index)[0].logprobs.token_logprobs[1 : len(a)], abs=1e-4
    )
    # malformed token-id lists are a 400 in OpenAI's shape, naming the prompt
    for bad in ([[1, 2], "text"], [[]], [[-1, 2]]):
        with pytest.raises(openai.BadRequestError) as err:
            client.completions.create(model="tiny", prompt=bad, max_tokens=1)
        assert err.value.status_code == 400


def _call(url, method: str, path: str, body: bytes | None = None, key="sk-test"):
    req = urllib.request.Request(
        url + path,
        data=body,
        method=method,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


CHAT_PATH = "/v1/chat/completions"


MSG = [{"role": "user", "content": "x"}]


BAD_REQUESTS = [  # (method, path, body, status, param, code, words in the message)
    ("POST", CHAT_PATH, b"{oops", 400, None, None, "not valid JSON"),
    ("POST", CHAT_PATH, b"[1, 2]", 400, None, None, "must be a JSON object"),
    ("POST", CHAT_PATH, {"model": "tiny", "messages": MSG, "temperature": "hot"}, 400, "temperature", None, "number"),
    ("POST", CHAT_PATH, {"model": "tiny", "messages": MSG, "stop": 3}, 400, "stop", None, "stop:"),
    (
        "POST",
        CHAT_PATH,
        {"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]},
        400,
        "messages[0].role",
        None,
        "messages[0].role:",
    ),
    (
        "POST",
        CHAT_PATH,
        {"model": "tiny", "messages": [{"role": "user", "content": [1]}]},
        400,
        "messages[0].content",
        None,
        "messages[0].content",
    ),
    ("POST", CHAT_PATH, {"model": "tiny"}, 400, "messages", None, "messages: Field required"),
    (
        "POST",
        CHAT_PATH,
        {"model": "tiny", "messages": MSG, "tools": [{"type": "function", "function": {}}]},
        400,
        "tools[0].function.name",
        None,
        "tools[0].function.name",
    ),
    ("POST", CHAT_PATH, {"model": "gpt-9", "messages": MSG}, 404, "model", "model_not_found", "does not exist"),
    (
        "POST",
        CHAT_PATH,
        {"model": "tiny", "messages": [{"role": "user", "content": "x" * 3000}]},
        400,
        "messages",
        "context_length_exceeded",
        "context length",
    ),
    ("POST", "/v1/completions", {"model": "tiny", "prompt": "x", "logprobs": 99}, 400, "logprobs", None, "logprobs"),
    (
        "POST",
        CHAT_PATH,
        {"model": "tiny", "messages": MSG, "response_format": {"type": "yaml"}},
        400,
        "response_format.type",
        None,
        "json_schema",
    ),
    (
        "POST",
        CHAT_PATH,
        {"model": "tiny", "messages": MSG, "response_format": {"type": "json_schema"}},
        400,
        "response_format.json_schema.schema",
        None,
        "JSON schema object",
    ),
    (
        "POST",
        CHAT_PATH,
        {
            "model": "tiny",
            "messages": MSG,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "objec"}}},
        },
        400,
        "response_format.json_schema.schema",
        None,
        "objec",
    ),
    (
        "POST",
        CHAT_PATH,
        {"model": "tiny", "messages": MSG, "structured_outputs": {"regex": "[a-"}},
        400,
        "structured_outputs",
        None,
        "cannot be enforced",
    ),
    (
        "POST",
        CHAT_PATH,
        {"model": "tiny", "messages": MSG, "structured_outputs": {"regex": "a", "choice": ["b"]}},
        400,
        "structured_outputs",
        None,
        "exactly one of",
    ),
    (
        "POST",
        CHAT_PATH,
        {"model": "tiny", "messages": MSG, "tool_choice": "required"},
        400,
        "tool_choice",
        None,
        "needs tools",
    ),
    (
        "POST",
        CHAT_PATH,
        {"model": "tiny", "messages": MSG, "tools": [WEATHER], "tool_choice": "always"},
        400,
        "tool_choice",
        None,
        "must be",
    ),
    (
        "POST",
        CHAT_PATH,
        {
            "model": "tiny",
            "messages": MSG,
            "tools": [WEATHER],
            "tool_choice": {"type": "function", "function": {"name": "nope"}},
        },
        400,
        "tool_choice",
        None,
        "unknown function",
    ),
    (
        "POST",
        CHAT_PATH,
        {"model": "agentkit/tir", "messages": MSG, "response_format": {"type": "json_object"}},
        400,
        "response_format",
        None,
        "does not take",
    ),
    ("POST", "/v1/nowhere", {}, 404, None, "unknown_url", "unknown URL"),
    ("GET", CHAT_PATH, None, 405, None, "method_not_allowed", "not allowed"),
]


@pytest.mark.parametrize("method,path,body,status,param,code,words", BAD_REQUESTS)
def test_errors_in_openai_shape(server, method, path, body, status, param, code, words):
    raw = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    got, answer = _call(server[0], method, path, raw)
    err = answer["error"]
    assert got == status and set(err) == {"message", "type", "param", "code"}
    assert err["param"] == param and err["code"] == code and words in err["message"]
    assert ".str" not in err["message"] and "list[" not in err["message"]


def test_auth_error_and_unknown_fields(server, client):
    for path, body in (
        (CHAT_PATH, {"model": "tiny", "messages": MSG}),
        ("/tokenize", {"model": "tiny", "prompt": "x"}),
        ("/detokenize", {"model": "tiny", "tokens": [1]}),
    ):
        got, answer = _call(server[0], "POST", path, json.dumps(body).encode(), "no")
        assert got == 401 and answer["error"]["code"] == "invalid_api_key"
    got, answer = _call(server[0], "GET", "/tokenizer_info", None, "no")
    assert got == 401 and answer["error"]["code"] == "invalid_api_key"
    # unknown fields (client extra_body) are accepted
    r = client.chat.completions.create(
        model="tiny", messages=MSG, max_tokens=2, extra_body={"top_k": 5, "something_new": 1}
    )
    assert r.choices[0].message.content is not None


def test_openapi_lists_each_routes_request_and_response_schema(server):
    with urllib.request.urlopen(server[0] + "/openapi.json") as r:  # open without a key, as /health
        spec = json.load(r)
    schemas = spec["components"]["schemas"]

    def ref(obj):
        return obj["$ref"].rsplit("/", 1)[1]

    expected = {
        ("post", "/v1/chat/completions"): ("ChatCompletionRequest", "ChatCompletionResponse"),
        ("post", "/v1/completions"): ("CompletionRequest", "CompletionResponse"),
        ("post", "/tokenize"): ("TokenizeRequest", "TokenizeResponse"),
        ("post", "/detokenize"): ("DetokenizeRequest", "DetokenizeResponse"),
        ("get", "/v1/models"): (None, "ModelList"),
        ("get", "/health"): (None, "HealthResponse"),
        ("get", "/tokenizer_info"): (None, "TokenizerInfoResponse"),
        ("post", "/v1/responses"): ("ResponsesRequest", "ResponseObject"),
        ("get", "/v1/responses/{response_id}"): (None, "ResponseObject"),
        ("get", "/v1/responses/{response_id}/input_items"): (None, "InputItemList"),
        ("delete", "/v1/responses/{response_id}"): (None, "ResponseDeleted"),
        ("post", "/v1/responses/{response_id}/cancel"): (None, "ResponseObject"),
    }
    for (method, path), (request, response) in expected.items():
        op = spec["paths"][path][method]
        if request:
            assert ref(op["requestBody"]["content"]["application/json"]["schema"]) == request, path
            assert ref(op["responses"]["400"]["content"]["application/json"]["schema"]) == "ErrorResponse", path
        assert ref(op["responses"]["200"]["content"]["application/json"]["schema"]) == response, path
    assert {"messages", "model", "n", "max_tokens", "tools"} <= set(schemas["ChatCompletionRequest"]["properties"])
    assert {"choices", "usage", "agentkit"} <= set(schemas["ChatCompletionResponse"]["properties"])
    assert "text/event-stream" in spec["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]
    assert "ChatCompletionChunk" in schemas  # the stream's events are described too


class _Broken:
    """An engine whose generate raises (a bug or an out-of-memory error), for the 500 path."""

    model_name = "broken"

    def __init__(self, engine):
        self.tokenizer, self.encode, self.max_model_len = engine.tokenizer, engine.encode, engine.max_model_len

    def generate(self, prompts, params=None):
        raise RuntimeError("the engine fell over")


def test_engine_failure_is_a_500_logged_once(tiny_engine, caplog):
    with serve_in_thread(create_app(_Broken(tiny_engine), "broken")) as url:
        answers = [
            _call(url, "POST", CHAT_PATH, json.dumps({"model": "broken", "messages": MSG}).encode()) for _ in range(3)
        ]  # a client retrying
    assert all(
        a
        == (
            500,
            {
                "error": {
                    "message": "RuntimeError: the engine fell over",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            },
        )
        for a in answers
    )
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1 and "engine call failed" in tracebacks[0].getMessage()


def test_concurrent_requests_share_engine_calls(server, client):
    batcher = server[1].state.batcher
    before = batcher.calls
    results = []

    def ask(i):
        r = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": f"q{i}"}], max_tokens=4, seed=7
        )
        results.append(r.choices[0].message.content)

    ts = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(results) == 8 and batcher.calls - before < 8  # some requests were batched together


def test_agent_model_runs_tools_server_side(client):
    r = client.chat.completions.create(
        model="agentkit/tir", messages=[{"role": "user", "content": "What is 2+2?"}], max_tokens=16, seed=0
    )
    extra = r.model_extra["agentkit"][0]
    assert extra["finish"] in {"answer", "no_call", "max_turns", "max_tool_calls", "max_tokens"}
    assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0
    chunks = list(
        client.chat.completions.create(
            model="agentkit/tir",
            stream=True,
            max_tokens=8,
            seed=0,
            messages=[{"role": "user", "content": "What is 2+2?"}],
        )
    )
    assert chunks[-1].choices[0].finish_reason == "stop"
    progress = [i for i, c in enumerate(chunks) if (c.model_extra or {}).get("agentkit")]
    first_content = next(i for i, c in enumerate(chunks) if c.choices)
    assert progress and max(progress) < first_content  # progress arrives during the loop, before the answer
    assert chunks[progress[0]].model_extra["agentkit"]["type"] == "turn"


def test_live_stream_with_n_samples(client, engine):
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
    if type(engine).__name__ == "HFEngine":
        assert len(parts[0]) > 1  # token by token, not one block (other engines send the finished text)
