"""JARF: Jacobian-Aligned Random Forests (arXiv 2512.08306; no official code).

An axis-aligned forest struggles when the class boundary is oblique to the axes. JARF learns one global linear
map from the expected gradient outer product (EGOP) of a surrogate forest's class probabilities, and fits a plain
random forest on the mapped inputs:

1. fit a surrogate forest p̂_c(x), c = 1..C;
2. on m ≈ n/2 training points, central differences per feature j with a robust step
   ε_j = ``eps_scale`` · MAD_j / 0.6745 (x ± ε_j e_j / 2, clipped to the feature's ``clip`` quantiles):
   g_{c,j}(x) = [p̂_c(x + ε_j e_j/2) − p̂_c(x − ε_j e_j/2)] / (actual step);
3. Ĥ = (1/m) Σ_i Σ_c g_c(x_i) g_c(x_i)ᵀ + γ I, rescaled so that tr Ĥ = d            (Ĥ: [d, d]);
4. fit the forest on X Ĥ (X: [n, d]) and map test inputs the same way.

Directions along which the probabilities change get stretched, so axis-aligned splits in the mapped space act
like oblique splits in the original one. The rows of Ĥ are not orthogonal in general; Ĥ is symmetric PSD.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.ensemble import RandomForestClassifier
from sklearn.utils.validation import check_is_fitted, validate_data


def robust_steps(x: np.ndarray, eps_scale: float = 0.1) -> np.ndarray:
    """ε_j = eps_scale · MAD_j / 0.6745 per feature ([d]); a feature with MAD 0 falls back to its std (or 1)."""
    mad = np.median(np.abs(x - np.median(x, 0)), 0) / 0.6745
    std = x.std(0)
    scale = np.where(mad > 0, mad, np.where(std > 0, std, 1.0))
    return eps_scale * scale


def egop(predict_proba, x: np.ndarray, eps: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(1/m) Σ_i Σ_c g_c(x_i) g_c(x_i)ᵀ [d, d] by central differences of ``predict_proba`` ([N, d] -> [N, C]) at
    the rows of x [m, d], steps eps [d], each probe clipped to [lo_j, hi_j].

    >>> p = lambda z: np.stack([0.5 - 0.1 * z[:, 0], 0.5 + 0.1 * z[:, 0]], 1)   # dp/dx0 = ∓0.1, dp/dx1 = 0
    >>> np.round(egop(p, np.zeros((3, 2)), np.ones(2), -np.ones(2), np.ones(2)), 6)
    array([[0.02, 0.  ],
           [0.  , 0.  ]])
    """
    m, d = x.shape
    probes = []
    for j in range(d):  # all 2·d·m probes in one predict_proba call
        up, down = x.copy(), x.copy()
        up[:, j] = np.clip(x[:, j] + eps[j] / 2, lo[j], hi[j])
        down[:, j] = np.clip(x[:, j] - eps[j] / 2, lo[j], hi[j])
        probes += [up, down]
    p = np.asarray(predict_proba(np.concatenate(probes)))
    c = p.shape[1]
    p = p.reshape(d, 2, m, c)
    steps = np.stack([probes[2 * j][:, j] - probes[2 * j + 1][:, j] for j in range(d)])  # [d, m]
    safe = np.where(steps > 0, steps, 1.0)
    g = np.where(steps[..., None] > 0, (p[:, 0] - p[:, 1]) / safe[..., None], 0.0)  # [d, m, C]
    return np.einsum("imc,jmc->ij", g, g) / m


class JARFClassifier(ClassifierMixin, BaseEstimator):
    """Random forest on inputs mapped by the surrogate forest's EGOP (module docstring).

    n_estimators / max_features / min_samples_leaf: the final forest. surrogate_estimators: the surrogate's size.
    eps_scale: finite-difference step in robust standard deviations. sample_frac: share of training rows m/n
    used for the EGOP. gamma: ridge γ, relative to tr(EGOP)/d, so the map stays invertible. clip: quantiles
    that bound the probes. After fitting: ``H_`` [d, d], ``surrogate_``, ``forest_``.
    """

    def __init__(
        self,
        n_estimators: int = 200,
        surrogate_estimators: int = 100,
        eps_scale: float = 0.1,
        sample_frac: float = 0.5,
        gamma: float = 1e-3,
        clip: tuple[float, float] = (0.01, 0.99),
        max_features: str | float | None = "sqrt",
        min_samples_leaf: int = 1,
        n_jobs: int | None = None,
        random_state: int | None = None,
    ):
        self.n_estimators = n_estimators
        self.surrogate_estimators = surrogate_estimators
        self.eps_scale = eps_scale
        self.sample_frac = sample_frac
        self.gamma = gamma
        self.clip = clip
        self.max_features = max_features
        self.min_samples_leaf = min_samples_leaf
        self.n_jobs = n_jobs
        self.random_state = random_state

    def fit(self, X, y):
        X, y = validate_data(self, X, y)
        rng = np.random.default_rng(self.random_state)
        self.surrogate_ = RandomForestClassifier(
            self.surrogate_estimators,
            max_features=self.max_features,
            min_samples_leaf=self.min_samples_leaf,
            n_jobs=self.n_jobs,
            random_state=self.random_state,
        ).fit(X, y)
        self.classes_ = self.surrogate_.classes_
        m = max(1, int(round(self.sample_frac * len(X))))
        rows = X[rng.choice(len(X), m, replace=False)]
        lo, hi = np.quantile(X, self.clip[0], 0), np.quantile(X, self.clip[1], 0)
        g = egop(self.surrogate_.predict_proba, rows, robust_steps(X, self.eps_scale), lo, hi)
        d = X.shape[1]
        h = g + self.gamma * max(np.trace(g) / d, 1e-12) * np.eye(d)
        self.H_ = h * d / np.trace(h)
        self.forest_ = RandomForestClassifier(
            self.n_estimators,
            max_features=self.max_features,
            min_samples_leaf=self.min_samples_leaf,
            n_jobs=self.n_jobs,
            random_state=self.random_state,
        ).fit(X @ self.H_, y)
        return self

    def transform(self, X) -> np.ndarray:
        check_is_fitted(self)
        return validate_data(self, X, reset=False) @ self.H_

    def predict_proba(self, X) -> np.ndarray:
        return self.forest_.predict_proba(self.transform(X))

    def predict(self, X) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(1)]


class RandomRotationForest(ClassifierMixin, BaseEstimator):
    """The oblique baseline: each tree sees the standardised inputs under its own random rotation (Blaser &
    Fryzlewicz, "Random rotation ensembles", JMLR 2016). treeple's oblique forests would be the natural
    baseline, but its 0.10 wheels are binary-incompatible with scikit-learn ≥ 1.7."""

    def __init__(
        self, n_estimators: int = 200, max_features: str | float | None = "sqrt", random_state: int | None = None
    ):
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.random_state = random_state

    def fit(self, X, y):
        from sklearn.tree import DecisionTreeClassifier

        X, y = validate_data(self, X, y)
        rng = np.random.default_rng(self.random_state)
        self.mean_, self.scale_ = X.mean(0), np.where(X.std(0) > 0, X.std(0), 1.0)
        z = (X - self.mean_) / self.scale_
        self.classes_, yi = np.unique(y, return_inverse=True)
        self.trees_, self.rotations_ = [], []
        d = X.shape[1]
        for _ in range(self.n_estimators):
            q, r = np.linalg.qr(rng.standard_normal((d, d)))
            q *= np.sign(np.diag(r))  # Haar-uniform rotation
            boot = rng.integers(0, len(z), len(z))
            tree = DecisionTreeClassifier(max_features=self.max_features, random_state=int(rng.integers(2**31 - 1)))
            self.trees_.append(tree.fit(z[boot] @ q, yi[boot]))
            self.rotations_.append(q)
        return self

    def predict_proba(self, X) -> np.ndarray:
        check_is_fitted(self)
        z = (validate_data(self, X, reset=False) - self.mean_) / self.scale_
        out = np.zeros((len(z), len(self.classes_)))
        for tree, q in zip(self.trees_, self.rotations_):
            out[:, tree.classes_] += tree.predict_proba(z @ q)
        return out / len(self.trees_)

    def predict(self, X) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(1)]
