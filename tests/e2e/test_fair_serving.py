"""The engine is shared fairly (the real SmolLM2, the real server on loopback): a normal request is answered beside a
maximal one, and a client that hangs up, streamed or not, has its generation cancelled within a decode step.

The bounds are engine steps (the batcher's count, the same on any machine) and seconds: 10 s beside a maximal
request, 5 s to go idle, on a machine where a normal request alone takes up to 2 s; a slower or busier machine
scales them by its own time for a normal request alone, measured first (a maximal request unfairly served takes
~8,000 steps, minutes on any machine)."""

import http.client
import json
import time
import urllib.request

import openai
import pytest

from agentkit.server import create_app
from agentkit.testing.servers import serve_in_thread


@pytest.fixture(scope="module")
def served(smol_engine):
    app = create_app(smol_engine, "smollm2-135m", api_key="k")
    with serve_in_thread(app) as url:
        yield url, app.state.batcher, openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=60)


QUESTION = [{"role": "user", "content": "Write a very long story about a lighthouse."}]


def _maximal(url: str) -> dict:
    """A request for every token the context has left after the prompt, which never stops early."""
    req = urllib.request.Request(
        url + "/tokenize",
        data=json.dumps({"model": "smollm2-135m", "messages": QUESTION}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer k"},
    )
    with urllib.request.urlopen(req) as r:
        n = json.loads(r.read())["count"]
    return dict(model="smollm2-135m", messages=QUESTION, max_tokens=8192 - n, extra_body={"ignore_eos": True})


def _until_idle(batcher, seconds: float) -> float:
    """Seconds until the batcher has nothing running or queued (fails past ``seconds``)."""
    start = time.monotonic()
    while not batcher.idle:
        assert time.monotonic() - start < seconds, "the engine is still busy"
        time.sleep(0.02)
    return time.monotonic() - start


def _slowdown(client) -> float:
    """This machine's slowdown against one where a normal request alone takes 2 s (at least 1)."""
    _normal(client)  # warm
    return max(1.0, _normal(client) / 2.0)


def _normal(client) -> float:
    start = time.monotonic()
    r = client.chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": "What is 2 + 2?"}], max_tokens=16, temperature=0
    )
    assert r.choices[0].message.content
    return time.monotonic() - start


def test_a_normal_request_is_answered_beside_a_maximal_one_and_a_hang_up_cancels_it(served):
    url, batcher, client = served
    slow = _slowdown(client)
    stream = client.chat.completions.create(stream=True, **_maximal(url))
    chunks = iter(stream)
    while not next(chunks).choices[0].delta.content:  # the maximal request is decoding
        pass
    steps = batcher.steps
    beside = _normal(client)
    assert batcher.steps - steps < 200, batcher.steps - steps  # its 13 steps and the maximal one's beside them
    assert beside < 10 * slow, (beside, slow)
    steps = batcher.steps
    stream.close()  # hang up mid-stream
    assert _until_idle(batcher, 5 * slow) < 5 * slow and batcher.steps - steps < 400
    assert _normal(client) < 5 * slow  # the next request is answered at once


def _hang_up_after(url: str, body: dict, seconds: float, stream: bool) -> None:
    conn = http.client.HTTPConnection(url.split("//")[1], timeout=30)
    conn.request(
        "POST",
        "/v1/chat/completions",
        json.dumps({**body, "stream": stream}),
        {"Content-Type": "application/json", "Authorization": "Bearer k"},
    )
    if stream:
        conn.getresponse().read(1)  # the first bytes of the stream
    else:
        time.sleep(seconds)
    conn.sock.close()  # gone, without a word


def test_clients_that_hang_up_leave_nothing_running(served):
    url, batcher, client = served
    slow = _slowdown(client)
    body = _maximal(url)
    body = {"model": body["model"], "messages": body["messages"], "max_tokens": body["max_tokens"], "ignore_eos": True}
    for _ in range(3):  # non-streamed requests closed after a second
        _hang_up_after(url, body, 1.0, stream=False)
    _until_idle(batcher, 5 * slow)
    for _ in range(8):  # streams closed after their first chunk
        _hang_up_after(url, body, 0, stream=True)
    _until_idle(batcher, 5 * slow)
    steps = batcher.steps
    time.sleep(0.5)
    assert batcher.steps == steps  # nothing decodes for anyone gone
    assert _normal(client) < 5 * slow
