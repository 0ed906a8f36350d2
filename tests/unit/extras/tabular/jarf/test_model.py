"""extras.tabular.jarf: the EGOP finds the oblique direction."""

import numpy as np
import pytest


def test_egop_finds_the_oblique_direction():
    from agentkit.extras.tabular.jarf.model import JARFClassifier, RandomRotationForest

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (600, 4))
    y = (x[:, 0] + x[:, 1] > 0).astype(int)  # the boundary is oblique: normal (1, 1, 0, 0)/√2
    m = JARFClassifier(n_estimators=50, surrogate_estimators=50, random_state=0).fit(x, y)
    h = m.H_
    assert np.allclose(h, h.T) and np.trace(h) == pytest.approx(4) and np.linalg.eigvalsh(h).min() > 0
    top = np.linalg.eigh(h)[1][:, -1]
    assert abs(top @ np.array([1, 1, 0, 0]) / np.sqrt(2)) > 0.9
    xt = rng.uniform(-1, 1, (400, 4))
    yt = (xt[:, 0] + xt[:, 1] > 0).astype(int)
    assert m.score(xt, yt) > 0.9
    assert RandomRotationForest(50, random_state=0).fit(x, y).score(xt, yt) > 0.85
