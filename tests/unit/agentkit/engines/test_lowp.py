"""Low-precision decode (``HFEngine(decode_dtype="bfloat16")``, ``agentkit.engines.lowp``): narrow decode steps
read bf16 copies of the layers' weights, within a stated tolerance of fp32; wide passes, passes with gradients and
anything outside the engine's decode steps stay exactly fp32; a copy follows the weights it was made from."""

import pytest
import torch

from agentkit.engines import SamplingParams, lowp
from agentkit.engines.hf import HFEngine
from agentkit.models import load_model

TOLERANCE = 0.1  # nats per token, logprobs and entropies: what docs/engines.md states for bf16 decode


@pytest.fixture(scope="module")
def engines():
    model, tok = load_model("smollm2-135m")  # the real model: tiny-random's near-uniform logits would hide errors
    return HFEngine(model, tok, speculate=0), HFEngine(model, tok, speculate=0, decode_dtype="bfloat16")


def _layers(engine):
    head = engine.model.get_output_embeddings()
    return [m for m in engine.model.modules() if isinstance(m, torch.nn.Linear) and m is not head]


def test_narrow_steps_read_bf16_within_the_tolerance(engines):
    full, low = engines
    prompt = [[{"role": "user", "content": "Name three colours."}]]
    greedy = SamplingParams(max_tokens=12, temperature=0, entropy=True)
    a, b = full.generate(prompt, greedy)[0][0], low.generate(prompt, greedy)[0][0]
    assert all(m._lowp_weight is not None and m._lowp_weight.dtype == torch.bfloat16 for m in _layers(low))
    assert low.model.get_output_embeddings().weight.dtype == torch.float32  # the head reads fp32
    # teacher-forced on the same tokens, each path's logprobs and entropies of what the bf16 path chose
    same = full.score([prompt[0]], [b.token_ids], SamplingParams(entropy=True))[0]
    diffs = [abs(x - y) for x, y in zip(b.logprobs, same.logprobs)]
    assert 0 < max(diffs) < TOLERANCE, diffs
    assert max(abs(x - y) for x, y in zip(b.entropies, same.entropies)) < TOLERANCE
    assert a.token_ids[:3] == b.token_ids[:3]  # a real model's top choice survives bf16 at the start


def test_wide_steps_and_scoring_stay_exactly_fp32(engines):
    full, low = engines
    prompts = [[{"role": "user", "content": f"Count to {i}."}] for i in range(2, 8)]  # 6 rows > decode_rows 4
    greedy = SamplingParams(max_tokens=6, temperature=0)
    for a, b in zip(full.generate(prompts, greedy), low.generate(prompts, greedy)):
        assert a[0].token_ids == b[0].token_ids and a[0].logprobs == b[0].logprobs
    # score() never takes the decode path, however narrow
    s1 = full.score([prompts[0]], [[11, 12]])[0].logprobs
    assert low.score([prompts[0]], [[11, 12]])[0].logprobs == s1


def test_outside_the_engine_and_under_grad_the_model_is_fp32(engines):
    _, low = engines
    layer = _layers(low)[0]
    x = torch.randn(1, layer.in_features)
    with torch.no_grad():
        full = layer(x)
        with lowp.active(max_rows=4):
            narrow = layer(x)
    assert not torch.equal(narrow, full) and (narrow - full).abs().max() < 0.01 * full.abs().max()
    with torch.enable_grad(), lowp.active(max_rows=4):
        assert torch.equal(layer(x), full)  # a pass recording gradients (training) never reads the copy


def test_a_copy_follows_its_weights():
    model, tok = load_model("tiny-random")
    engine = HFEngine(model, tok, speculate=0, decode_dtype="bfloat16")
    layer = _layers(engine)[0]
    x = torch.randn(1, layer.in_features)
    with torch.no_grad(), lowp.active(4):
        before = layer(x)
        layer.weight.mul_(2)  # an in-place update (a trainer's step, an adapter merged)
        after = layer(x)
        layer.weight = torch.nn.Parameter(layer.weight.detach() / 2)  # a new tensor (weights reloaded)
        again = layer(x)
    assert torch.allclose(after, 2 * before, rtol=0.02, atol=1e-3)
    assert torch.allclose(again, before, rtol=1e-6, atol=1e-6)


def test_bad_settings_are_refused():
    model, tok = load_model("tiny-random", dtype="bfloat16")
    with pytest.raises(ValueError, match="fp32 model on a CPU"):
        HFEngine(model, tok, decode_dtype="bfloat16")
    model, tok = load_model("tiny-random")
    with pytest.raises(ValueError, match="unknown decode dtype 'float16'"):
        HFEngine(model, tok, decode_dtype="float16")
