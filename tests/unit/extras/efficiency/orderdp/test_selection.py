"""extras.efficiency.orderdp: the selection frequency matches γ."""

import numpy as np
import pytest


def test_orderdp_selection_frequency_matches_gamma():
    """Monte Carlo: how often the rank-j sample is kept equals γ_j; the kept count is exact."""
    from agentkit.extras.efficiency.orderdp.selection import OrderDPSelector, selection_probability

    n, s, q, trials = 12, 6, 2, 20000
    sel = OrderDPSelector(n, s / n, q / s, seed=0)
    sel.scores = np.arange(n, 0, -1, dtype=float)  # sample i has rank i + 1
    counts = np.zeros(n)
    for _ in range(trials):
        idx = sel.select()
        assert len(idx) == q
        counts[idx] += 1
    gamma = selection_probability(n, s, q)
    assert gamma.sum() == pytest.approx(q)
    assert np.abs(counts / trials - gamma).max() < 0.015
    top = OrderDPSelector(n, 1.0, 0.25, seed=0)  # rho_s = 1: plain top-q, always the same samples
    top.scores = sel.scores
    assert top.select().tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        selection_probability(5, 2, 3)
