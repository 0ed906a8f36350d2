"""The length groups of the loss's forward pass: the dynamic programme against every cut by hand and by brute
force; the trimmed slices against a hand-made batch."""

import itertools
import random

import torch

from agentkit.rl.buckets import bucketed_logps, length_buckets


def _cost(groups, prompts, completions, forward_cost):
    return sum(len(g) * (max(prompts[i] for i in g) + max(completions[i] for i in g)) + forward_cost for g in groups)


def test_hand_computed_cut():
    # completions 10, 20, 300, 310 under prompts of 100: {10, 20} and {300, 310} cost 2·120 + 2·410 + 2·50 = 1160,
    # one group 4·410 + 50 = 1690, four groups 110 + 120 + 400 + 410 + 4·50 = 1240
    groups = length_buckets([100] * 4, [300, 10, 310, 20], forward_cost=50)
    assert groups == [[1, 3], [0, 2]]
    assert _cost(groups, [100] * 4, [300, 10, 310, 20], 50) == 1160


def test_cut_is_the_cheapest_of_every_contiguous_cut():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 7)
        prompts = [rng.randint(1, 60) for _ in range(n)]
        completions = [rng.randint(0, 200) for _ in range(n)]
        forward_cost = rng.choice([0, 16, 128, 1000])
        order = sorted(range(n), key=lambda i: (completions[i], prompts[i]))
        best = min(
            _cost([order[a:b] for a, b in zip((0, *cut), (*cut, n))], prompts, completions, forward_cost)
            for k in range(n)
            for cut in itertools.combinations(range(1, n), k)
        )
        groups = length_buckets(prompts, completions, forward_cost)
        assert sorted(i for g in groups for i in g) == list(range(n))
        assert _cost(groups, prompts, completions, forward_cost) == best


def test_slices_and_order():
    # prompt width 3, completion width 4; row 0: prompt 2 + completion 1, row 1: prompt 3 + completion 4,
    # row 2: prompt 1 + completion 0 (nothing to score)
    ids = torch.arange(21).reshape(3, 7)
    mask = torch.tensor([[0, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1], [0, 0, 1, 0, 0, 0, 0]])
    seen = []

    def call(i, m, keep):
        seen.append((i.tolist(), m.tolist(), keep))
        return i[:, -keep:].float(), None

    # forward cost 5: rows 2 and 0 together (2·3 + 5 < 1 + 3 + 2·5), row 1 alone (7 + 6 + 2·5 < 3·7 + 5)
    logps, ent = bucketed_logps(call, ids, mask, 4, forward_cost=5)
    assert ent is None
    assert seen == [
        ([[15, 16, 17], [1, 2, 3]], [[0, 1, 0], [1, 1, 1]], 1),  # rows 2, 0: prompts 2 wide, 1 column kept
        ([[7, 8, 9, 10, 11, 12, 13]], [[1] * 7], 4),
    ]
    assert logps.tolist() == [[3, 0, 0, 0], [10, 11, 12, 13], [17, 0, 0, 0]]
