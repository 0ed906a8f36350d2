"""Engine protocol conformance: the checks every engine passes, against a reference HFEngine on the same model.

Each check takes the engine under test and a reference (``HFEngine``, exact fp32) and asserts what the protocol
promises (``agentkit.engines.base.Engine``). Engines differ in their random streams (vLLM's seeded sampler is
not ours), so sampled text is compared within an engine (reproducible per seed, samples differ across seeds),
and across engines only where the protocol fixes the answer: tokens, greedy decoding, logprobs of given tokens.
``tol`` is the logprob tolerance (1e-4 for an fp32 engine, ~0.1 for bf16).
"""

from __future__ import annotations

import json
import math
import re

import jsonschema

from agentkit.engines.base import SamplingParams
from agentkit.engines.structured import Constraint

CHAT = [{"role": "user", "content": "What is the capital of France?"}]
TEXTS = ["The capital of France is", "1, 2, 3, 4,"]


def check_tokens(engine, ref) -> None:
    for t in TEXTS:
        assert engine.encode(t) == ref.encode(t)
        assert engine.tokenize(t) == ref.tokenize(t)
        assert engine.decode(ref.tokenize(t)) == t
    assert engine.encode(CHAT) == ref.encode(CHAT)
    ids = ref.tokenize(TEXTS[0])
    assert engine.token_strings(ids) == ref.token_strings(ids)
    assert engine.encode(ids) == ids  # token ids pass through
    assert engine.max_model_len > 0 and isinstance(engine.default_stop, list)


def check_greedy(engine, ref, tol: float, tokens: int = 8) -> None:
    """Greedy tokens equal the reference's, logprobs within ``tol``, up to the first near tie of the reference
    (top two within ``2·tol``: a lower-precision engine may rightly take either, e.g. SmolLM2's first answer
    token in bf16), after which the paths may part."""
    p = SamplingParams(max_tokens=tokens, temperature=0, ignore_eos=True)
    compared = 0
    for prompt in (CHAT, TEXTS[0], TEXTS[1]):
        (got,) = engine.generate([prompt], p)[0]
        (want,) = ref.generate(
            [prompt], SamplingParams(max_tokens=tokens, temperature=0, ignore_eos=True, top_logprobs=2)
        )[0]
        margins = [a - b for a, b in (sorted(t.values(), reverse=True)[:2] for t in want.top_logprobs)]
        upto = next((i for i, m in enumerate(margins) if m < 2 * tol), tokens)
        assert got.token_ids[:upto] == want.token_ids[:upto], (got.text, want.text)
        if upto:
            assert max(abs(a - b) for a, b in zip(got.logprobs[:upto], want.logprobs[:upto])) <= tol
        assert got.prompt_tokens == len(ref.encode(prompt)) and got.finish_reason == "length"
        compared += upto
    assert compared >= tokens  # at least one prompt's worth of tokens was compared


def check_n_and_seeds(engine) -> None:
    p = SamplingParams(n=3, max_tokens=10, temperature=1.0, seed=7, ignore_eos=True)
    a = engine.generate([TEXTS[0], TEXTS[1]], p)
    assert [len(x) for x in a] == [3, 3]
    assert len({tuple(c.token_ids) for c in a[0]}) > 1  # the n samples differ
    b = engine.generate([TEXTS[0], TEXTS[1]], p)
    assert [[c.token_ids for c in x] for x in a] == [[c.token_ids for c in x] for x in b]  # reproducible
    other = engine.generate([TEXTS[0]], SamplingParams(n=3, max_tokens=10, temperature=1.0, seed=8, ignore_eos=True))
    assert [c.token_ids for c in other[0]] != [c.token_ids for c in a[0]]
    per = SamplingParams(max_tokens=10, temperature=1.0, seeds=[1, 2, 1], ignore_eos=True)
    x, y, z = (r[0].token_ids for r in engine.generate([TEXTS[0]] * 3, per))
    assert x == z and x != y  # equal prompts with their own seeds


def check_stop(engine) -> None:
    """A stop string taken from the greedy text ends generation there, cut (or kept with include_stop_str)."""
    base = engine.generate([TEXTS[1]], SamplingParams(max_tokens=16, temperature=0, ignore_eos=True))[0][0]
    text = base.text
    stop = next(
        text[i : i + n]
        for n in (2, 1)
        for i in range(2, len(text) - n)
        if text[i : i + n].strip() and "\ufffd" not in text[i : i + n] and text.find(text[i : i + n]) == i
    )
    cut = text.find(stop)
    c = engine.generate([TEXTS[1]], SamplingParams(max_tokens=16, temperature=0, ignore_eos=True, stop=[stop]))[0][0]
    assert c.finish_reason == "stop" and c.text == text[:cut], (stop, c.text, text)
    inc = engine.generate(
        [TEXTS[1]],
        SamplingParams(max_tokens=16, temperature=0, ignore_eos=True, stop=[stop], include_stop_str_in_output=True),
    )[0][0]
    assert inc.text == text[:cut] + stop


def check_logprobs_and_entropy(engine, ref, tol: float, top: int = 5) -> dict[str, float]:
    """Sampled tokens' logprobs equal the reference's teacher-forced ones; top-k alternatives are the k most
    likely, best first; the entropy estimate is at most the exact entropy. Returns the estimate's mean absolute
    and relative error against the exact entropy (engines that estimate from the top-k document these)."""
    p = SamplingParams(max_tokens=12, temperature=1.0, seed=3, entropy=True, top_logprobs=top, ignore_eos=True)
    (c,) = engine.generate([CHAT], p)[0]
    (s,) = ref.score([CHAT], [c.token_ids], entropy=True)
    assert max(abs(a - b) for a, b in zip(c.logprobs, s.logprobs)) <= tol
    assert c.top_logprobs is not None and len(c.top_logprobs) == len(c.token_ids)
    for alts, lp in zip(c.top_logprobs, c.logprobs):
        vals = list(alts.values())
        assert len(vals) == top and vals == sorted(vals, reverse=True) and vals[0] >= lp - tol
    assert all(e <= x + 10 * tol for e, x in zip(c.entropies, s.entropies))
    err = [abs(e - x) for e, x in zip(c.entropies, s.entropies)]
    rel = [d / x for d, x in zip(err, s.entropies) if x > 1e-6]
    return {"entropy_abs_error": sum(err) / len(err), "entropy_rel_error": sum(rel) / max(1, len(rel))}


def check_score(engine, ref, tol: float, top: int = 3) -> None:
    """Teacher-forced logprobs equal the reference's; asked for ``top``, each position carries the k most likely
    tokens, best first, with the reference's logprobs (ids are not compared: near-ties may swap)."""
    ctxs, conts = [TEXTS[0], CHAT], [" Paris, a city.", "Paris."]
    for got, want in zip(engine.score(ctxs, conts), ref.score(ctxs, conts)):
        assert got.token_ids == want.token_ids
        assert max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs)) <= tol
        assert all(math.isfinite(x) and x <= 0 for x in got.logprobs)
    for got, want in zip(engine.score(ctxs, conts, top_logprobs=top), ref.score(ctxs, conts, top_logprobs=top)):
        assert got.top_logprobs is not None and len(got.top_logprobs) == len(got.token_ids)
        for alts, ref_alts, lp in zip(got.top_logprobs, want.top_logprobs, got.logprobs):
            vals = list(alts.values())
            assert len(vals) == top and vals == sorted(vals, reverse=True) and vals[0] >= lp - tol
            assert max(abs(a - b) for a, b in zip(vals, ref_alts.values())) <= tol


def check_stats(engine) -> None:
    before = engine.stats()
    engine.generate([TEXTS[0]], SamplingParams(max_tokens=3, temperature=0, ignore_eos=True))
    after = engine.stats()
    assert after["requests"] == before["requests"] + 1
    assert after["completion_tokens"] - before["completion_tokens"] == 3
    assert after["prompt_tokens"] - before["prompt_tokens"] == len(engine.encode(TEXTS[0]))


# A schema whose every completion is short (a random model finishes it too), a regex and a choice.
SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "size": {"enum": ["small", "large"]},
        "n": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["ok", "size", "n"],
}
REGEX = r"[0-9]{3}-[a-z]{2}"
CHOICES = ("yes", "no", "maybe")


def check_structured(engine, ref=None, tol: float = 1e-4, batch_invariant: bool = True) -> None:
    """Per-prompt constraints in one call: every constrained sample matches its constraint and ends when the
    grammar does; constraints do not leak across rows. With ``batch_invariant`` (fp32 engines) the free prompt's
    samples are those it gets alone; without (bf16, whose kernels round differently as the batch changes shape, so
    a seeded sample may part from its lone twin) they satisfy none of the other rows' constraints. With ``ref``,
    constrained tokens' logprobs are the model's own unconstrained ones (HFEngine's rule)."""
    cons = [Constraint.schema(SCHEMA), Constraint(regex=REGEX), Constraint(choice=CHOICES), None]
    prompts = [CHAT, TEXTS[0], TEXTS[1], TEXTS[0]]
    p = SamplingParams(n=2, max_tokens=64, temperature=1.0, seed=5, constraints=cons)
    obj, reg, cho, free = engine.generate(prompts, p)
    for c in obj:
        jsonschema.validate(json.loads(c.text), SCHEMA)
        assert c.finish_reason == "stop"
    assert all(re.fullmatch(REGEX, c.text) for c in reg), [c.text for c in reg]
    assert all(c.text in CHOICES for c in cho), [c.text for c in cho]
    if batch_invariant:
        alone = engine.generate([TEXTS[0]], SamplingParams(n=2, max_tokens=64, temperature=1.0, seed=5))[0]
        assert [c.token_ids for c in free] == [c.token_ids for c in alone]
    for c in free:  # a leaked constraint would make the free text one of these
        assert c.text not in CHOICES and not re.fullmatch(REGEX, c.text) and not _is_object(c.text), c.text
    one = engine.generate([TEXTS[0]], SamplingParams(max_tokens=16, temperature=0, constraint=cons[1]))[0][0]
    assert re.fullmatch(REGEX, one.text)
    if ref is not None:
        for prompt, c in ((CHAT, obj[0]), (TEXTS[0], reg[0])):
            (s,) = ref.score([prompt], [c.token_ids])
            assert max(abs(a - b) for a, b in zip(c.logprobs, s.logprobs)) <= tol


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def check_all(engine, ref, tol: float, batch_invariant: bool = True) -> dict[str, float]:
    """Every check above; returns the entropy estimate's errors. ``batch_invariant``: see ``check_structured``."""
    check_tokens(engine, ref)
    check_greedy(engine, ref, tol)
    check_n_and_seeds(engine)
    check_stop(engine)
    check_score(engine, ref, tol)
    check_stats(engine)
    check_structured(engine, batch_invariant=batch_invariant)
    return check_logprobs_and_entropy(engine, ref, tol)
