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


def test_auroc_equals_scikit_learns_with_ties_and_bootstrap_intervals():
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from agentkit.uncertainty.metrics import auroc, bootstrap_ci, summarize

    rng = np.random.default_rng(0)
    for _ in range(100):
        c, s = rng.integers(0, 2, 40), rng.integers(0, 5, 40) / 4  # many ties
        if c.min() != c.max():
            assert auroc(c, s) == pytest.approx(roc_auc_score(1 - c, s), abs=1e-12)
    c = rng.integers(0, 2, 400)
    s = np.where(c == 0, rng.random(400) + 0.3, rng.random(400))  # errors score higher: AUROC ~0.8
    lo, hi = bootstrap_ci(c, s, auroc, n=500)
    assert lo < auroc(c, s) < hi and 0.05 < hi - lo < 0.2
    small_lo, small_hi = bootstrap_ci(c[:40], s[:40], auroc, n=500)
    assert small_hi - small_lo > hi - lo  # fewer questions, wider interval
    m = summarize(c, s, boot=200)
    assert set(m) == {"auroc", "prr", "aurac", "ece", "auroc_ci", "prr_ci", "aurac_ci"}
    assert np.isnan(bootstrap_ci(np.ones(5), s[:5], auroc, n=20)).all()  # one class: undefined
