"""agentkit.uncertainty.metrics: rejection curve, AURAC, PRR and ECE against hand-computed values."""

import numpy as np
import pytest

from agentkit.uncertainty.metrics import aurac, ece, prr, rejection_curve


def test_rejection_metrics():
    c = np.array([1, 0, 1, 0, 1])
    oracle = -c.astype(float)
    assert prr(c, oracle) == pytest.approx(1) and prr(c, np.zeros(5)) == pytest.approx(0)
    assert prr(c, c.astype(float)) < 0  # rejecting correct answers first is worse than random
    assert rejection_curve(c, np.zeros(5)) == pytest.approx([0.6] * 5)  # ties: the random curve exactly
    assert aurac(c, oracle) == pytest.approx(np.mean([0.6, 0.75, 1, 1, 1]))
    assert ece(np.array([1, 0]), np.array([1.0, 0.0])) == 0
    assert ece(np.array([1, 1]), np.array([0.5, 0.5])) == pytest.approx(0.5)
