"""Grow-and-refine with the real MiniLM and SmolLM2's tokenizer: near-duplicates merge (numbers guard them), the
token budget holds after eviction in the right order, embeddings are cached, retrieval finds the right bullet."""

import random

import pytest
from transformers import AutoTokenizer

from agentkit.ace.deltas import Delta, apply_batch
from agentkit.ace.playbook import Playbook
from agentkit.ace.refine import (
    EmbeddingCache,
    RefineConfig,
    Refiner,
    TokenCounter,
    duplicate_groups,
    eviction_deltas,
    merge_deltas,
    retrieve,
    touched,
)
from agentkit.ace.store import PlaybookStore
from agentkit.models import resolve


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(resolve("smollm2-135m")))


@pytest.fixture(scope="module")
def cache():
    return EmbeddingCache()


def count(tok):
    return lambda text: len(tok(text, add_special_tokens=False).input_ids)


def playbook(*contents: str) -> Playbook:
    pb = Playbook()
    for c in contents:  # one batch each, so ids follow the arguments' order
        apply_batch(pb, [Delta("ADD", section="OTHERS", content=c)])
    return pb


def test_paraphrases_merge_and_distinct_numbers_do_not(cache):
    pb = playbook(
        "A foot is 12 inches.",
        "One mile is about 1.609 kilometres.",
        "Use the search tool for questions about people.",
        "There are twelve inches in one foot.",
        "One nautical mile is 1.852 kilometres.",  # cosine 0.82 with the mile, but another number
    )
    assert duplicate_groups(pb, cache, 0.70) == [["misc-00001", "misc-00004"]]
    assert duplicate_groups(pb, cache, 0.70, among=["misc-00003"]) == []
    pb.bullets["misc-00004"].helpful = 2
    (merge,) = merge_deltas(pb, [["misc-00001", "misc-00004"]])
    assert merge == Delta("MERGE", ids=("misc-00001", "misc-00004"), content="There are twelve inches in one foot.")


def test_token_count_is_an_upper_bound(tok):
    r = random.Random(0)
    words = ["Multiply", "first;", "1,000 g", "::", "[x]", "été", "\u00a0", "answer", "tool", "=", "kg."]
    counter = TokenCounter(count(tok))
    for _ in range(30):
        pb = playbook(*{" ".join(r.choices(words, k=r.randint(1, 12))) for _ in range(r.randint(0, 8))})
        assert counter.playbook(pb) >= count(tok)(pb.to_text())


def test_eviction_order_and_the_budget_holds(tok):
    pb = playbook("good advice that helped", "bad advice", "old unused", "new unused", "mixed advice")
    b = pb.bullets
    b["misc-00001"].helpful = 5
    b["misc-00002"].harmful, b["misc-00002"].helpful = 3, 1
    b["misc-00005"].helpful, b["misc-00005"].used = 1, 4
    counter = TokenCounter(count(tok))
    total = counter.playbook(pb)
    assert eviction_deltas(pb, total, counter) == []
    order = [d.id for d in eviction_deltas(pb, 1, counter)]
    assert order == ["misc-00002", "misc-00003", "misc-00004", "misc-00005", "misc-00001"]
    cut = eviction_deltas(pb, total - 1, counter)
    assert [d.id for d in cut] == ["misc-00002"]
    apply_batch(pb, cut)
    assert count(tok)(pb.to_text()) <= counter.playbook(pb) <= total - 1


def test_refiner_on_a_store_proactive_and_lazy(tmp_path, tok, cache):
    store = PlaybookStore.create(tmp_path / "pb.json")
    refiner = Refiner(RefineConfig(budget_tokens=10_000), count(tok), cache)
    res = store.commit([Delta("ADD", section="OTHERS", content="A foot is 12 inches.")])
    assert refiner.refine(store, touched(res))["merged"] == 0
    res = store.commit([Delta("ADD", section="OTHERS", content="There are twelve inches in one foot.")])
    out = refiner.refine(store, touched(res))
    assert out["merged"] == 1 and len(store.playbook) == 1
    assert [r["source"] for r in store.history()] == ["init", "curator", "curator", "dedup"]

    lazy = Refiner(RefineConfig(budget_tokens=10_000, dedup="lazy"), count(tok), cache)
    res = store.commit([Delta("ADD", section="OTHERS", content="A foot equals 12 inches.")])
    assert lazy.refine(store, touched(res))["merged"] == 0 and len(store.playbook) == 2  # under budget: no pass
    budget = out["tokens"] + 5  # one bullet's worth: the duplicate puts it over
    out = Refiner(RefineConfig(budget_tokens=budget, dedup="lazy"), count(tok), cache).refine(store, [])
    assert out["merged"] == 1 and out["evicted"] == 0 and out["tokens"] <= budget
    store.commit([Delta("ADD", section="OTHERS", content=f"Rule {i}: check the units twice.") for i in range(6)])
    tight = Refiner(RefineConfig(budget_tokens=budget, dedup="off"), count(tok), cache)
    out = tight.refine(store, [])
    assert out["evicted"] > 0 and out["tokens"] == tight.tokens.playbook(store.playbook) <= budget
    store.verify()


def test_cache_embeds_each_text_once_and_survives_a_save(tmp_path, cache):
    n = len(cache.rows)
    v = cache.vectors(["alpha rule", "beta rule", "alpha rule"])
    assert len(cache.rows) == n + 2 and v.shape[0] == 3 and abs(float(v[0] @ v[2]) - 1) < 1e-6
    cache.save(tmp_path / "e.npz")
    again = EmbeddingCache.load(tmp_path / "e.npz")
    assert again.rows == cache.rows and (again.vectors(["beta rule"]) == cache.vectors(["beta rule"])).all()
    assert EmbeddingCache.load(tmp_path / "e.npz", embedder="other").rows == {}
    assert EmbeddingCache.load(tmp_path / "missing.npz").rows == {}


def test_retrieve_top_k(cache):
    pb = playbook(
        "Convert miles to kilometres by multiplying by 1.609.", "Capitalise names.", "Print results in python."
    )
    (hit,) = retrieve(pb, cache, ["How many kilometres is 5 miles?"], 1)
    assert hit == {"misc-00001"}
    assert retrieve(pb, cache, ["q"], 5) == [set(pb.bullets)]


def test_the_default_threshold_is_the_calibrated_one():
    from agentkit.ace.calibration import calibrate, choose

    rows = calibrate()
    best = choose(rows)
    assert best["threshold"] == RefineConfig().dedup_threshold == 0.70
    assert best["precision"] >= 0.8 and best["recall"] == 0.5  # the table in docs/ace.md
    official = next(r for r in rows if r["threshold"] == 0.9)
    assert official["recall"] == 0.0 and official["merged_distinct"] == 2


def _row_loop_groups(pb, cache, threshold, among=None):
    """The greedy grouping as the earlier row-by-row loop wrote it (the reference the array form must equal)."""
    from agentkit.ace.playbook import id_number
    from agentkit.ace.refine import same_numbers

    bullets = sorted(pb.bullets.values(), key=lambda b: (id_number(b.id), b.id))
    E = cache.vectors([b.content for b in bullets])
    free = [True] * len(bullets)
    ids = [b.id for b in bullets]
    seeds = range(len(bullets)) if among is None else sorted(ids.index(i) for i in among if i in ids)
    groups = []
    for i in seeds:
        if not free[i]:
            continue
        hit = [
            j
            for j in range(len(bullets))
            if j != i and free[j] and E[i] @ E[j] >= threshold and same_numbers(bullets[i].content, bullets[j].content)
        ]
        if hit:
            group = sorted([i, *hit])
            for j in group:
                free[j] = False
            groups.append([ids[j] for j in group])
    return groups


@pytest.mark.parametrize("chunk", [1, 7, 1024])
def test_array_grouping_equals_the_row_loop(chunk):
    """Planted clusters of near-copies (some stating other numbers) among random directions: the chunked array
    form gives the row loop's groups exactly, for all seeds and for a batch's seeds."""
    import numpy as np

    from agentkit.ace.refine import EmbeddingCache as Cache

    rng = np.random.default_rng(0)
    contents, vectors = [], []
    for c in range(40):
        centre = rng.normal(size=32)
        for k in range(int(rng.integers(1, 5))):
            name = "".join(chr(97 + int(d)) for d in f"{c}{k}")  # no digits: only the limits are numbers
            contents.append(f"rule {name}" + (f" limit {rng.integers(0, 2)}" if k % 2 else ""))
            vectors.append(centre + 0.4 * rng.normal(size=32))
    order = rng.permutation(len(contents))
    contents, vectors = [contents[i] for i in order], np.stack([vectors[i] for i in order])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    fake = Cache()
    fake.rows = {Cache.key(t): i for i, t in enumerate(contents)}
    fake.matrix = vectors.astype(np.float32)
    pb = playbook(*contents)
    among = [b for i, b in enumerate(pb.bullets) if i % 3 == 0]
    for seeds in (None, among):
        want = _row_loop_groups(pb, fake, 0.8, seeds)
        assert sum(len(g) for g in want) > 20  # the clusters do merge
        assert duplicate_groups(pb, fake, 0.8, seeds, chunk=chunk) == want
