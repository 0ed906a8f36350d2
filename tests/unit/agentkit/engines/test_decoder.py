"""The compact decode step (``agentkit.engines.decoder``): in fp32 the logprobs of transformers' forward pass within
``FP32_TOLERANCE``, through padding, drafts and rejected drafts; HFEngine's greedy outputs unchanged by it; bf16
decode (``decode_dtype="bfloat16"``) within a stated tolerance of fp32 on narrow steps and exactly fp32 elsewhere;
the bf16 copy follows the weights; a layer that is no longer a plain linear sends the engine back to the model."""

import pytest
import torch

from agentkit.engines import SamplingParams
from agentkit.engines.decoder import CompactDecoder, unsupported
from agentkit.engines.hf import HFEngine
from agentkit.engines.kv import make_cache
from agentkit.models import load_model

TOLERANCE = 0.1  # nats per token, logprobs and entropies: what docs/engines.md states for bf16 decode
# nats: the fp32 step sums in another order than transformers' (W xᵀ products, grouped attention); SmolLM2 measured
# ≤ 7e-5, the random Qwen2/Mistral models ≤ 1e-6; a step that drops the padding mask is off by > 0.1
FP32_TOLERANCE = 5e-4


@pytest.fixture(scope="module")
def real():
    return load_model("smollm2-135m")  # the real model: tiny-random's near-uniform logits would hide errors


@pytest.fixture(scope="module")
def engines(real):
    model, tok = real
    return HFEngine(model, tok, speculate=0), HFEngine(model, tok, speculate=0, decode_dtype="bfloat16")


def _steps(model, step, rows: int = 3, n: int = 6, seed: int = 0):
    """Prefill left-padded rows with the model, then ``n`` decode steps fed 1–3 tokens each (some of them rejected
    drafts, masked out afterwards as HFEngine does) through ``step``; returns each step's logits."""
    g = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    ids = torch.randint(3, vocab, (rows, 7), generator=g)
    mask = torch.ones_like(ids)
    mask[1:, :2] = 0  # rows 1.. are two tokens shorter: left padding
    pos = (mask.cumsum(1) - 1).clamp_min(0)
    cache = make_cache(model.config, headroom=8)
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True)
    pos, out = pos[:, -1:], []
    for i in range(n):
        fed = torch.randint(3, vocab, (rows, 1 + i % 3), generator=g)
        mask = torch.cat([mask, mask.new_ones(fed.shape)], 1)
        logits = step(fed, mask, pos + torch.arange(1, fed.shape[1] + 1), cache)
        out.append(logits)
        if fed.shape[1] > 1:  # row 0 keeps its drafts, the others reject the last one
            mask[1:, -1] = 0
        pos = pos + 1 + (fed.shape[1] - 1) * torch.tensor([[1]] + [[0]] * (rows - 1))
    return out


def _hf_step(model):
    def step(fed, mask, positions, cache):
        with torch.no_grad():
            return model(
                input_ids=fed, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True
            ).logits

    return step


def _tiny(kind: str):
    """A small random model of another Llama-family architecture: Qwen2 (biased q/k/v), Mistral (no window)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    cfg = AutoConfig.for_model(
        kind,
        vocab_size=96,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        sliding_window=None,
    )
    return AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").eval()


def _logprob_gap(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max((x.log_softmax(-1) - y.log_softmax(-1)).abs().max().item() for x, y in zip(a, b))


@pytest.mark.parametrize("name", ["tiny-random", "smollm2-135m", "qwen2", "mistral"])
def test_fp32_step_is_transformers_forward_within_the_tolerance(name, real):
    model = real[0] if name == "smollm2-135m" else load_model(name)[0] if name == "tiny-random" else _tiny(name)
    ref = _steps(model, _hf_step(model))
    got = _steps(model, CompactDecoder(model))
    assert _logprob_gap(ref, got) < FP32_TOLERANCE
    # and the test can fail: a step that forgets the mask's padding is far off
    unmasked = _steps(model, lambda f, m, p, c: CompactDecoder(model)(f, torch.ones_like(m), p, c))
    assert _logprob_gap(ref[:1], unmasked[:1]) > 200 * FP32_TOLERANCE


def test_engine_outputs_are_unchanged_by_the_compact_step(real):
    model, tok = real
    engine = HFEngine(model, tok)  # speculation on: drafts, accepted and rejected
    assert engine._decoder is not None
    prompts = [[{"role": "user", "content": f"Repeat after me: {w} {w} {w}"}] for w in ("red", "one two", "cat")]
    sp = SamplingParams(max_tokens=20, temperature=0, entropy=True, top_logprobs=2)
    fast = engine.generate(prompts, sp)
    engine._decoder = None  # the model's own forward pass
    slow = engine.generate(prompts, sp)
    for a, b in zip(fast, slow):
        a, b = a[0], b[0]
        assert a.token_ids == b.token_ids and [list(t) for t in a.top_logprobs] == [list(t) for t in b.top_logprobs]
        pairs = [*zip(a.logprobs, b.logprobs), *zip(a.entropies, b.entropies)]
        pairs += [(x[t], y[t]) for x, y in zip(a.top_logprobs, b.top_logprobs) for t in x]
        assert max(abs(x - y) for x, y in pairs) < FP32_TOLERANCE
    assert engine.stats()["draft_tokens"] > 0


def test_narrow_steps_read_bf16_within_the_tolerance(engines):
    full, low = engines
    prompt = [[{"role": "user", "content": "Name three colours."}]]
    greedy = SamplingParams(max_tokens=12, temperature=0, entropy=True)
    a, b = full.generate(prompt, greedy)[0][0], low.generate(prompt, greedy)[0][0]
    copies = [layer.packed for layer in low._decoder.layers]
    assert all(c and c[0].dtype == torch.bfloat16 for c in copies)
    assert low.model.get_output_embeddings().weight.dtype == torch.float32  # the head reads fp32
    # teacher-forced on the same tokens, each path's logprobs and entropies of what the bf16 path chose
    same = full.score([prompt[0]], [b.token_ids], SamplingParams(entropy=True))[0]
    diffs = [abs(x - y) for x, y in zip(b.logprobs, same.logprobs)]
    assert 0 < max(diffs) < TOLERANCE, diffs
    assert max(abs(x - y) for x, y in zip(b.entropies, same.entropies)) < TOLERANCE
    assert a.token_ids[:3] == b.token_ids[:3]  # a real model's top choice survives bf16 at the start


def test_wide_steps_and_scoring_stay_exactly_fp32(engines):
    full, low = engines
    prompts = [[{"role": "user", "content": f"Count to {i}."}] for i in range(2, 8)]  # 6 rows > decode_rows (1)
    greedy = SamplingParams(max_tokens=6, temperature=0)
    for a, b in zip(full.generate(prompts, greedy), low.generate(prompts, greedy)):
        assert a[0].token_ids == b[0].token_ids and a[0].logprobs == b[0].logprobs
    # score() never takes the decode path, however narrow
    s1 = full.score([prompts[0]], [[11, 12]])[0].logprobs
    assert low.score([prompts[0]], [[11, 12]])[0].logprobs == s1


def test_the_bf16_copy_follows_its_weights():
    model, _ = load_model("tiny-random")
    dec = CompactDecoder(model, low="bfloat16")
    layer = dec.layers[0]
    x = torch.randn(1, model.config.hidden_size)
    with torch.no_grad():
        before = layer.out(x, layer.compact())
        layer.o.weight.mul_(2)  # an in-place update (a trainer's step, an adapter merged)
        after = layer.out(x, layer.compact())
        layer.o.weight = torch.nn.Parameter(layer.o.weight.detach() / 2)  # a new tensor (weights reloaded)
        again = layer.out(x, layer.compact())
        full = layer.out(x, ())
    assert torch.allclose(after, 2 * before, rtol=0.02, atol=1e-3)
    assert torch.equal(again, before) and not torch.equal(again, full)
    assert torch.allclose(again, full, rtol=0.02, atol=1e-2)


def test_a_replaced_projection_sends_the_engine_back_to_the_model():
    model, tok = load_model("tiny-random")
    engine = HFEngine(model, tok, speculate=0)
    attn = model.model.layers[0].self_attn
    original = attn.q_proj

    class Doubled(torch.nn.Module):  # stands for a LoRA or quantised layer the compact step cannot read
        def forward(self, x):
            return 2 * original(x)

    prompt = [[{"role": "user", "content": "hi"}]]
    sp = SamplingParams(max_tokens=8, temperature=0)
    plain = engine.generate(prompt, sp)[0][0]
    attn.q_proj = Doubled()
    assert not engine._decoder.current()
    changed = engine.generate(prompt, sp)[0][0]
    engine._decoder = None
    assert engine.generate(prompt, sp)[0][0].logprobs == changed.logprobs != plain.logprobs
    attn.q_proj = original


def test_bad_settings_are_refused():
    from transformers import GPT2Config, GPT2LMHeadModel

    model, tok = load_model("tiny-random", dtype="bfloat16")
    with pytest.raises(ValueError, match="fp32 model on a CPU"):
        HFEngine(model, tok, decode_dtype="bfloat16")
    model, tok = load_model("tiny-random")
    with pytest.raises(ValueError, match="unknown decode dtype 'float16'"):
        HFEngine(model, tok, decode_dtype="float16")
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=tok.vocab_size))
    with pytest.raises(ValueError, match="model type 'gpt2'"):
        HFEngine(gpt2, tok, decode_dtype="bfloat16")
    assert HFEngine(gpt2, tok)._decoder is None  # fp32: the model's own forward pass
    from peft import LoraConfig, get_peft_model

    wrapped = get_peft_model(load_model("tiny-random")[0], LoraConfig(r=2, target_modules=["q_proj"]))
    assert unsupported(wrapped).startswith("a PeftModel (a wrapped model")
    assert unsupported(wrapped.base_model.model) == "layers other than plain linear projections (LoRA, quantised)"
