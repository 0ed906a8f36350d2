"""KLAS: choosing which stitches to keep between the models of a family, by the KL divergence of per-block probes;
and the rules it is compared with.

A *stitch* (i, j) runs anchor f's blocks 1…i, a linear stitch layer, then anchor g's blocks j+1…L_g and head
(``FLOPs`` add up the same way). Each block b of each anchor has a linear-softmax probe whose class distribution on
the validation set is P_b.

**Score** [paper]. With Θ(P, Q) the mean validation KL(P ‖ Q),

.. math::

    \\Gamma(i, j) = \\frac{\\Theta(P^f_i,\\; P^g_j)}{\\Theta(P^g_j,\\; P^g_{j+1})},

the gap a stitch jumps, in units of the gap between g's consecutive blocks at the landing point. The anchor pair is
the one with the smallest last-block Θ. The candidates are split into 20 equal-width FLOPs buckets, and in each
bucket every stitch with Γ ≤ 1.05 · (the bucket's smallest Γ) is kept (``klas_select``).

**Stitch layers** are fitted by least squares on training activations, [H_f 1] W ≈ H_g (``lstsq_stitch``), then
fine-tuned as SN-Net does.

**Baselines** at the same count: SN-Net's rule (same-depth anchors: block i to block i, a sliding window of
``window`` around it), the stitches of highest linear CKA between the two blocks' features, and random ones.
"""

from __future__ import annotations

import numpy as np
import torch


def mean_kl(p: torch.Tensor, q: torch.Tensor, eps: float = 1e-12) -> float:
    """Θ(P, Q): the mean over rows of KL(p_n ‖ q_n) for probability rows ``[N, C]``.

    >>> round(mean_kl(torch.tensor([[0.5, 0.5]]), torch.tensor([[0.9, 0.1]])), 4)
    0.5108
    """
    return float((p * ((p + eps).log() - (q + eps).log())).sum(-1).mean())


def kl_table(probs_f: list[torch.Tensor], probs_g: list[torch.Tensor]) -> np.ndarray:
    """``[L_f, L_g]`` of Θ(P^f_i, P^g_j) (0-based blocks)."""
    return np.array([[mean_kl(pf, pg) for pg in probs_g] for pf in probs_f])


def gamma(theta_fg: np.ndarray, theta_gg_next: np.ndarray) -> np.ndarray:
    """Γ(i, j) = Θ(P^f_i, P^g_j) / Θ(P^g_j, P^g_{j+1}) for the stitches that land before g's last block.

    Args:
        theta_fg: ``[L_f, L_g]`` from ``kl_table``.
        theta_gg_next: ``[L_g − 1]``, Θ(P^g_j, P^g_{j+1}).

    Returns:
        ``[L_f, L_g − 1]``.

    >>> gamma(np.array([[0.2, 0.4, 0.9]]), np.array([0.1, 0.4]))
    array([[2., 1.]])
    """
    return theta_fg[:, :-1] / np.maximum(theta_gg_next[None, :], 1e-12)


def buckets(flops: np.ndarray, count: int = 20) -> np.ndarray:
    """The FLOPs bucket (0 … count − 1) of each candidate: ``count`` equal-width intervals from the smallest to
    the largest.

    >>> buckets(np.array([0.0, 4.9, 5.0, 10.0]), 2).tolist()
    [0, 0, 1, 1]
    """
    lo, hi = float(flops.min()), float(flops.max())
    if hi == lo:
        return np.zeros(len(flops), int)
    return np.minimum(((flops - lo) / (hi - lo) * count).astype(int), count - 1)


def klas_select(scores: np.ndarray, flops: np.ndarray, count: int = 20, slack: float = 1.05) -> np.ndarray:
    """Indices of the kept candidates: in each FLOPs bucket, those with Γ ≤ ``slack`` · the bucket's smallest Γ.

    >>> klas_select(np.array([1.0, 1.04, 1.2, 3.0, 2.0]), np.array([1, 1, 1, 9, 9.0]), count=2).tolist()
    [0, 1, 4]
    """
    b = buckets(flops, count)
    keep = [i for i in range(len(scores)) if scores[i] <= slack * scores[b == b[i]].min()]
    return np.array(keep, int)


def lstsq_stitch(h_f: torch.Tensor, h_g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The least-squares linear map ``(W [d_f, d_g], b [d_g])`` with h_f W + b ≈ h_g over the rows (token
    features flattened to rows)."""
    x = torch.cat([h_f, torch.ones(len(h_f), 1, dtype=h_f.dtype)], 1)
    sol = torch.linalg.lstsq(x.double(), h_g.double()).solution.to(h_f.dtype)
    return sol[:-1], sol[-1]


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA (Kornblith et al., 2019) of two feature matrices over the same rows:
    ‖Yᶜᵀ Xᶜ‖²_F / (‖Xᶜᵀ Xᶜ‖_F ‖Yᶜᵀ Yᶜ‖_F), with Xᶜ, Yᶜ centred. 1 for features equal up to rotation and scale."""
    x, y = x.double() - x.double().mean(0), y.double() - y.double().mean(0)
    num = (y.T @ x).pow(2).sum()
    return float(num / ((x.T @ x).pow(2).sum().sqrt() * (y.T @ y).pow(2).sum().sqrt()))


def snnet_stitches(depth: int, window: int = 1) -> list[tuple[int, int]]:
    """SN-Net's rule for two anchors of the same depth: block i of f to block j of g for |i − j| < window (i, j
    0-based, landing before g's last block), in order of i.

    >>> snnet_stitches(3, 2)
    [(0, 0), (0, 1), (1, 0), (1, 1), (2, 1)]
    """
    return [(i, j) for i in range(depth) for j in range(depth - 1) if abs(i - j) < window]


def pareto_auc(flops: np.ndarray, acc: np.ndarray, lo: float, hi: float) -> float:
    """The mean over FLOPs in [lo, hi] of the accuracy frontier F(x) = max{acc_k : flops_k ≤ x} (0 where nothing
    fits): the area under the accuracy–FLOPs frontier, per unit of FLOPs.

    >>> pareto_auc(np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.4, 0.9]), 1.0, 3.0)
    0.5
    """
    order = np.argsort(flops)
    xs, best, area = np.append(np.clip(flops[order], lo, hi), hi), 0.0, 0.0
    for k, idx in enumerate(order):
        best = max(best, float(acc[idx]))
        area += best * (xs[k + 1] - xs[k])
    return float(area / (hi - lo))
