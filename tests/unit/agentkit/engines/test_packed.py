"""Trunk grouping and the packed mask: each branch sees its context's part of the trunk and itself, causally."""

import torch

from agentkit.engines.packed import Trunk, budget_batches, group_trunks, pack


def test_group_trunks_chains_prefixes():
    ctxs = [[1, 2, 3], [1], [1, 2], [4], [1, 5], [1, 2]]
    trunks = group_trunks(ctxs, [[9]] * len(ctxs))
    assert [t.rows for t in trunks] == [[1, 2, 5, 0], [4], [3]]
    assert trunks[0].ids == [1, 2, 3] and trunks[0].ctx_lens == [1, 2, 2, 3]


def test_pack_positions_mask_and_reads():
    t = Trunk(ids=[10, 11, 12], rows=[0, 1], ctx_lens=[1, 3], conts=[[20, 21], [22]])
    ids, pos, mask, sliding, reads = pack([t], pad_id=0)
    assert ids.tolist() == [[10, 11, 12, 20, 21, 22]]
    assert pos.tolist() == [[0, 1, 2, 1, 2, 3]]
    m = mask[0, 0].int().tolist()
    assert m[0] == [1, 0, 0, 0, 0, 0] and m[2] == [1, 1, 1, 0, 0, 0]  # the trunk is causal
    assert m[3] == [1, 0, 0, 1, 0, 0] and m[4] == [1, 0, 0, 1, 1, 0]  # branch 0 sees trunk[:1] and itself
    assert m[5] == [1, 1, 1, 0, 0, 1]  # branch 1 sees the whole trunk, not branch 0
    assert reads == [[[0, 3], [2]]]  # c0[0] from trunk pos 0, c0[1] from slot 3; c1[0] from trunk pos 2
    assert sliding is None


def test_pack_pads_and_slides():
    a = Trunk([1, 2, 3, 4], [0], [4], [[5]])
    b = Trunk([6], [1], [1], [[7]])
    ids, pos, mask, sliding, reads = pack([a, b], pad_id=0, window=2)
    assert ids.shape == (2, 5) and reads[1] == [[5 + 0]]
    assert mask[1, 0, 4].tolist() == [False, False, False, False, True]  # a padding slot sees only itself
    assert sliding[0, 0, 3].tolist() == [False, False, True, True, False]  # keys 2+ positions back are hidden
    assert torch.equal(sliding[1, 0], mask[1, 0])


def test_budget_batches():
    trunks = [Trunk([1] * n, [i], [n], [[2]]) for i, n in enumerate([10, 3, 8, 2])]
    batches = budget_batches(trunks, max_tokens=20, max_rows=8, max_waste=0.5)
    assert [[t.rows[0] for t in b] for b in batches] == [[0], [2, 1], [3]]
    same = [Trunk([1] * 10, [i], [10], [[2]]) for i in range(3)]
    assert [len(b) for b in budget_batches(same + trunks[1:2], 100, 8)] == [3, 1]  # 4 tokens of 14: too much padding
