"""HFEngine on the tiny random model: sampling, stops, entropies, scoring, batching invariants."""

import math

import pytest
import torch

from agentkit.engines import SamplingParams
from agentkit.engines.sampling import _invert_cdf, filter_logits

CHAT = [{"role": "user", "content": "hello there"}]


def _manual_logp(engine, ids):
    with torch.no_grad():
        logits = engine.model(input_ids=torch.tensor([ids])).logits[0].float()
    return logits.log_softmax(-1)


def test_seed_reproducible_and_batch_independent(tiny_engine):
    p = SamplingParams(n=3, max_tokens=12, seed=7, temperature=1.0)
    a = tiny_engine.generate(["abc", "a longer prompt here"], p)
    b = tiny_engine.generate(["abc", "a longer prompt here"], p)
    assert [[c.token_ids for c in x] for x in a] == [[c.token_ids for c in x] for x in b]
    assert len({tuple(c.token_ids) for c in a[0]}) > 1  # the n samples differ
    alone = tiny_engine.generate(["abc"], p)  # other rows of the batch do not change a prompt's samples
    assert [c.token_ids for c in alone[0]] == [c.token_ids for c in a[0]]
    other = tiny_engine.generate(["abc"], SamplingParams(n=3, max_tokens=12, seed=8))
    assert [c.token_ids for c in other[0]] != [c.token_ids for c in a[0]]


def test_per_prompt_seeds(tiny_engine):
    """Equal prompts with their own seeds differ; each matches the same prompt sampled alone with that seed."""
    p = SamplingParams(max_tokens=12, temperature=1.0, seeds=[1, 2, 1])
    a, b, c = (x[0].token_ids for x in tiny_engine.generate(["abc"] * 3, p))
    assert a != b and a == c
    (alone,) = tiny_engine.generate(["abc"], SamplingParams(max_tokens=12, temperature=1.0, seed=2))
    assert alone[0].token_ids == b
    with pytest.raises(ValueError, match="one per prompt"):
        tiny_engine.generate(["abc"], SamplingParams(seeds=[1, 2]))


def test_greedy_and_filters(tiny_engine):
    g = tiny_engine.generate([CHAT], SamplingParams(n=2, max_tokens=10, temperature=0))[0]
    assert g[0].token_ids == g[1].token_ids
    k1 = tiny_engine.generate([CHAT], SamplingParams(max_tokens=10, top_k=1, seed=3))[0][0]
    p0 = tiny_engine.generate([CHAT], SamplingParams(max_tokens=10, top_p=1e-6, seed=4))[0][0]
    assert k1.token_ids == g[0].token_ids == p0.token_ids


def test_length_finish_and_counts(tiny_engine):
    c = tiny_engine.generate(["xyz"], SamplingParams(max_tokens=5, ignore_eos=True, seed=0))[0][0]
    assert c.finish_reason == "length" and c.completion_tokens == 5 and len(c.logprobs) == 5
    assert c.prompt_tokens == len(tiny_engine.encode("xyz"))


def test_stop_strings(tiny_engine):
    base = tiny_engine.generate(["stop test"], SamplingParams(max_tokens=30, temperature=0, ignore_eos=True))[0][0]
    text = base.text
    stop = next(
        text[i : i + 2]
        for i in range(4, len(text) - 2)
        if text[i : i + 2].isprintable() and text.find(text[i : i + 2]) == i
    )
    cut = text.find(stop)
    c = tiny_engine.generate(["stop test"], SamplingParams(max_tokens=30, temperature=0, ignore_eos=True, stop=[stop]))[
        0
    ][0]
    assert c.finish_reason == "stop" and c.stop_reason == stop
    assert c.text == text[:cut]
    assert len(c.token_ids) < len(base.token_ids)
    inc = tiny_engine.generate(
        ["stop test"],
        SamplingParams(max_tokens=30, temperature=0, ignore_eos=True, stop=[stop], include_stop_str_in_output=True),
    )[0][0]
    assert inc.text == text[:cut] + stop


def test_entropy_and_logprobs_match_full_logits(tiny_engine):
    prompt = tiny_engine.encode(CHAT)
    c = tiny_engine.generate([CHAT], SamplingParams(max_tokens=12, seed=1, entropy=True, ignore_eos=True))[0][0]
    logp = _manual_logp(tiny_engine, prompt + c.token_ids)[len(prompt) - 1 : -1]
    ent = -(logp.exp() * logp).sum(-1)
    lp = logp.gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(c.entropies), ent, atol=1e-4)
    assert torch.allclose(torch.tensor(c.logprobs), lp, atol=1e-4)


def test_shared_prefix_prefill_matches_plain(tiny_engine):
    prefix = "a shared system prompt that is long enough "
    prompts = [prefix + "one", prefix + "and the second"]
    batched = tiny_engine.generate(prompts, SamplingParams(max_tokens=8, temperature=0, entropy=True))
    for p, (b,) in zip(prompts, batched):
        (single,) = tiny_engine.generate([p], SamplingParams(max_tokens=8, temperature=0, entropy=True))[0:1][0]
        assert b.token_ids == single.token_ids
        assert b.logprobs == pytest.approx(single.logprobs, abs=1e-4)


@pytest.mark.parametrize("prefix", ["", "a shared system prompt that is long enough "])
def test_length_grouped_prefill_matches_single_prompts(tiny_engine, prefix):
    # suffixes of very different lengths are encoded in separate groups and merged right-aligned
    prompts = [prefix + "hi", prefix + "x" * 150, prefix + "yo", prefix + "z" * 140 + "!"]
    from agentkit.engines.hf import _length_groups

    assert len(_length_groups([len(tiny_engine.encode(p)) for p in prompts])) == 2
    p = SamplingParams(n=2, max_tokens=6, seed=11, entropy=True, ignore_eos=True)
    batched = tiny_engine.generate(prompts, p)
    for prompt, got in zip(prompts, batched):
        want = tiny_engine.generate([prompt], p)[0]
        assert [c.token_ids for c in got] == [c.token_ids for c in want]
        assert got[0].entropies == pytest.approx(want[0].entropies, abs=1e-4)


def test_score_matches_manual_forward(tiny_engine):
    ctxs = ["short", "a much longer context string", [{"role": "user", "content": "hi"}]]
    conts = [" continuation", " x", "reply text"]
    scored = tiny_engine.score(ctxs, conts, entropy=True, top_logprobs=3)
    for ctx, cont, s in zip(ctxs, conts, scored):
        c_ids = tiny_engine.encode(ctx)
        t_ids = tiny_engine.tokenizer(cont, add_special_tokens=False).input_ids
        logp = _manual_logp(tiny_engine, c_ids + t_ids)[len(c_ids) - 1 : -1]
        want = logp.gather(-1, torch.tensor(t_ids)[:, None])[:, 0]
        assert s.token_ids == t_ids
        assert torch.allclose(torch.tensor(s.logprobs), want, atol=1e-4)
        assert torch.allclose(torch.tensor(s.entropies), -(logp.exp() * logp).sum(-1), atol=1e-4)
        vals, ids = logp.topk(3, dim=-1)  # the 3 most likely tokens at each position, best first
        assert [list(t) for t in s.top_logprobs] == ids.tolist()
        assert torch.allclose(torch.tensor([list(t.values()) for t in s.top_logprobs]), vals, atol=1e-4)
    assert tiny_engine.score(ctxs[:1], conts[:1])[0].top_logprobs is None  # not asked, not computed


def test_score_nested_contexts_packed(tiny_engine):
    """Contexts that are prefixes of one another (a trajectory after each turn) are scored in one packed pass,
    with the same logprobs as each row scored on its own, and fewer tokens through the model."""
    trunk = tiny_engine.encode("a trajectory with several turns and tool results in it")
    ctxs = [trunk[:5], trunk[:12], trunk, trunk[:12], [7, 8, 9]]  # four nest, one stands alone
    conts = [[40, 41, 42], [43], [44, 45], [], [46, 47]]
    plain = tiny_engine.variant(share_prefix=False)
    before = tiny_engine.scored_tokens
    got = tiny_engine.score(ctxs, conts, entropy=True, top_logprobs=2)
    want = plain.score(ctxs, conts, entropy=True, top_logprobs=2)
    for g, w in zip(got, want):
        assert g.token_ids == w.token_ids
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)
        assert [list(t) for t in g.top_logprobs] == [list(t) for t in w.top_logprobs]
        assert g.entropies == pytest.approx(w.entropies, abs=1e-4)
    # the trunk once, then the continuation tokens fed after it (a continuation's last token is only predicted),
    # and the lone row in full
    assert tiny_engine.scored_tokens - before == len(trunk) + 3 + 5
    # the one-pass packed form (models whose sliding-window layers cannot share a cache) gives the same values
    from agentkit.engines.packed import group_trunks

    packed: list = [None] * len(ctxs)
    tiny_engine._score_packed([t for t in group_trunks(ctxs, conts) if len(t.rows) > 1], (True, 2), packed)
    for g, w in zip(packed[:4], want[:4]):
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)
        assert [list(t) for t in g.top_logprobs] == [list(t) for t in w.top_logprobs]
        assert g.entropies == pytest.approx(w.entropies, abs=1e-4)


def test_context_limit(tiny_engine):
    with pytest.raises(ValueError, match="context"):
        tiny_engine.generate([[1] * (tiny_engine.max_model_len + 1)], SamplingParams(max_tokens=1))


def test_more_sequences_than_batch(tiny_engine):
    # 5 prompts x n=3 = 15 sequences over micro-batches of 8
    out = tiny_engine.generate([f"p{i}" for i in range(5)], SamplingParams(n=3, max_tokens=4, seed=0))
    assert [len(x) for x in out] == [3] * 5 and all(c is not None for x in out for c in x)


def test_inverse_cdf_sampling_distribution():
    probs = torch.tensor([[0.5, 0.3, 0.2, 0.0] + [0.0] * 600])
    g = torch.Generator().manual_seed(0)
    draws = _invert_cdf(probs.expand(20000, -1).contiguous(), torch.rand(20000, 1, dtype=torch.float64, generator=g))
    freq = torch.bincount(draws, minlength=4)[:4].double() / 20000
    assert torch.allclose(freq, torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64), atol=0.015)


def test_filter_logits_topk():
    x = torch.log(torch.tensor([[0.1, 0.4, 0.3, 0.2]]))
    assert filter_logits(x, top_k=2).isinf().tolist() == [[True, False, False, True]]
    assert math.isclose(filter_logits(x, top_p=0.65).softmax(-1)[0, 1].item(), 0.4 / 0.7, rel_tol=1e-5)


def test_prefix_cache_continuation_matches_fresh_encoding():
    from agentkit.engines.hf import HFEngine

    cached = HFEngine("tiny-random", max_batch_size=8)
    fresh = HFEngine(cached.model, cached.tokenizer, prefix_cache_mb=0)
    greedy = SamplingParams(max_tokens=10, temperature=0, ignore_eos=True, entropy=True)
    prompts = [cached.encode(CHAT), cached.encode("a different, longer first prompt")]
    first = cached.generate(prompts, greedy)
    tool = cached.tokenizer("\n<result>\n42\n</result>\n", add_special_tokens=False).input_ids
    nxt = [p + c[0].token_ids + tool for p, c in zip(prompts, first)] + [cached.encode("unrelated")]
    hits, reused = cached.prefix_cache.hits, cached.prefix_cache.reused_tokens
    got = cached.generate(nxt, greedy)
    assert cached.prefix_cache.hits - hits == 2  # both continuations started from stored keys/values
    assert cached.prefix_cache.reused_tokens - reused == sum(len(p) + 10 - 1 for p in prompts)
    want = fresh.generate(nxt, greedy)
    for g, w in zip(got, want):
        assert g[0].token_ids == w[0].token_ids
        assert g[0].logprobs == pytest.approx(w[0].logprobs, abs=1e-4)
        assert g[0].entropies == pytest.approx(w[0].entropies, abs=1e-4)


def test_prefix_cache_serves_a_branch_off_a_stored_sequence():
    """A prompt that branches off the middle of a finished sequence (Tool-Light's entropy-guided branching)
    reuses the stored keys/values cut to the shared part, and generates what a fresh encoding would."""
    from agentkit.engines.hf import HFEngine

    cached = HFEngine("tiny-random", max_batch_size=8)
    fresh = HFEngine(cached.model, cached.tokenizer, prefix_cache_mb=0)
    greedy = SamplingParams(max_tokens=10, temperature=0, ignore_eos=True, entropy=True)
    prompt = cached.encode("a prompt long enough to share more than sixteen tokens")
    (first,) = cached.generate([prompt], greedy)
    branch = prompt + first[0].token_ids[:5]
    reused = cached.prefix_cache.reused_tokens
    (got,) = cached.generate([branch], SamplingParams(max_tokens=8, temperature=1.0, seed=3, entropy=True))
    assert cached.prefix_cache.reused_tokens - reused == len(branch) - 1  # all but the token that gives logits
    (want,) = fresh.generate([branch], SamplingParams(max_tokens=8, temperature=1.0, seed=3, entropy=True))
    assert got[0].token_ids == want[0].token_ids
    assert got[0].logprobs == pytest.approx(want[0].logprobs, abs=1e-4)
    assert cached.prefix_cache.longest(cached.encode("short")) is None  # under min_shared: no partial reuse


def test_prefix_cache_is_dropped_when_weights_change():
    from agentkit.engines.hf import HFEngine

    eng = HFEngine("tiny-random", max_batch_size=4)
    eng.generate(["abc"], SamplingParams(max_tokens=4, temperature=0))
    assert eng.prefix_cache.entries
    with torch.no_grad():
        eng.model.lm_head.weight.mul_(1.0)  # an in-place update, as an optimizer step makes
    eng.generate(["xyz"], SamplingParams(max_tokens=2, temperature=0))
    assert all(k[:3] != tuple(eng.encode("abc")) for k in eng.prefix_cache.entries)


def test_streamed_deltas_add_up_to_the_text(tiny_engine):
    base = tiny_engine.generate(["stream me"], SamplingParams(max_tokens=24, temperature=0, ignore_eos=True))[0][0]
    stop = base.text[10:12]
    got: dict = {}
    outs = tiny_engine.generate(
        ["stream me", "and me"],
        SamplingParams(n=2, max_tokens=24, temperature=0, ignore_eos=True, stop=[stop]),
        on_text=lambda i, j, d: got.setdefault((i, j), []).append(d),
    )
    for i, cs in enumerate(outs):
        for j, c in enumerate(cs):
            assert "".join(got.get((i, j), [])) == c.text
    assert len(got[(1, 0)]) > 1  # it really came in pieces


def test_shared_prefix_comes_from_the_prefix_cache_on_later_calls():
    """A system prompt shared by a call's prompts is encoded once per engine, not once per call: the next call's
    common prefix starts from an earlier sequence's stored keys/values, with the same outputs."""
    from agentkit.engines.hf import HFEngine

    cached = HFEngine("tiny-random", max_batch_size=8)
    fresh = HFEngine(cached.model, cached.tokenizer, prefix_cache_mb=0)
    system = "You are a careful assistant. Think, then answer in one short line. " * 2
    greedy = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True, entropy=True)
    cached.generate([system + "first question", system + "second"], greedy)
    nxt = [system + "a new question", system + "and one more, longer question"]
    a, b = (cached.encode(p) for p in nxt)
    shared = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)  # the common prefix, in tokens
    before = cached.prefill_tokens
    got = cached.generate(nxt, greedy)
    want = fresh.generate(nxt, greedy)
    assert fresh.prefill_tokens == len(a) + len(b) - shared  # without the store: the prefix once, then each suffix
    # with it: the suffixes, plus any prefix tokens past what the first call's sequences share (here one)
    assert cached.prefill_tokens - before <= len(a) + len(b) - 2 * shared + 1
    for g, w in zip(got, want):
        assert g[0].token_ids == w[0].token_ids
        assert g[0].logprobs == pytest.approx(w[0].logprobs, abs=1e-4)


def test_cache_headroom_avoids_regrowth_and_keeps_values():
    """A cache made with headroom takes a prefill and then ``headroom`` decode steps in one buffer (no copy), and
    a stacked cache with headroom holds the same keys as one without."""
    from agentkit.engines.kv import make_cache, snapshot_row, stack_rows

    cache = make_cache(_tiny_config(), headroom=8)
    k = torch.randn(2, 2, 5, 4)
    for layer in cache.layers:
        layer.update(k, k + 1)
    ptr = cache.layers[0]._k.data_ptr()
    for _ in range(8):
        for layer in cache.layers:
            layer.update(torch.ones(2, 2, 1, 4), torch.ones(2, 2, 1, 4))
    assert cache.layers[0]._k.data_ptr() == ptr and cache.layers[0].keys.shape[-2] == 13
    assert torch.equal(cache.layers[0].keys[:, :, :5], k)
    rows = [snapshot_row(cache, r, torch.ones(13, dtype=torch.long)) for r in range(2)]
    rows[1] = [(kk[:, 3:], vv[:, 3:]) for kk, vv in rows[1]]  # a shorter second row: right-aligned, masked left
    plain, mask = stack_rows(rows, _tiny_config())
    roomy, mask2 = stack_rows(rows, _tiny_config(), headroom=6)
    assert torch.equal(mask, mask2) and mask[1].tolist() == [0] * 3 + [1] * 10
    for a, b in zip(plain.layers, roomy.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
        assert b._k.shape[-2] == 13 + 6 and torch.all(b.keys[1, :, :3] == 0)  # finite filler


def _tiny_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        hidden_size=8,
        intermediate_size=16,
        vocab_size=32,
    )


def test_draft_is_prompt_lookup():
    from agentkit.engines.hf import _draft

    assert _draft([1, 2, 3, 4], 3) == []  # nothing repeats
    assert _draft([5, 2, 9, 7, 2, 8, 3, 2], 2) == [8, 3]  # the latest occurrence of [2] wins...
    assert _draft([1, 2, 9, 3, 2, 8, 3, 1, 2], 2) == [9, 3]  # ...unless a longer n-gram ([1, 2]) occurs
    assert _draft([4, 4, 4], 5) == [4]  # a draft never reads past the end


@pytest.mark.parametrize("temperature", [0.0, 0.1])
def test_speculation_keeps_outputs(temperature):
    """Prompt-lookup drafts checked in one forward pass give the tokens one-at-a-time decoding gives: greedy, and
    seeded sampling too (each kept token is still one draw from the row's generator). The stored keys/values
    (with the holes left by rejected drafts) serve a continuation as fresh encoding would."""
    from agentkit.engines.hf import HFEngine

    spec = HFEngine("tiny-random", speculate=4, speculate_tokens=16)
    plain = HFEngine(spec.model, spec.tokenizer, speculate=0, prefix_cache_mb=0)
    params = SamplingParams(
        max_tokens=40, temperature=temperature, ignore_eos=True, entropy=True, top_logprobs=2, seed=3
    )
    prompts = [spec.encode("one two three one two three one two"), spec.encode(CHAT), spec.encode("a b a b a")]
    got, want = spec.generate(prompts, params), plain.generate(prompts, params)
    assert spec.draft_hits > 0 and spec.drafted > spec.draft_hits  # drafts were kept, and some rejected
    for g, w in zip(got, want):
        assert g[0].token_ids == w[0].token_ids and g[0].finish_reason == w[0].finish_reason
        assert g[0].logprobs == pytest.approx(w[0].logprobs, abs=1e-4)
        assert g[0].entropies == pytest.approx(w[0].entropies, abs=1e-4)
        assert list(g[0].top_logprobs[5]) == list(w[0].top_logprobs[5])
    nxt = [p + c[0].token_ids + [7, 8, 9] for p, c in zip(prompts, got)]
    greedy = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True)
    hits = spec.prefix_cache.hits
    cont = spec.generate(nxt, greedy)
    assert spec.prefix_cache.hits - hits == 3
    assert [c[0].token_ids for c in cont] == [c[0].token_ids for c in plain.generate(nxt, greedy)]


def test_speculation_stops_at_stop_strings_and_budget(tiny_engine):
    from agentkit.engines.hf import HFEngine

    spec = HFEngine(tiny_engine.model, tiny_engine.tokenizer, speculate=4)
    plain = HFEngine(tiny_engine.model, tiny_engine.tokenizer, speculate=0)
    free = plain.generate([CHAT], SamplingParams(max_tokens=30, temperature=0, ignore_eos=True))[0][0]
    stop = free.text[len(free.text) // 2 : len(free.text) // 2 + 3]
    for p in (
        SamplingParams(max_tokens=30, temperature=0, ignore_eos=True, stop=[stop]),
        SamplingParams(max_tokens=7, temperature=0, ignore_eos=True),
    ):
        g, w = spec.generate([CHAT, "x y x y"], p), plain.generate([CHAT, "x y x y"], p)
        assert [(c[0].token_ids, c[0].text, c[0].finish_reason, c[0].stop_reason) for c in g] == [
            (c[0].token_ids, c[0].text, c[0].finish_reason, c[0].stop_reason) for c in w
        ]


def test_speculation_backs_off_when_drafts_are_not_kept():
    """At temperature 1 the tiny random model almost never samples a draft token: each row stops drafting after
    a few misses instead of paying for drafts all the way, and the samples are still one-at-a-time decoding's."""
    from agentkit.engines.hf import HFEngine

    spec = HFEngine("tiny-random", speculate=3)
    plain = HFEngine(spec.model, spec.tokenizer, speculate=0)
    params = SamplingParams(max_tokens=60, temperature=1.0, ignore_eos=True, seed=1)
    prompts = ["one two three one two three", "a b a b a b"]
    got, want = spec.generate(prompts, params), plain.generate(prompts, params)
    assert [g[0].token_ids for g in got] == [w[0].token_ids for w in want]
    assert 0 < spec.drafted <= 2 * 12 and spec.draft_hits <= 2


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_constrained_rows_with_speculation(temperature):
    """A row's grammar advances only on the tokens it keeps, so drafts checked in one forward pass give the
    constrained tokens one-at-a-time decoding gives; a grammar's end ends the row even with ``ignore_eos``."""
    from agentkit.engines.hf import HFEngine
    from agentkit.engines.structured import Constraint
    from agentkit.testing.conformance import SCHEMA

    spec = HFEngine("tiny-random", speculate=3)
    plain = HFEngine(spec.model, spec.tokenizer, speculate=0)
    cons = [Constraint(regex="(ab ){5}[0-9]{3}"), Constraint.schema(SCHEMA)]
    for prompts, cs in ((["ab ab ab ab "], cons[:1]), (["ab ab ab ab ", "x"], cons)):
        p = SamplingParams(max_tokens=48, temperature=temperature, seed=4, ignore_eos=True, constraints=cs)
        got, want = spec.generate(prompts, p), plain.generate(prompts, p)
        assert [(c[0].token_ids, c[0].finish_reason) for c in got] == [
            (c[0].token_ids, c[0].finish_reason) for c in want
        ]
        assert all(c[0].finish_reason == "stop" for c in got)
    assert spec.draft_hits > 0  # the forced "ab " tokens were drafted and kept


def test_a_job_run_step_by_step_is_generate_and_cancels_per_prompt(tiny_engine):
    """``start`` runs ``generate`` one forward pass at a time: the same completions; cancelled prompts end at the
    next step with finish_reason "abort" while the others run to their end."""
    params = SamplingParams(n=2, max_tokens=12, seed=3, temperature=1.0, ignore_eos=True)
    prompts = ["one", "two", "three"]
    job = tiny_engine.start(prompts, params)
    steps = 0
    while not job.step():
        steps += 1
    assert steps >= 12  # a prefill and a step per token (at most; drafts may take several)
    want = tiny_engine.generate(prompts, params)
    assert [[c.token_ids for c in cs] for cs in job.result()] == [[c.token_ids for c in cs] for cs in want]
    job = tiny_engine.start(prompts, params)
    for _ in range(4):
        job.step()
    job.cancel([1])
    while not job.step():
        pass
    out = job.result()
    assert {c.finish_reason for c in out[1]} == {"abort"} and all(len(c.token_ids) < 12 for c in out[1])
    assert all(c.finish_reason == "length" and len(c.token_ids) == 12 for i in (0, 2) for c in out[i])


def test_bad_token_ids_are_refused_before_any_step(tiny_engine):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tiny_engine.start([[1, 2, 10**6]], SamplingParams(max_tokens=1))
