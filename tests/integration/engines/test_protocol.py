"""Every engine passes the same protocol checks (``agentkit.testing.conformance``) against HFEngine on the tiny
model; OpenAIEngine also serves an agent and runs rollouts through a second server. VLLMEngine: tests/vllm/."""

import pytest

from agentkit.agent import AgentConfig, rollout
from agentkit.engines import Engine, SamplingParams
from agentkit.engines.openai import OpenAIEngine
from agentkit.server import create_app
from agentkit.testing import conformance
from agentkit.testing.servers import serve_in_thread
from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig


@pytest.fixture(scope="module")
def upstream(tiny_engine):
    """A second `agentkit serve` (the tiny model on HFEngine) for OpenAIEngine to call."""
    with serve_in_thread(create_app(tiny_engine, "tiny-random", api_key="up")) as url:
        yield url


@pytest.fixture(scope="module", params=["upstream tokens", "local tokenizer"])
def remote(upstream, request):
    eng = OpenAIEngine(
        "tiny-random",
        base_url=upstream + "/v1",
        api_key="up",
        tokenizer="tiny-random" if request.param == "local tokenizer" else None,
    )
    yield eng
    eng.close()


def test_hf_engine_conforms(tiny_engine):
    from agentkit.engines.hf import HFEngine

    other = HFEngine("tiny-random", max_batch_size=3, speculate=0)  # other batching: the same answers
    assert isinstance(other, Engine)
    errors = conformance.check_all(other, tiny_engine, tol=1e-4)
    assert errors["entropy_abs_error"] < 1e-4  # HFEngine's entropy is exact
    conformance.check_structured(other, tiny_engine)  # constrained samples keep the model's own logprobs
    other.load_weights(path="tiny-random")
    conformance.check_greedy(other, tiny_engine, tol=1e-4)
    other.close()


def test_openai_engine_conforms(remote, tiny_engine):
    assert isinstance(remote, Engine) and remote.max_model_len == tiny_engine.max_model_len
    errors = conformance.check_all(remote, tiny_engine, tol=1e-4)
    assert errors["entropy_rel_error"] > 0  # a top-20 estimate over a 259-token vocabulary
    conformance.check_structured(remote, tiny_engine)  # constraints sent as structured_outputs
    with pytest.raises(Exception, match="has no /pause route: it cannot take new weights"):
        remote.load_weights(path="x")


def test_rollout_through_openai_engine_matches_hf(remote, tiny_engine):
    """The agent loop on a remote engine records the same token ids, masks and logprobs as on the local one."""
    tool = PythonTool(SandboxConfig(pool_size=2))
    cfg = AgentConfig(max_turns=2, sampling=SamplingParams(max_tokens=24, temperature=0, entropy=False, seed=0))
    try:
        here = rollout(tiny_engine, ["What is 2 + 2?", "Compute 3 * 7."], [tool], cfg)
        there = rollout(remote, ["What is 2 + 2?", "Compute 3 * 7."], [tool], cfg)
    finally:
        tool.close()
    for a, b in zip(here, there):
        assert a.prompt_ids == b.prompt_ids and a.completion_ids == b.completion_ids and a.mask == b.mask
        assert [s.text for s in a.segments] == [s.text for s in b.segments]
        assert b.segments[0].logprobs == pytest.approx(a.segments[0].logprobs, abs=1e-4)


def test_agent_served_over_a_remote_engine(upstream):
    """`agentkit serve --engine openai --upstream URL --agent tir`: the agent runs here, its model there."""
    import openai

    eng = OpenAIEngine("tiny-random", base_url=upstream + "/v1", api_key="up")
    tool = PythonTool(SandboxConfig(pool_size=2))
    try:
        with serve_in_thread(create_app(eng, "tiny-random", tools={"python": tool})) as url:
            client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
            r = client.chat.completions.create(
                model="agentkit/tir", max_tokens=16, seed=0, n=2, messages=[{"role": "user", "content": "What is 2+2?"}]
            )
            assert len(r.choices) == 2 and r.usage.completion_tokens > 0
            plain = client.chat.completions.create(
                model="tiny-random",
                max_tokens=6,
                temperature=0,
                logprobs=True,
                top_logprobs=2,
                messages=[{"role": "user", "content": "hi"}],
            )
            local = eng.generate([[{"role": "user", "content": "hi"}]], SamplingParams(max_tokens=6, temperature=0))
            assert plain.choices[0].message.content == local[0][0].text
            assert len(plain.choices[0].logprobs.content[0].top_logprobs) == 2
    finally:
        tool.close()
        eng.close()
