"""Extras: the shared loaders and report, each method's core math against hand-computed values, tiny recipe runs."""

import doctest
import json

import numpy as np
import pytest
import torch

import agentkit.extras.efficiency.orderdp.selection
import agentkit.extras.report
import agentkit.extras.tabular.jarf.model
from agentkit.errors import AgentkitError
from agentkit.extras import data


@pytest.mark.parametrize("mod", [agentkit.extras.report, agentkit.extras.tabular.jarf.model,
                                 agentkit.extras.efficiency.orderdp.selection])
def test_doctests(mod):
    res = doctest.testmod(mod)
    assert res.attempted > 0 and res.failed == 0


def test_fashion_mnist_subset_and_missing_package(tmp_path):
    if not (data.FMNIST_ROOT / "t10k-images-idx3-ubyte.gz").exists():
        pytest.skip("dataset-fashion-mnist is not installed")
    x, y = data.fashion_mnist("test", n=50, seed=1)
    assert x.shape == (50, 28, 28) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
    assert np.bincount(y).tolist() == [5] * 10  # class-balanced
    assert np.array_equal(data.fashion_mnist("test", n=50, seed=1)[1], y)
    with pytest.raises(AgentkitError, match="apt-get install dataset-fashion-mnist"):
        data.fashion_mnist(root=tmp_path)


def test_synthetic_sets_and_split():
    from sklearn.datasets import make_classification

    x0, y0 = data.rotated_classification(200, 6, 0.0, seed=3)
    ref, _ = make_classification(n_samples=200, n_features=6, n_informative=3, n_redundant=0, n_repeated=0,
                                 n_clusters_per_class=2, class_sep=1.0, shuffle=False, random_state=3)
    assert np.allclose(x0, ref)
    x45, y45 = data.rotated_classification(200, 6, 45.0, seed=3)
    assert np.array_equal(y0, y45) and np.allclose(np.linalg.norm(x45, axis=1), np.linalg.norm(ref, axis=1))
    c = np.sqrt(0.5)
    assert np.allclose(x45[:, :2], ref[:, :2] @ np.array([[c, c], [-c, c]]))
    tr, va, te = data.split(y0, val=0.2, test=0.25, seed=0)
    assert len(set(tr) | set(va) | set(te)) == 200 and not set(tr) & set(te)
    x, y = data.xor()
    assert y.tolist() == [0, 1, 1, 0]
    with pytest.raises(AgentkitError, match="did you mean"):
        data.sklearn_set("winee")


def test_tversky_similarity_by_hand():
    from agentkit.extras.vision.tversky.model import TverskyProjection, difference, intersection, tversky_similarity

    bank = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    x, y = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    # f(x) = [2, 0, 2], has(x) = [1, 0, 1]; f(y) = [0, 1, 1], has(y) = [0, 1, 1]
    fx, hx, fy, hy = torch.tensor([[2.0, 0, 2]]), torch.tensor([[1.0, 0, 1]]), torch.tensor([[0.0, 1, 1]]), \
        torch.tensor([[0.0, 1, 1]])
    # product: f(x)·f(y) = 2; one-sided sums: f(x)·has(y) = 2, has(x)·f(y) = 1
    got = {r: intersection(fx, hx, fy, hy, r).item() for r in ("product", "min", "max", "mean", "gmean", "softmin")}
    assert got == pytest.approx({"product": 2, "min": 1, "max": 2, "mean": 1.5, "gmean": 2 ** 0.5,
                                 "softmin": -np.log(np.exp(-2) + np.exp(-1))})
    assert difference(fx, hx, fy, hy, "ignorematch").item() == 2  # f(x) on the features y lacks: [2, 0, 2]·[1, 0, 0]
    assert difference(fx, hx, fy, hy, "substractmatch").item() == 3  # + (2 − 1) on shared features
    assert difference(fy, hy, fx, hx, "substractmatch").item() == 1  # [0, 1, 1]·[0, 1, 0], excess 1 − 2 < 0
    s = tversky_similarity(x, y, bank, alpha=0.25, beta=0.5, theta=2.0)  # 2·2 − 0.25·2 − 0.5·1
    assert s.item() == pytest.approx(3.0)
    r = tversky_similarity(x, y, bank, alpha=0.25, beta=0.5, theta=2.0, model="ratio")
    assert r.item() == pytest.approx(2 / (2 + 0.5 + 0.5 + 1))
    layer = TverskyProjection(2, 3, 4)
    assert layer(torch.rand(5, 7, 2)).shape == (5, 7, 3)


def test_one_tversky_layer_solves_xor_where_linear_cannot():
    from agentkit.extras.vision.tversky.model import TverskyProjection
    from agentkit.extras.vision.tversky.recipe import _fit_full_batch

    x, y = (torch.tensor(a) for a in data.xor())
    solved = 0
    for seed in range(6):
        torch.manual_seed(seed)
        solved += _fit_full_batch(TverskyProjection(2, 2, 4), x, y, 300, 0.05) == 1.0
        torch.manual_seed(seed)
        assert _fit_full_batch(torch.nn.Linear(2, 2), x, y, 300, 0.05) <= 0.75
    assert solved >= 1


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


@pytest.mark.parametrize("recipe", ["extras.vision.tversky", "extras.tabular.jarf", "extras.efficiency.orderdp"])
def test_extras_recipes_tiny(recipe, tmp_path):
    from agentkit.runner import run_recipe

    metrics, run_dir = run_recipe(recipe, [], output_dir=str(tmp_path / "run"), preset="tiny", quiet=True)
    assert metrics and all(v == v for v in metrics.values())
    report = (run_dir / "report.md").read_text()
    assert "±" in report and ".png" in report
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["final"] is True
