"""The Responses API on loopback, driven by the official openai client's ``responses`` resource: a tiny model for
the plain model (each answer compared with the chat completion it runs as), a scripted agent for the built-in tool
items, every object and streamed event validated against the openai package's own types."""

import json
import threading
import time
import urllib.error
import urllib.request

import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from agentkit.server import create_app
from agentkit.server.response_store import ResponseStore
from agentkit.testing.scripted import ScriptedEngine
from agentkit.testing.servers import serve_in_thread
from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig

from .test_http import ADD as CHAT_ADD

EVENT = TypeAdapter(ResponseStreamEvent)
ADD = {"type": "function", **CHAT_ADD["function"], "description": "add two digits"}  # the Responses API's shape


@pytest.fixture(scope="module")
def served(tiny_engine, tmp_path_factory):
    tool = PythonTool(SandboxConfig(pool_size=1, wall_s=10))
    store = ResponseStore(tmp_path_factory.mktemp("store") / "responses.db")
    app = create_app(tiny_engine, "tiny", api_key="sk-test", responses=store)
    with serve_in_thread(app) as url:
        yield url, app, openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
    tool.close()


@pytest.fixture(scope="module")
def client(served):
    return served[2]


def _events(url: str, body: dict) -> list[dict]:
    """The raw SSE events of a streamed response, each checked against openai's event types."""
    out, kind = [], None
    with urllib.request.urlopen(_post(url, {**body, "stream": True})) as r:
        for raw in r:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                assert data["type"] == kind
                EVENT.validate_python(data)
                out.append(data)
    return out


def _post(url: str, body: dict) -> urllib.request.Request:
    return urllib.request.Request(
        url + "/v1/responses",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-test"},
    )


def _error(url: str, body: dict) -> tuple[int, dict]:
    """The status and error object of a request that must fail."""
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(_post(url, body))
    return e.value.code, json.loads(e.value.read())["error"]


def test_text_response_is_the_chat_completion(client):
    kw = dict(max_output_tokens=12, temperature=1.0, extra_body={"seed": 5})
    r = client.responses.create(model="tiny", input="hi", instructions="be brief", **kw)
    Response.model_validate(r.model_dump(exclude_unset=True))
    chat = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        max_tokens=12,
        seed=5,
    )
    assert r.output_text == chat.choices[0].message.content
    assert (r.usage.input_tokens, r.usage.output_tokens) == (chat.usage.prompt_tokens, chat.usage.completion_tokens)
    assert r.status == ("incomplete" if chat.choices[0].finish_reason == "length" else "completed")
    assert r.instructions == "be brief" and r.store is True
    got = client.responses.retrieve(r.id)
    assert got.output_text == r.output_text and got.id == r.id


def test_streamed_events_in_order_and_whole(served, client):
    url = served[0]
    body = {"model": "tiny", "input": "hi", "max_output_tokens": 10, "seed": 2}
    events = _events(url, body)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert kinds[-4:-1] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    final = events[-1]["response"]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == final["output"][0]["content"][0]["text"] == events[-4]["text"]
    assert client.responses.retrieve(final["id"]).output_text == text  # stored as streamed
    whole = client.responses.create(model="tiny", input="hi", max_output_tokens=10, extra_body={"seed": 2})
    assert whole.output_text == text
    streamed = list(
        client.responses.create(model="tiny", input="hi", max_output_tokens=10, stream=True, extra_body={"seed": 2})
    )
    assert streamed[-1].response.output_text == text


def test_function_call_round_trip_across_previous_response_id(served, client):
    """A forced call comes back as a function_call item; its output, sent after previous_response_id, reaches
    the model after the call (the conversation is stored as items, not text), and an output naming no call is a
    400."""
    r1 = client.responses.create(
        model="tiny",
        input="add 2 and 3",
        tools=[ADD],
        tool_choice="required",
        max_output_tokens=64,
        extra_body={"seed": 0},
    )
    (call,) = r1.output
    assert call.type == "function_call" and call.name == "add" and set(json.loads(call.arguments)) == {"a", "b"}
    out = {"type": "function_call_output", "call_id": call.call_id, "output": "5"}
    r2 = client.responses.create(
        model="tiny", previous_response_id=r1.id, input=[out], tools=[ADD], max_output_tokens=8, extra_body={"seed": 1}
    )
    assert r2.previous_response_id == r1.id
    items = client.responses.input_items.list(r2.id, order="asc").data
    assert [i.type for i in items] == ["message", "function_call", "function_call_output"]
    assert items[1].call_id == call.call_id and items[2].output == "5"
    # the same conversation sent whole (as the Agents SDK does) is the same prompt: the same answer
    whole = client.responses.create(
        model="tiny",
        tools=[ADD],
        max_output_tokens=8,
        extra_body={"seed": 1},
        input=[{"role": "user", "content": "add 2 and 3"}, call.model_dump(exclude_none=True), out],
    )
    assert whole.output_text == r2.output_text and whole.usage.input_tokens == r2.usage.input_tokens
    with pytest.raises(openai.BadRequestError, match="no function_call with that call_id"):
        client.responses.create(model="tiny", input=[{"role": "user", "content": "x"}, {**out, "call_id": "call_nope"}])


def test_streamed_function_call_events(served):
    events = _events(
        served[0],
        {
            "model": "tiny",
            "input": "add",
            "tools": [ADD],
            "tool_choice": {"type": "function", "name": "add"},
            "max_output_tokens": 64,
            "seed": 0,
        },
    )
    kinds = [e["type"] for e in events]
    assert "response.function_call_arguments.done" in kinds
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    (item,) = events[-1]["response"]["output"]
    assert deltas == done["arguments"] == item["arguments"] and item["name"] == "add"
    added = next(e for e in events if e["type"] == "response.output_item.added")["item"]
    assert (added["id"], added["call_id"]) == (item["id"], item["call_id"])  # the item streamed is the one stored
    assert sum(e["type"] == "response.function_call_arguments.delta" for e in events) > 1  # live, in pieces


def test_structured_output_by_text_format(client):
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["n"],
        "additionalProperties": False,
    }
    r = client.responses.create(
        model="tiny",
        input="a digit",
        max_output_tokens=30,
        extra_body={"seed": 0},
        text={"format": {"type": "json_schema", "name": "digit", "schema": schema, "strict": True}},
    )
    assert 0 <= json.loads(r.output_text)["n"] <= 9


def test_store_delete_and_unknown_ids(client):
    r = client.responses.create(model="tiny", input="hi", max_output_tokens=2, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError, match="previous response"):
        client.responses.create(model="tiny", input="hi", previous_response_id=r.id)
    kept = client.responses.create(model="tiny", input="hi", max_output_tokens=2)
    client.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(kept.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(kept.id)
    with pytest.raises(openai.BadRequestError, match="only background responses"):
        client.responses.cancel(client.responses.create(model="tiny", input="hi", max_output_tokens=2).id)


def test_background_response_cancelled(served, client):
    """A background response answers queued at once, runs, and cancel stops its generation: the response is
    stored as cancelled and the engine goes idle."""
    app = served[1]
    r = client.responses.create(
        model="tiny", input="go on", max_output_tokens=1500, background=True, extra_body={"seed": 0}
    )
    assert r.status == "queued" and r.background
    deadline = time.monotonic() + 30
    while client.responses.retrieve(r.id).status == "queued" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.responses.retrieve(r.id).status == "in_progress"
    assert client.responses.cancel(r.id).status == "cancelled"
    assert client.responses.retrieve(r.id).status == "cancelled"
    deadline = time.monotonic() + 10
    while not app.state.batcher.idle and time.monotonic() < deadline:
        time.sleep(0.05)
    assert app.state.batcher.idle
    done = client.responses.create(model="tiny", input="hi", max_output_tokens=3, background=True)
    deadline = time.monotonic() + 30
    while client.responses.retrieve(done.id).status in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.responses.retrieve(done.id).status in ("completed", "incomplete")
    assert client.responses.cancel(done.id).status != "cancelled"  # finished: answered as it is


@pytest.mark.parametrize(
    "body, param",
    [
        ({"input": "x", "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}, "tools[0].type"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "tool_choice": "required"}, "tool_choice"),
        ({"input": "x", "text": {"format": {"type": "json_schema"}}}, "text.format.schema"),
        ({"input": "x", "background": True, "store": False}, "background"),
    ],
)
def test_bad_requests_are_400s_naming_the_field(served, body, param):
    status, error = _error(served[0], {"model": "tiny", **body})
    assert status == 400 and error["param"] == param, error


def test_agent_model_tool_calls_are_output_items():
    """The agent model's python calls appear as code_interpreter_call items (code, the sandbox's output), live in
    the stream, before its answer."""
    script = {"go": ["<python>print(17*23)</python>", "<answer>391</answer>"]}
    tool = PythonTool(SandboxConfig(pool_size=1, wall_s=10))
    app = create_app(ScriptedEngine(script), "scripted", api_key="sk-test", tools={"python": tool})
    try:
        with serve_in_thread(app) as url:
            client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
            r = client.responses.create(
                model="agentkit/tir", input="go", tools=[{"type": "code_interpreter", "container": {"type": "auto"}}]
            )
            Response.model_validate(r.model_dump(exclude_unset=True))
            ci, msg = r.output
            assert (ci.type, ci.code, ci.outputs[0].logs, ci.status) == (
                "code_interpreter_call",
                "print(17*23)",
                "391\n",
                "completed",
            )
            assert msg.type == "message" and r.output_text == "391" and r.usage.total_tokens > 0
            events = _events(url, {"model": "agentkit/tir", "input": "go"})
            kinds = [e["type"] for e in events]
            assert kinds.index("response.code_interpreter_call.completed") < kinds.index("response.output_text.delta")
            assert [i["type"] for i in events[-1]["response"]["output"]] == ["code_interpreter_call", "message"]
            assert _error(url, {"model": "agentkit/tir", "input": "go", "tools": [ADD]})[1]["param"] == "tools"
    finally:
        tool.close()


def test_concurrent_responses_share_the_engine(client):
    """Responses from several clients at once each get their own answer (the batcher shares the engine)."""
    got: dict[int, str] = {}

    def ask(i: int) -> None:
        got[i] = client.responses.create(
            model="tiny", input="hi", max_output_tokens=6, extra_body={"seed": i}
        ).output_text

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    alone = client.responses.create(model="tiny", input="hi", max_output_tokens=6, extra_body={"seed": 3}).output_text
    assert len(got) == 4 and got[3] == alone


def test_reasoning_items_with_a_reasoning_parser():
    """With a reasoning parser, think-tag reasoning is a ``reasoning`` item before the message (whole and
    streamed as ``response.reasoning_text.*`` events)."""
    app = create_app(
        ScriptedEngine({"sum": ["<think>2 and 3 make 5</think>The sum is 5."]}),
        "scripted",
        api_key="sk-test",
        reasoning_parser="qwen3",
    )
    with serve_in_thread(app) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        r = client.responses.create(model="scripted", input="sum")
        Response.model_validate(r.model_dump(exclude_unset=True))
        reasoning, msg = r.output
        assert reasoning.type == "reasoning" and reasoning.content[0].text == "2 and 3 make 5"
        assert r.output_text == "The sum is 5."
        events = _events(url, {"model": "scripted", "input": "sum"})
        text = "".join(e["delta"] for e in events if e["type"] == "response.reasoning_text.delta")
        assert text == "2 and 3 make 5"
        assert [i["type"] for i in events[-1]["response"]["output"]] == ["reasoning", "message"]
