"""Astraea's core, checked by hand: a 100 % budget is the full sampler bit for bit, each step recomputes
round(b_t · N) tokens, a sparse step attends to every cached key, and the budget search keeps the mean."""

import numpy as np
import pytest
import torch

from agentkit.extras.data import moving_fashion_mnist
from agentkit.extras.nets import euler_sample
from agentkit.extras.video.astraea.model import Schedule, VideoDiT, genetic_budgets, repair, sample


def _net(seed: int = 0) -> VideoDiT:
    torch.manual_seed(seed)
    net = VideoDiT(frames=3, size=8, patch=2, dim=16, depth=2, heads=2).eval()
    for p in net.parameters():  # adaLN-Zero starts at the identity: give every weight a value
        torch.nn.init.normal_(p, std=0.2)
    return net


def test_a_full_budget_reproduces_the_full_sample_exactly():
    net, noise = _net(), torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    full = euler_sample(net, noise, 5)
    x, counts = sample(net, noise, Schedule([1.0] * 5))
    assert torch.equal(x, full)
    assert counts == [net.tokens] * 5


def test_each_step_recomputes_round_b_times_n_tokens(monkeypatch):
    net, noise = _net(), torch.randn(2, 3, 8, 8)
    seen = []
    compute = net.compute
    monkeypatch.setattr(net, "compute", lambda u, t, idx, cache: seen.append(idx.shape[1]) or compute(u, t, idx, cache))
    budgets = [1.0, 0.5, 0.25, 0.1, 0.75]
    _, counts = sample(net, noise, Schedule(budgets))
    n = net.tokens  # 3 frames × 4² patches = 48
    assert seen == counts == [48, 24, 12, 5, 36] == [n] + [round(b * n) for b in budgets[1:]]
    seen.clear()
    _, counts = sample(net, noise, Schedule.skipping(10, 0.3))
    assert len(seen) == 3 and counts.count(0) == 7  # 3 of 10 steps run the network


def test_a_sparse_step_attends_to_every_cached_key_and_value():
    """After a full pass at (u, t) the caches hold every token's keys and values; recomputing any subset at the same
    (u, t) must then give exactly the full pass's outputs at those tokens: its queries see all N keys."""
    net = _net()
    u, t = torch.randn(2, net.tokens, 4), torch.rand(2)
    cache = net.empty_cache(2)
    v_full, lse_full = net.compute(u, t, torch.arange(net.tokens).expand(2, -1), cache)
    idx = torch.tensor([[0, 5, 17, 40], [3, 4, 30, 47]])
    v_sub, lse_sub = net.compute(u, t, idx, cache)
    assert torch.allclose(v_sub, v_full.gather(1, idx[..., None].expand(-1, -1, 4)), atol=1e-5)
    assert torch.allclose(lse_sub, lse_full.gather(1, idx), atol=1e-5)
    # against an empty cache the same subset sees only itself, and differs
    v_alone, _ = net.compute(u, t, idx, net.empty_cache(2))
    assert not torch.allclose(v_alone, v_sub, atol=1e-3)


def test_unselected_tokens_keep_their_last_velocity():
    """One Euler step of size 1 against two of size ½ whose second recomputes a single token: every other token
    moves on with step 0's velocity, so the two samples differ in that one token only."""
    net, noise = _net(), torch.randn(1, 3, 8, 8)
    x1, _ = sample(net, noise, Schedule([1.0]))
    x2, counts = sample(net, noise, Schedule([1.0, 1e-9]))
    assert counts == [48, 1]
    changed = (net.patchify(x2) - net.patchify(x1)).abs().sum(-1) > 1e-6
    assert int(changed.sum()) == 1


def test_the_budget_search_keeps_the_mean_and_beats_the_uniform_budget():
    steps, mean = 6, 0.5
    target = np.array([1.0, 0.9, 0.1, 0.8, 0.1, 0.1])  # mean 0.5: what a fitness prefers

    def fitness(b):
        return float(((np.asarray(b) - target) ** 2).sum())

    best, history = genetic_budgets(fitness, steps, mean, parents=10, children=8, generations=15, seed=0)
    assert best[0] == 1.0 and abs(np.mean(best) - mean) < 1e-9 and min(best) >= 0.05
    assert history[-1] < 0.2 * history[0]  # generation 0's first entry: the uniform budget's fitness
    assert all(a >= b for a, b in zip(history[1:], history[2:]))  # elitist: never worse


@pytest.mark.parametrize("mean", [0.2, 0.5, 0.9])
def test_repair_meets_the_mean_within_bounds(mean):
    r = repair(np.random.default_rng(0).uniform(-1, 2, 19), mean, 0.05, 20)
    assert abs((1 + r.sum()) / 20 - mean) < 1e-9 and r.min() >= 0.05 and r.max() <= 1


def test_moving_fashion_mnist_is_seeded_and_moves():
    a, b = moving_fashion_mnist(4, seed=3), moving_fashion_mnist(4, seed=3)
    assert np.array_equal(a, b) and a.shape == (4, 8, 32, 32)
    assert not np.array_equal(a, moving_fashion_mnist(4, seed=4))
    mass = a.sum(axis=(2, 3))
    assert (mass > 5).all()  # every frame keeps its garments in view (they bounce off the borders)
    moved = np.abs(np.diff(a, axis=1)).sum(axis=(2, 3)) > 1  # consecutive frames differ (at ≥ 1 px a frame
    assert moved.mean() > 0.8 and moved.any(axis=1).all()  # a slow axis can round to a still frame now and then)
