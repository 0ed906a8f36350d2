"""OpenAIEngine against the real `agentkit serve` app on loopback (backed by HFEngine on the tiny model)."""

import asyncio
from dataclasses import replace

import openai
import pytest
from fastapi.responses import JSONResponse

from agentkit.engines import SamplingParams, topk_entropy
from agentkit.engines.openai import OpenAIEngine
from agentkit.server import create_app
from agentkit.testing.servers import serve_in_thread


def _app(engine, fail_first: int = 0, delay_s: float = 0.0):
    """The real server, optionally with injected faults in front of it: 503s first, or a slow answer."""
    app = create_app(engine, "tiny")
    hits = {"n": 0}
    if fail_first or delay_s:

        @app.middleware("http")
        async def faults(request, call_next):
            hits["n"] += 1
            if delay_s:  # answer only after the client has given up; the engine is never reached
                await asyncio.sleep(delay_s)
                return JSONResponse(status_code=503, content={"error": {"message": "slow", "type": "server_error"}})
            if hits["n"] <= fail_first:
                return JSONResponse(status_code=503, content={"error": {"message": "busy", "type": "server_error"}})
            return await call_next(request)

    return app, hits


def test_chat_and_completions_with_logprobs(tiny_engine):
    app, _ = _app(tiny_engine)
    with serve_in_thread(app) as url:
        eng = OpenAIEngine("tiny", base_url=url + "/v1", api_key="k", entropy_top_k=20)
        p = SamplingParams(n=2, max_tokens=6, seed=5, entropy=True, ignore_eos=True)
        chat = eng.generate([[{"role": "user", "content": "hi"}]], p)[0]
        local = tiny_engine.generate([[{"role": "user", "content": "hi"}]], replace(p, top_logprobs=20))[0]
        assert [c.text for c in chat] == [c.text for c in local]
        assert [c.token_ids for c in chat] == [c.token_ids for c in local]  # return_tokens_as_token_ids
        assert chat[0].logprobs == pytest.approx(local[0].logprobs, abs=1e-5)
        # the estimate is the truncated sum over the top 20: never above the exact entropy
        for est, exact, top in zip(chat[0].entropies, local[0].entropies, local[0].top_logprobs):
            assert est <= exact + 1e-5 and est == pytest.approx(topk_entropy(list(top.values())), abs=1e-4)
        text = eng.generate(["plain prompt"], SamplingParams(max_tokens=4, seed=1, ignore_eos=True))[0][0]
        assert len(text.logprobs) == 4 and text.finish_reason == "length" and text.prompt_tokens > 0


def test_score_via_echo(tiny_engine):
    app, _ = _app(tiny_engine)
    with serve_in_thread(app) as url:
        eng = OpenAIEngine("tiny", base_url=url + "/v1")
        (remote,) = eng.score(["the context"], [" and more"])
        (local,) = tiny_engine.score(["the context"], [" and more"])
        assert remote.logprobs == pytest.approx(local.logprobs, abs=1e-4)


def test_retries_then_succeeds(tiny_engine):
    app, hits = _app(tiny_engine, fail_first=2)
    with serve_in_thread(app) as url:
        eng = OpenAIEngine("tiny", base_url=url + "/v1", max_retries=3)
        out = eng.generate(["x"], SamplingParams(max_tokens=2, seed=0, ignore_eos=True))  # the tiny model can say EOS
        assert hits["n"] == 3 and out[0][0].completion_tokens == len(out[0][0].token_ids) == 2


def test_timeout_raises_after_retries(tiny_engine):
    app, hits = _app(tiny_engine, delay_s=1.5)
    with serve_in_thread(app) as url:
        eng = OpenAIEngine("tiny", base_url=url + "/v1", timeout=0.3, max_retries=1)
        with pytest.raises(openai.APITimeoutError):
            eng.generate(["x"], SamplingParams(max_tokens=2))
        assert hits["n"] == 2  # the first try and one retry
