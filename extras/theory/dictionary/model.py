"""Diverse dictionary learning: a VAE whose decoder ĝ is biased towards the sparsest Jacobian, and the metrics that
say what it identified.

**Bias.** The identifiability condition is ‖D_ẑ ĝ‖₀ ≤ ‖D_z g‖₀: among the decoders that fit the data, the learned
one depends on no more (latent, observed) pairs than the true g does. It is trained through its convex surrogate on
the **decoder** Jacobian (not on z),

.. math::

    \\mathcal L = -\\mathrm{ELBO}(x) + \\alpha\\, \\mathbb E_{\\hat z}\\, \\lVert D_{\\hat z}\\hat g(\\hat z)\\rVert_1,
    \\qquad D_{\\hat z}\\hat g \\in \\mathbb R^{D\\times K},

``jacobian_l1`` (``torch.func.vmap(jacrev(ĝ))`` over a batch; for a linear decoder ĝ(z) = Wz + b it is ‖W‖₁).
The baselines are the same VAE with α = 0, and with α‖μ(x)‖₁ on the encoded latents instead.

**Metrics.** ``mcc`` matches learned to true latents by the Hungarian method (``linear_sum_assignment``) on
|corr| (linear MCC) or on the R² of a nearest-neighbour regression of each true latent on each learned one
(nonlinear; the latents are identified up to an invertible map each). ``support_f1`` compares the matched,
thresholded mean |D_ẑ ĝ| with the true support. ``block_r2`` is the R² of a joint nearest-neighbour regression of
a block of true latents on the learned latents matched to it (a block identified as a whole: R² ≈ 1 for the block while its
members, one by one, are not).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.func import jacrev, vmap

from agentkit.extras.nets import gaussian, kl_std_normal, mlp


class VAE(nn.Module):
    """Gaussian encoder q(z|x) = N(μ(x), diag σ²(x)), prior N(0, I), decoder ĝ with Gaussian likelihood of fixed
    std ``sigma_x``."""

    def __init__(self, observed: int, latents: int, hidden: int = 64, sigma_x: float = 0.1):
        super().__init__()
        self.encoder = mlp(observed, hidden, 2 * latents)
        self.decoder = mlp(latents, hidden, observed)
        self.sigma_x = sigma_x

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return gaussian(self.encoder(x))

    def loss(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(−ELBO per sample, the encoded means μ, the sampled ẑ)."""
        mu, logvar = self.encode(x)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        rec = ((x - self.decoder(z)) ** 2).sum(-1) / (2 * self.sigma_x**2)
        return (rec + kl_std_normal(mu, logvar)).mean(), mu, z


def jacobian(decoder: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """D_ẑ ĝ at each row of ``z``: ``[B, D, K]``."""
    return vmap(jacrev(decoder))(z)


def jacobian_l1(decoder: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """E_ẑ ‖D_ẑ ĝ(ẑ)‖₁ over the rows of ``z`` (the entrywise L1 norm of each Jacobian, averaged)."""
    return jacobian(decoder, z).abs().sum((1, 2)).mean()


def _r2(a: np.ndarray, b: np.ndarray, neighbours: int = 20) -> float:
    """R² of a k-nearest-neighbour regression of ``b [N]`` on ``a [N, p]`` (standardised), fitted on the even rows
    and scored on the odd ones: how well any smooth map of ``a`` predicts ``b`` (robust to heavy tails, where a
    polynomial extrapolates)."""
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.preprocessing import StandardScaler

    a = StandardScaler().fit_transform(a.reshape(len(a), -1))
    fit = KNeighborsRegressor(neighbours).fit(a[::2], b[::2])
    return float(fit.score(a[1::2], b[1::2]))


def mcc(z: np.ndarray, z_hat: np.ndarray, kind: str = "corr") -> tuple[float, np.ndarray]:
    """Mean score of the Hungarian matching of true latents ``z [N, K]`` to learned ``z_hat [N, K']``, and the
    matched learned index of each true latent. ``kind``: ``corr`` (|Pearson|) or ``r2`` (nearest-neighbour R²,
    clipped at 0).

    >>> z = np.random.default_rng(0).standard_normal((500, 3))
    >>> score, match = mcc(z, -2 * z[:, [2, 0, 1]])
    >>> round(score, 6), match.tolist()
    (1.0, [1, 2, 0])
    """
    from scipy.optimize import linear_sum_assignment

    k, kh = z.shape[1], z_hat.shape[1]
    if kind == "corr":
        score = np.abs(np.corrcoef(z.T, z_hat.T)[:k, k:])
    elif kind == "r2":
        score = np.array([[max(0.0, _r2(z_hat[:, j], z[:, i])) for j in range(kh)] for i in range(k)])
    else:
        raise ValueError(f"kind must be corr or r2, got {kind!r}")
    score = np.nan_to_num(score)
    rows, cols = linear_sum_assignment(-score)
    match = np.empty(k, int)
    match[rows] = cols
    return float(score[rows, cols].mean()), match


def support_f1(support: np.ndarray, weights: np.ndarray, threshold: float = 0.2) -> float:
    """F1 of the estimated support ``weights [D, K] ≥ threshold · (the row's largest)`` (already matched to the true
    latents' order) against the true ``support [D, K]`` (bool).

    >>> support_f1(np.eye(2, dtype=bool), np.array([[1.0, 0.1], [0.5, 1.0]]))
    0.8
    """
    est = weights >= threshold * weights.max(1, keepdims=True)
    tp = float((est & support).sum())
    return 2 * tp / max(1.0, float(est.sum() + support.sum()))


def block_r2(z: np.ndarray, z_hat: np.ndarray, block: list[int], match: np.ndarray) -> float:
    """Mean R² of each true latent of ``block`` regressed jointly (nearest neighbours) on the learned latents
    matched to the whole block: whether the block is identified as a whole."""
    a = z_hat[:, match[block]]
    return float(np.mean([max(0.0, _r2(a, z[:, i])) for i in block]))
