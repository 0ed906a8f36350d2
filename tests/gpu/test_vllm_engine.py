"""VLLMEngine on a CUDA GPU (deselected by default; run with `pytest -m gpu`)."""

import pytest

pytestmark = pytest.mark.gpu
vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)


@pytest.fixture(scope="module")
def engines():
    from agentkit.engines.hf import HFEngine
    from agentkit.engines.vllm import VLLMEngine

    return VLLMEngine("smollm2-135m", gpu_memory_utilization=0.3), HFEngine("smollm2-135m", device="cuda")


def test_generate_protocol_and_greedy_agreement(engines):
    from agentkit.engines import SamplingParams

    v, h = engines
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    (vc,) = v.generate([chat], SamplingParams(max_tokens=16, temperature=0, entropy=True))[0]
    (hc,) = h.generate([chat], SamplingParams(max_tokens=16, temperature=0, entropy=True))[0]
    assert vc.token_ids[:8] == hc.token_ids[:8]
    assert vc.logprobs[:8] == pytest.approx(hc.logprobs[:8], abs=0.05)
    # top-50 estimate: a truncated sum, below the exact entropy
    assert all(e <= x + 0.05 for e, x in zip(vc.entropies, hc.entropies))
    many = v.generate([chat] * 3, SamplingParams(n=4, max_tokens=8, seed=0))
    assert [len(x) for x in many] == [4, 4, 4]


def test_score_matches_hf(engines):
    v, h = engines
    (vs,) = v.score(["The capital of France is"], [" Paris, a city."])
    (hs,) = h.score(["The capital of France is"], [" Paris, a city."])
    assert vs.token_ids == hs.token_ids
    assert vs.logprobs == pytest.approx(hs.logprobs, abs=0.05)
