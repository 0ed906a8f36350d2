"""LoRA adapters served per row by HFEngine: a batch mixing adapters (and the base) gives each row what serving
its adapter alone gives, through every prefill path (shared prefix, prefix cache) and the decode loop."""

import pytest
import torch
from peft import LoraConfig, get_peft_model

from agentkit.engines import SamplingParams
from agentkit.engines.hf import HFEngine

SYSTEM = "You are a careful assistant who answers in one short sentence. " * 2  # a shared prefix of many tokens


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    """Two random (non-zero) LoRA adapters of the tiny model, saved as a recipe saves them."""
    out = {}
    for k, name in enumerate(["a", "b"]):
        torch.manual_seed(k)
        base = HFEngine("tiny-random").model
        cfg = LoraConfig(r=4, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)
        path = tmp_path_factory.mktemp(f"lora-{name}")
        get_peft_model(base, cfg).save_pretrained(path)
        out[name] = str(path)
    return out


def _alone(adapters, prompt, adapter, params):
    """What an engine serving only this adapter (or none) generates for this prompt."""
    eng = HFEngine("tiny-random", prefix_cache_mb=0)
    if adapter is not None:
        eng.load_adapter(adapter, adapters[adapter])
    (out,) = eng.generate([prompt], SamplingParams(**{**params, "adapter": adapter}))
    return out


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_mixed_batch_equals_each_adapter_alone(adapters, temperature):
    eng = HFEngine("tiny-random")
    eng.load_adapter("a", adapters["a"])
    eng.load_adapter("b", adapters["b"])
    prompts = [SYSTEM + q for q in ("hello", "hello", "the cat sat", "the cat sat", "why")]
    names = ["a", "b", None, "a", "b"]
    params = dict(max_tokens=10, temperature=temperature, n=2, seed=3)
    mixed = eng.generate(prompts, SamplingParams(**params, adapters=names))
    for prompt, name, got in zip(prompts, names, mixed):
        want = _alone(adapters, prompt, name, params)
        assert [c.token_ids for c in got] == [c.token_ids for c in want]
        for c, w in zip(got, want):
            assert c.logprobs == pytest.approx(w.logprobs, abs=1e-4)
    assert mixed[0][0].token_ids != mixed[1][0].token_ids  # the adapters do change the output
    # prompts that share one adapter still share their common prefix (encoded once)
    same = eng.generate(prompts[:2], SamplingParams(**params, adapter="b"))
    assert [c.token_ids for c in same[1]] == [c.token_ids for c in mixed[1]]


def test_the_prefix_cache_never_serves_an_adapter_row(adapters):
    eng = HFEngine("tiny-random")
    eng.load_adapter("a", adapters["a"])
    first = SYSTEM + "tell me a story about a robot"
    (base,) = eng.generate([first], SamplingParams(max_tokens=8, temperature=0))
    reused = eng.prefix_cache.reused_tokens
    turn = first + base[0].text + " and then?"
    (adapted,) = eng.generate([turn], SamplingParams(max_tokens=8, temperature=0, adapter="a"))
    assert eng.prefix_cache.reused_tokens == reused  # the base row's keys/values were not used for adapter a
    assert adapted[0].token_ids == _alone(adapters, turn, "a", dict(max_tokens=8, temperature=0))[0].token_ids
    eng.generate([turn], SamplingParams(max_tokens=8, temperature=0))
    assert eng.prefix_cache.reused_tokens > reused  # a base row continuing it does use them


def test_loading_errors_and_unloading(adapters, tmp_path):
    eng = HFEngine("tiny-random")
    with pytest.raises(ValueError, match="not a PEFT adapter directory"):
        eng.load_adapter("x", str(tmp_path))
    eng.load_adapter("a", adapters["a"])
    with pytest.raises(ValueError, match="taken"):
        eng.load_adapter("a", adapters["b"])
    with pytest.raises(ValueError, match="adapter 'b' is not loaded"):
        eng.start(["hi"], SamplingParams(adapter="b"))
    (before,) = eng.generate(["hi"], SamplingParams(max_tokens=6, temperature=0))
    eng.unload_adapter("a")
    assert eng.adapters == {} and type(eng.model).__name__ == "LlamaForCausalLM"
    (after,) = eng.generate(["hi"], SamplingParams(max_tokens=6, temperature=0))
    assert after[0].token_ids == before[0].token_ids  # the base model is untouched
    with pytest.raises(KeyError):
        eng.unload_adapter("a")
