"""Tversky similarity and the Tversky projection layer (Doumbouya et al., "Tversky Neural Networks", ICLR 2026;
official code: ``mdoumbouya/tversky``, PyPI ``tversky``).

Objects are vectors; a learned feature bank Ω ∈ R^{K×d} defines K features. Object a *has* feature k when
a·Ω_k > 0, with salience f_k(a) = a·Ω_k · 1[a·Ω_k > 0]. For inputs x [n, d] and prototypes Π [m, d]:

    S(x, π) = θ · f(x ∩ π) − α · f(x − π) − β · f(π − x)                       (contrast model)
    S(x, π) = f(x ∩ π) / (f(x ∩ π) + α f(x − π) + β f(π − x) + 1)             (ratio model)

Intersection measures f(x ∩ π) [n, m]: ``product`` Σ_k f_k(x) f_k(π); or, with the one-sided sums
i_x = Σ_k f_k(x) 1[π has k] and i_π = Σ_k 1[x has k] f_k(π): ``min``, ``max``, ``mean``, ``gmean`` (geometric)
and ``softmin`` (−log(e^{−i_x} + e^{−i_π})). Difference measures f(a − b): ``ignorematch`` Σ_k f_k(a) 1[b lacks
k] (features of a that b lacks); ``substractmatch`` adds, on shared features, the excess of a's one-sided sum
over b's. A ``TverskyProjection`` scores every input against C learned prototypes: a drop-in for
``nn.Linear(d, C)`` whose single layer can compute XOR, which no linear layer can.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

INTERSECTIONS = ("product", "min", "max", "mean", "gmean", "softmin")
DIFFERENCES = ("ignorematch", "substractmatch")


def _features(a: torch.Tensor, bank: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Saliences f(a) [n, K] (zero where a lacks the feature) and membership 1[a has k] [n, K] as floats."""
    dot = a @ bank.T
    has = (dot > 0).to(a.dtype)
    return dot * has, has


def intersection(fa, ha, fb, hb, reduction: str = "product") -> torch.Tensor:
    """f(a ∩ b) [n, m] from saliences/memberships of a [n, K] and b [m, K]."""
    if reduction == "product":
        return fa @ fb.T
    ia, ib = fa @ hb.T, ha @ fb.T
    if reduction == "min":
        return torch.minimum(ia, ib)
    if reduction == "max":
        return torch.maximum(ia, ib)
    if reduction == "mean":
        return (ia + ib) / 2
    if reduction == "gmean":
        return torch.sqrt((ia * ib).clamp(min=1e-12))  # (the gradient of sqrt at 0 is infinite)
    if reduction == "softmin":
        return -torch.logsumexp(torch.stack([-ia, -ib]), 0)
    raise ValueError(f"unknown intersection reduction {reduction!r}; choose from {INTERSECTIONS}")


def difference(fa, ha, fb, hb, reduction: str = "ignorematch") -> torch.Tensor:
    """f(a − b) [n, m]: a's salience on the features b lacks (plus, for ``substractmatch``, a's excess on shared
    features)."""
    out = fa @ (1 - hb).T
    if reduction == "ignorematch":
        return out
    if reduction == "substractmatch":
        ia, ib = fa @ hb.T, ha @ fb.T
        return out + (ia - ib).clamp(min=0)
    raise ValueError(f"unknown difference reduction {reduction!r}; choose from {DIFFERENCES}")


def tversky_similarity(
    x: torch.Tensor,
    y: torch.Tensor,
    bank: torch.Tensor,
    alpha,
    beta,
    theta,
    model: str = "contrast",
    intersection_reduction: str = "product",
    difference_reduction: str = "ignorematch",
    normalize: bool = False,
) -> torch.Tensor:
    """S [n, m] between x [n, d] and y [m, d] over the feature bank [K, d] (equations in the module docstring)."""
    if normalize:
        x, y = F.normalize(x, dim=-1), F.normalize(y, dim=-1)
    fx, hx = _features(x, bank)
    fy, hy = _features(y, bank)
    inter = intersection(fx, hx, fy, hy, intersection_reduction)
    d_xy = difference(fx, hx, fy, hy, difference_reduction)
    d_yx = difference(fy, hy, fx, hx, difference_reduction).T
    if model == "contrast":
        return theta * inter - alpha * d_xy - beta * d_yx
    if model == "ratio":
        return inter / (inter + alpha * d_xy + beta * d_yx + 1)
    raise ValueError(f"unknown similarity model {model!r} (contrast or ratio)")


class TverskyProjection(nn.Module):
    """x [..., d] -> S(x, Π) [..., C]: similarity to C learned prototypes over a bank of K learned features.

    Parameters as in the paper: Ω and Π initialised uniform on [0, init_scale) (the paper: init_scale = 1),
    θ = 1, α = β = 0.5, all learned. With many input features the paper's scale makes |S| grow like d²·K at
    initialisation (softmax saturates); ``init_scale = d ** -0.5`` keeps x·Ω_k of order one for inputs of order
    one.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bank_size: int,
        model: str = "contrast",
        intersection_reduction: str = "product",
        difference_reduction: str = "ignorematch",
        normalize: bool = False,
        init_scale: float = 1.0,
    ):
        super().__init__()
        if intersection_reduction not in INTERSECTIONS or difference_reduction not in DIFFERENCES:
            raise ValueError(f"reductions: intersection in {INTERSECTIONS}, difference in {DIFFERENCES}")
        self.bank = nn.Parameter(init_scale * torch.rand(bank_size, in_features))
        self.prototypes = nn.Parameter(init_scale * torch.rand(out_features, in_features))
        self.theta = nn.Parameter(torch.tensor(1.0))
        self.alpha = nn.Parameter(torch.tensor(0.5))
        self.beta = nn.Parameter(torch.tensor(0.5))
        self.model, self.normalize = model, normalize
        self.reductions = (intersection_reduction, difference_reduction)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        s = tversky_similarity(
            x.reshape(-1, shape[-1]),
            self.prototypes,
            self.bank,
            self.alpha,
            self.beta,
            self.theta,
            self.model,
            *self.reductions,
            normalize=self.normalize,
        )
        return s.reshape(*shape[:-1], -1)

    def extra_repr(self) -> str:
        k, d = self.bank.shape
        return f"in={d}, out={self.prototypes.shape[0]}, bank={k}, model={self.model}, reductions={self.reductions}"
