"""TIPS shaping: the shaped return telescopes to R − αΦ_0 for any trajectory, the adaptive α hits its target,
the variance-optimal α is the control-variate coefficient (by hand, and as the minimiser of Var(R − αX)) with its
EMA, and warm-up ramps α in without breaking the telescoping."""

import random

import pytest

from agentkit.agent.trajectory import Segment, Trajectory
from agentkit.rl.advantages import TurnRewards
from agentkit.tips.shaping import (
    InfoPotentialShaper,
    ShapingConfig,
    discounted_return,
    shaped_turns,
    variance_optimal_alpha,
)


@pytest.mark.parametrize("seed", range(20))
def test_return_telescopes_on_random_trajectories(seed):
    r = random.Random(seed)
    turns = r.randint(1, 6)
    phis = [r.uniform(-12, 0) for _ in range(turns)]
    alpha, gamma, outcome = r.uniform(0.001, 1), r.choice([1.0, r.uniform(0.5, 1)]), r.choice([0.0, 0.4, 1.4])
    rewards = TurnRewards(outcome, shaped_turns(phis, alpha, gamma))
    assert len(rewards.turns) == turns
    got = discounted_return(rewards.turns, gamma)
    assert got == pytest.approx(gamma ** (turns - 1) * outcome - alpha * phis[0], abs=1e-9)
    if gamma == 1.0:
        assert rewards.total == pytest.approx(outcome - alpha * phis[0], abs=1e-9)
    # the terminal token: R − αΦ_final
    assert rewards.turns[-1] == pytest.approx(outcome - alpha * phis[-1])


class _Teacher:
    """Potentials read from a table (trajectory id, state) -> Φ, through the scorer's real state logic."""

    max_model_len = 4096

    def __init__(self, table):
        self.table = table

    def encode(self, prompt):
        return [int(prompt[-1]["content"])]

    def tokenize(self, text):
        return [5]

    def score(self, contexts, continuations):
        from agentkit.engines.base import Scored

        return [Scored([5], [self.table[(c[0], len(c) - 1)]]) for c in contexts]


def _trajs(r, n):
    out, table = [], {}
    for i in range(n):
        parts = []
        calls = r.randint(0, 4)
        for _ in range(calls):
            parts += [Segment("model", "m", [7]), Segment("tool", "t", [8])]
        parts.append(Segment("model", "a", [9]))
        out.append(Trajectory(f"q{i}", [{"role": "user", "content": str(i)}], [i], parts))
        for k in range(2 * calls + 1):
            table[(i, k)] = r.uniform(-8, -0.1)
    return out, table


@pytest.mark.parametrize("adaptive", [True, False])
def test_shaper_telescopes_and_scales(adaptive):
    r = random.Random(3)
    trajs, table = _trajs(r, 12)
    cfg = ShapingConfig(adaptive=adaptive, alpha=0.05, target=0.11)
    outcomes = [r.choice([0.0, 1.4]) for _ in trajs]
    rewards, stats = InfoPotentialShaper(_Teacher(table), cfg)(trajs, [["x"]] * len(trajs), outcomes, step=0)
    for t, rw, out in zip(trajs, rewards, outcomes):
        assert len(rw.shaping) == sum(s.kind == "model" for s in t.segments)
        phi0 = table[(int(t.prompt[-1]["content"]), 0)]
        assert rw.total == pytest.approx(out - stats["alpha"] * phi0, abs=1e-9)
    tool_turns = [x for rw in rewards for x in rw.shaping[:-1]]
    mean_abs = sum(map(abs, tool_turns)) / len(tool_turns)
    assert stats["alpha"] == (pytest.approx(0.11 / stats["delta_phi_abs"]) if adaptive else 0.05)
    if adaptive:
        assert mean_abs == pytest.approx(0.11)


def test_warmup_ramps_alpha():
    r = random.Random(4)
    trajs, table = _trajs(r, 6)
    shaper = InfoPotentialShaper(
        _Teacher(table), ShapingConfig(adaptive=False, alpha=0.2, start_step=10, warmup_steps=4)
    )
    alphas = [shaper(trajs, [["x"]] * 6, [1.0] * 6, step=s)[1]["alpha"] for s in (0, 10, 12, 20)]
    assert alphas == pytest.approx([0.0, 0.0, 0.1, 0.2])
    rewards, _ = shaper(trajs, [["x"]] * 6, [1.0] * 6, step=0)
    assert all(rw.turns == [0.0] * (len(rw.turns) - 1) + [1.0] for rw in rewards)  # before start: outcome only


def test_variance_optimal_alpha_by_hand_and_as_the_variance_minimiser():
    """X = Φ_final − Φ_0 = 3, 0, 2 and R = 1, 0, 1: Cov = 5/3 − (5/3)(2/3) = 5/9, Var = 13/3 − 25/9 = 14/9, so
    α = 5/14. On random batches the α found minimises the variance of R − αX over a grid around it."""
    assert variance_optimal_alpha([[-4.0, -1.0], [-3.0, -3.0], [-2.0, 0.0]], [1.0, 0.0, 1.0]) == pytest.approx(5 / 14)
    assert variance_optimal_alpha([[-4.0], [-3.0]], [1.0, 0.0]) is None  # answer-only: no tool turn, X = 0
    assert variance_optimal_alpha([[-1.0, -1.0], [-2.0, -2.0]], [1.0, 0.0]) is None  # X = 0 for both
    r = random.Random(0)
    for _ in range(5):
        pots = [[r.uniform(-6, 0) for _ in range(r.randint(1, 4))] for _ in range(16)]
        outs = [r.choice([0.0, 1.0]) + 0.3 * (p[-1] - p[0]) for p in pots]
        a = variance_optimal_alpha(pots, outs)
        xs = [p[-1] - p[0] for p in pots]

        def var(alpha, xs=xs, outs=outs):
            d = [o - alpha * x for o, x in zip(outs, xs)]
            m = sum(d) / len(d)
            return sum((v - m) ** 2 for v in d)

        assert all(var(a) <= var(a + e) + 1e-12 for e in (-0.1, -0.01, 0.01, 0.1))


def test_variance_optimal_mode_smooths_alpha_with_an_ema():
    """The first batch's α is taken as it is, the next ones blend in with weight 1 − ema; a batch whose X does not
    vary keeps the running α; the shaped return still telescopes to R − αΦ_0."""
    cfg = ShapingConfig(variance_optimal=True, ema=0.9, alpha=0.02)
    shaper = InfoPotentialShaper(_Teacher({}), cfg)
    pots1, outs1 = [[-4.0, -1.0], [-3.0, -3.0], [-2.0, 0.0]], [1.0, 0.0, 1.0]
    rewards, stats = shaper.shape(pots1, outs1)
    assert stats["alpha"] == pytest.approx(5 / 14)
    assert [rw.total for rw in rewards] == pytest.approx([o - 5 / 14 * p[0] for p, o in zip(pots1, outs1)])
    pots2, outs2 = [[-1.0, 0.0], [-1.0, -1.0]], [1.0, 0.0]  # X = 1, 0 and R = 1, 0: α_batch = 1
    assert shaper.shape(pots2, outs2)[1]["alpha"] == pytest.approx(0.9 * 5 / 14 + 0.1 * 1.0)
    flat = [[-1.0, -1.0], [-2.0, -2.0]]
    assert shaper.shape(flat, [1.0, 0.0])[1]["alpha"] == pytest.approx(0.9 * 5 / 14 + 0.1 * 1.0)
    with pytest.raises(ValueError, match="outcomes"):
        shaper.alpha(pots1)
