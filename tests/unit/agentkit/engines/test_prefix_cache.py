"""agentkit.engines.prefix_cache: the longest common prefix is found, cut to the shared part, and the store stays
within its budget by least-recent use."""

import torch

from agentkit.engines.prefix_cache import PrefixCache


def _kv(n, value=1.0, layers=2):
    return [(torch.full((2, n, 4), value), torch.full((2, n, 4), -value)) for _ in range(layers)]


def test_a_continuation_reuses_the_whole_stored_sequence():
    cache = PrefixCache()
    stored = list(range(40))
    cache.put(stored, _kv(40))
    hit = cache.longest(stored + [99, 100], min_shared=16)
    assert hit is not None
    ids, kv = hit
    assert list(ids) == stored and kv[0][0].shape == (2, 40, 4)
    assert (cache.hits, cache.misses, cache.reused_tokens) == (1, 0, 40)


def test_a_branch_gets_the_keys_cut_to_the_shared_prefix():
    cache = PrefixCache()
    cache.put(list(range(40)), _kv(40, 1.0))
    cache.put(list(range(30)) + [7] * 5, _kv(35, 2.0))
    ids, kv = cache.longest(list(range(25)) + [500, 501])  # shares 25 with both: the first stored wins the tie
    assert list(ids) == list(range(25)) and kv[1][0].shape == (2, 25, 4) and kv[0][0][0, 0, 0] == 1.0
    ids, kv = cache.longest(list(range(30)) + [7, 7, 1])  # shares 32 with the second
    assert len(ids) == 32 and kv[0][0][0, 0, 0] == 2.0


def test_one_token_is_always_left_to_encode_and_short_overlaps_miss():
    cache = PrefixCache()
    cache.put(list(range(20)), _kv(20))
    ids, kv = cache.longest(list(range(20)))  # the same sequence again: its last token is encoded for the logits
    assert len(ids) == 19 and kv[0][0].shape[1] == 19
    assert cache.longest(list(range(10)) + [55] * 20, min_shared=16) is None
    assert cache.misses == 1


def test_least_recently_used_entries_go_first_when_over_budget():
    per_entry = sum(k.numel() * 4 + v.numel() * 4 for k, v in _kv(64))  # float32
    cache = PrefixCache(budget_mb=1)
    cache.budget = 2 * per_entry  # room for two sequences
    a, b, c = ([i] * 64 for i in (1, 2, 3))
    cache.put(a, _kv(64))
    cache.put(b, _kv(64))
    assert cache.longest(a + [0]) is not None  # a is now the most recent
    cache.put(c, _kv(64))
    assert set(cache.entries) == {tuple(a), tuple(c)} and cache.bytes == 2 * per_entry
    cache.put(list(range(1000)), _kv(1000))  # larger than the whole budget: not stored, nothing evicted
    assert set(cache.entries) == {tuple(a), tuple(c)}
    cache.clear()
    assert not cache.entries and cache.bytes == 0 and cache.longest(a + [0]) is None
