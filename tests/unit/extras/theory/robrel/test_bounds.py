"""extras.theory.robrel: occupancies against dynamic programming, the exact LP bounds against cases solved by
hand, and the sample-based primal–dual solver against the LP."""

import numpy as np
import pytest

from agentkit.extras.theory.robrel.bounds import Feedback, exact_bounds, primal_dual_bound
from agentkit.extras.theory.robrel.mdp import MDP, estimate, occupancy, optimal, random_policy, sample


@pytest.fixture
def mdp():
    return MDP.random(3, 3, 5, seed=1)


def _evaluate(mdp, pi, r):
    """J^π(r) by backward policy evaluation (independent of the occupancy measure)."""
    H, S, A = mdp.shape
    V = np.zeros(S)
    for h in reversed(range(H)):
        V = (pi[h] * (r[h] + mdp.P[h] @ V)).sum(1)
    return float(mdp.mu @ V)


def test_occupancy_makes_the_return_linear_and_dp_finds_the_best_policy(mdp):
    rng = np.random.default_rng(0)
    r = rng.random(mdp.shape)
    for seed in range(5):
        pi = random_policy(mdp, seed)
        d = occupancy(mdp, pi)
        assert np.allclose(d.sum(axis=(1, 2)), 1.0)
        assert float((d * r).sum()) == pytest.approx(_evaluate(mdp, pi, r))
        value, d_star = optimal(mdp, r)
        assert value >= _evaluate(mdp, pi, r) - 1e-12
    assert value == pytest.approx(float((d_star * r).sum()))  # the greedy policy attains it


def test_exact_bounds_on_cases_solved_by_hand(mdp):
    c = occupancy(mdp, random_policy(mdp, 3)) - occupancy(mdp, random_policy(mdp, 4))
    box = (float(np.minimum(c, 0).sum()), float(np.maximum(c, 0).sum()))  # no feedback: r anywhere in [0, 1]
    assert exact_bounds(mdp, Feedback(), c) == pytest.approx(box)
    H = mdp.shape[0]
    assert exact_bounds(mdp, Feedback(demo=occupancy(mdp, random_policy(mdp, 2)), t=H), c) == pytest.approx(box)
    assert exact_bounds(mdp, Feedback(comparisons=[c]), c) == pytest.approx((0.0, box[1]))  # π₁ ≽ π₂ told
    # a demonstration by the optimal policy of r0, without slack: r0 stays feasible, and the range shrinks
    r0 = np.random.default_rng(5).random(mdp.shape)
    _, d_opt = optimal(mdp, r0)
    lo, hi = exact_bounds(mdp, Feedback(demo=d_opt, t=0.0), c)
    assert lo <= float((c * r0).sum()) <= hi and hi - lo < box[1] - box[0]


def test_primal_dual_reaches_the_lp_bounds(mdp):
    demo = occupancy(mdp, random_policy(mdp, 2, sharp=0.3))
    c = occupancy(mdp, random_policy(mdp, 3)) - occupancy(mdp, random_policy(mdp, 4))
    g = occupancy(mdp, random_policy(mdp, 6)) - occupancy(mdp, random_policy(mdp, 7))
    fb = Feedback(demo=demo, t=0.2, comparisons=[g])
    lo, hi = exact_bounds(mdp, fb, c)
    est = primal_dual_bound(mdp, fb, c, False, steps=6000), primal_dual_bound(mdp, fb, c, True, steps=6000)
    assert est == pytest.approx((lo, hi), abs=0.03 * (hi - lo))


def test_samples_estimate_the_model_and_the_occupancy(mdp):
    pi = random_policy(mdp, 2)
    P, mu, d = estimate(sample(mdp, pi, 4000, seed=0), 3, 3)
    assert np.allclose(d.sum(axis=(1, 2)), 1.0) and mu.sum() == pytest.approx(1.0)
    assert np.abs(d - occupancy(mdp, pi)).max() < 0.03
    visited = d > 0.02  # (h, s, a) seen at least ~80 times
    assert np.abs(P - mdp.P)[visited].max() < 0.2
    with pytest.raises(ValueError, match="no feasible reward"):  # no policy beats the optimum: slack below 0
        exact_bounds(mdp, Feedback(demo=occupancy(mdp, pi), t=-0.1), d)
