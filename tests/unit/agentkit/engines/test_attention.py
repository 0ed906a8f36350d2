"""Grouped-query attention under a mask without repeating the cache (``agentkit.engines.attention``): the same
logits to the bit as transformers' sdpa on a padded batch of the real model, and HFEngine switches to it on a CPU."""

import torch

from agentkit.engines import SamplingParams, attention
from agentkit.engines.hf import HFEngine
from agentkit.models import load_model


def test_padded_batch_gives_the_same_logits_as_transformers_sdpa():
    model, tok = load_model("smollm2-135m")  # 9 query heads, 3 key/value heads
    assert model.config._attn_implementation == "sdpa" and model.model.layers[0].self_attn.num_key_value_groups == 3
    enc = tok(["Hi", "Tell me a story about a cat " * 6, "What is 2+2?"], return_tensors="pt", padding=True,
              padding_side="left")  # fmt: skip
    with torch.inference_mode():
        before = model(**enc).logits
        assert attention.use(model) and model.config._attn_implementation == attention.NAME
        after = model(**enc).logits
    valid = enc.attention_mask.bool()
    assert torch.equal(before[valid], after[valid])
    assert not attention.use(model)  # already switched: nothing to do


def test_hfengine_on_cpu_runs_it_and_generates_the_same_tokens():
    model, tok = load_model("smollm2-135m")
    prompts = [[{"role": "user", "content": q}] for q in ("Hi", "Name three colours of the rainbow, please.")]
    greedy = SamplingParams(max_tokens=8, temperature=0)
    engine = HFEngine(model, tok, speculate=0, prefix_cache_mb=0)  # two rows of different lengths: padded
    assert model.config._attn_implementation == attention.NAME
    new = engine.generate(prompts, greedy)
    model.set_attn_implementation("sdpa")  # the same engine, attention as transformers runs it
    for a, b in zip(new, engine.generate(prompts, greedy)):
        assert a[0].token_ids == b[0].token_ids and a[0].logprobs == b[0].logprobs
