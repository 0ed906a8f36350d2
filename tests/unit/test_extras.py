"""Extras: the shared loaders and report, each method's core math against hand-computed values, tiny recipe runs."""

import doctest
import json

import numpy as np
import pytest
import torch

import agentkit.extras.efficiency.orderdp.selection
import agentkit.extras.report
import agentkit.extras.robust.hdro.loss
import agentkit.extras.robust.nat.attack
import agentkit.extras.tabular.jarf.model
from agentkit.errors import AgentkitError
from agentkit.extras import data


@pytest.mark.parametrize("mod", [agentkit.extras.report, agentkit.extras.tabular.jarf.model,
                                 agentkit.extras.efficiency.orderdp.selection, agentkit.extras.robust.hdro.loss,
                                 agentkit.extras.robust.nat.attack])
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


def test_coloured_fashion_mnist_groups_and_rotation():
    if not (data.FMNIST_ROOT / "t10k-images-idx3-ubyte.gz").exists():
        pytest.skip("dataset-fashion-mnist is not installed")
    x, y, g = data.coloured_fashion_mnist("test", 400, agree=0.8, seed=2)
    plain, cls = data.fashion_mnist("test", 400, seed=2)
    colour = g % 2
    assert np.array_equal(y, (cls >= 5).astype(int)) and np.array_equal(g // 2, y)
    assert np.allclose(x[np.arange(400), colour], plain) and not x[np.arange(400), 1 - colour].any()
    assert 0.7 < (colour == y).mean() < 0.9
    xr, _, gr = data.coloured_fashion_mnist("test", 400, agree=0.8, seed=2, rotate_group=1)
    assert np.array_equal(gr, g)
    one = g == 1
    assert np.allclose(xr[one].sum(1), np.rot90(x[one].sum(1), 1, axes=(1, 2)), atol=1e-6)
    assert np.array_equal(xr[~one], x[~one])


def test_group_dro_losses_by_hand():
    from agentkit.extras.robust.hdro.loss import GroupLoss

    head = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))  # logits = z
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]])
    y, g = torch.tensor([0, 0, 1]), torch.tensor([0, 0, 1])
    ce = torch.nn.functional.cross_entropy(z, y, reduction="none")  # ln(1+e^-1), ln(1+e), ln(1+e^2)
    counts = torch.tensor([100.0, 25.0])
    assert GroupLoss(counts, "erm")(z, y, g, head).item() == pytest.approx(ce.mean().item())
    gd = GroupLoss(counts, "group_dro", eps=1.0, eta=0.5, adjust=1.0)  # eps is ignored by Group DRO
    lg = torch.stack([ce[:2].mean(), ce[2]])
    q = torch.softmax(0.5 * (lg + torch.tensor([0.1, 0.2])), 0)  # uniform · exp(η(ℓ_g + C/√n_g)), normalised
    assert gd(z, y, g, head).item() == pytest.approx((q @ lg).item(), rel=1e-6)
    assert gd.q.tolist() == pytest.approx(q.tolist())
    h = GroupLoss(counts, "hdro", eps=0.4)
    assert h.radii.tolist() == pytest.approx([0.2, 0.4])  # ε·n_g^-½ / max n^-½
    # ∇_z CE = softmax(z) − onehot(y): sign (−, +) for the class-0 rows (radius 0.2), (+, −) for the class-1 row
    zp = h.perturb(z, y, g, head)
    assert torch.allclose(zp, torch.tensor([[0.8, 0.2], [-0.2, 1.2], [2.4, -0.4]]))
    zz = z.clone().requires_grad_(True)
    h(zz, y, g, head).backward()
    assert zz.grad is not None and zz.grad.abs().sum() > 0  # the perturbed loss still trains the features


def test_nat_loss_pgd_and_entropy_by_hand():
    from agentkit.extras.robust.nat.attack import margin_loss, nat_loss, non_true_entropy, pgd

    logits, nat, y = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([0])
    pt = torch.softmax(logits / 4, 1)  # τ = 4
    kl = (0.5 * (np.log(0.5) - pt.log())).sum() / 2  # KL(p_a ‖ p_t), averaged over B·K = 2 entries
    want = np.log(1 + np.exp(-2.0)) - 0.06 * 16 * kl.item()
    assert nat_loss(logits, nat, y, lam=0.06, tau=4.0).item() == pytest.approx(want, rel=1e-5)
    assert margin_loss(torch.tensor([[3.0, 1.0, 2.5]]), torch.tensor([0])).item() == pytest.approx(-0.5)
    assert non_true_entropy(torch.tensor([[9.0, 1.0, 1.0, 1.0]]), torch.tensor([0])).item() == \
        pytest.approx(np.log(3), rel=1e-5)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    x, yy = torch.rand(8, 1, 4, 4), torch.randint(0, 3, (8,))
    for loss in ("ce", "margin"):
        adv = pgd(model, x, yy, eps=0.1, alpha=0.05, steps=5, loss=loss)
        assert (adv - x).abs().max() <= 0.1 + 1e-6 and adv.min() >= 0 and adv.max() <= 1
        ce = torch.nn.functional.cross_entropy
        assert ce(model(adv), yy).item() > ce(model(x), yy).item()
    assert all(p.grad is None for p in model.parameters())


def test_ridge_dequantiser_by_hand():
    from agentkit.extras.efficiency.dequant.quant import QuantSpec, quantize, sparsify
    from agentkit.extras.efficiency.dequant.recipe import diverged, parse_setting

    x = torch.tensor([[0.0, 1.0, 3.0, 4.0]], requires_grad=True)
    # 1 bit: b = 0, s = 4, codes [0, 0, 1, 1]; STE maps them back to the grid {0, 4}
    assert quantize(x, QuantSpec(1, "ste", block=4)).tolist() == [[0, 0, 4, 4]]
    # ridge: q̄ = ½, x̄ = 2, Cov = 0.75, Var = 0.25 → slope 0.75 / 0.26, x̂ = 2 ∓ slope/2
    ridge = quantize(x, QuantSpec(1, "ridge", block=4, lam=0.01))
    k = 0.75 / 0.26 / 2
    assert ridge[0].tolist() == pytest.approx([2 - k, 2 - k, 2 + k, 2 + k])
    w = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    (ridge * w).sum().backward()
    g_ridge = x.grad.clone()
    x.grad = None
    (quantize(x, QuantSpec(1, "ste", block=4)) * w).sum().backward()
    assert x.grad.tolist() == [[1, 2, 3, 4]]  # STE: the identity
    assert not torch.allclose(g_ridge, x.grad)  # ridge: gradients also flow through the block statistics
    assert torch.allclose(quantize(x, QuantSpec(8, "ste", block=4)), x, atol=4 / 255)
    s = sparsify(torch.tensor([[0.5, -2.0, 1.0, 0.1, 3.0, 0.0, -1.0, 0.2]]), 2, 4)
    assert s.tolist() == [[0, -2.0, 1.0, 0, 3.0, 0, -1.0, 0]]
    assert quantize(x, QuantSpec(4, "ridge", block=2)).shape == x.shape  # 2 blocks of 2
    assert parse_setting("fp", "ste", 128, 0.01) == (None, None)
    a, wt = parse_setting("A4W1:2of4", "ridge", 64, 0.01)
    assert (a.bits, wt.bits, wt.nm, a.nm, wt.block) == (4, 1, (2, 4), None, 64)
    with pytest.raises(AgentkitError, match="A<bits>W<bits>"):
        parse_setting("W4A4", "ste", 128, 0.01)
    assert diverged([1.0] * 5 + [float("nan")]) and diverged([1.0] * 10 + [2.0] * 10)
    assert not diverged([2.0] * 10 + [1.0] * 10)


def test_skipless_init_by_hand():
    from agentkit.extras.vision.skipless.model import Block, ViT, attention_jacobian_condition, skipless_init

    torch.manual_seed(0)
    blk = Block(8, 2, skip=False)
    skipless_init(blk, alpha=0.0, beta=0.6, c=3.0)
    wv, wo = blk.attn.v.weight.T, blk.attn.o.weight.T  # the x·W matrices
    assert torch.linalg.svdvals(wv @ wo).tolist() == pytest.approx([9.0] * 8, rel=1e-4)  # c²·orthogonal
    wq, wk = blk.attn.q.weight.T, blk.attn.k.weight.T
    for h in range(2):  # α = 0: W_Q^h W_K^hᵀ is the rank-4 truncation of 0.6·I, i.e. 0.6 × a projection
        m = wq[:, 4 * h:4 * h + 4] @ wk[:, 4 * h:4 * h + 4].T
        assert torch.allclose(m, m.T, atol=1e-5)
        assert sorted(torch.linalg.eigvalsh(m).tolist()) == pytest.approx([0] * 4 + [0.6] * 4, abs=1e-5)
    skip = Block(8, 2, skip=True)
    torch.nn.init.zeros_(skip.attn.o.weight)  # x + MHSA(x) with a zero output map: the identity, κ = 1
    assert attention_jacobian_condition(skip, torch.randn(3, 8)) == pytest.approx(1.0)
    vit = ViT("skipless-init", depth=2, d=16, heads=2)
    assert vit(torch.rand(2, 1, 28, 28)).shape == (2, 10) and not vit.blocks[0].skip
    with pytest.raises(ValueError):
        ViT("resnet")


@pytest.mark.parametrize("recipe", ["extras.vision.tversky", "extras.tabular.jarf", "extras.efficiency.orderdp",
                                    "extras.robust.hdro", "extras.robust.nat", "extras.efficiency.dequant",
                                    "extras.vision.skipless"])
def test_extras_recipes_tiny(recipe, tmp_path):
    from agentkit.runner import run_recipe

    metrics, run_dir = run_recipe(recipe, [], output_dir=str(tmp_path / "run"), preset="tiny", quiet=True)
    assert metrics and all(v == v for v in metrics.values())
    report = (run_dir / "report.md").read_text()
    assert "±" in report and ".png" in report
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["final"] is True


@pytest.mark.parametrize("recipe,override,message", [
    ("extras.robust.hdro", "methods=[erm,dro]", "'dro' is not allowed, did you mean 'hdro'"),
    ("extras.robust.hdro", "shift_group=4", "shift_group: must be <= 3"),
    ("extras.vision.skipless", "patch=5", "patch: 5 does not divide 28"),
    ("extras.efficiency.dequant", "settings=[W4A4]", "'W4A4' is not fp, A<a>W<w>"),
])
def test_extras_recipes_reject_bad_configs(recipe, override, message, tmp_path):
    from agentkit.runner import run_recipe

    with pytest.raises(AgentkitError, match=message):
        run_recipe(recipe, [override], output_dir=str(tmp_path / "run"), preset="tiny", quiet=True)
