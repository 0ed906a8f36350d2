"""Hierarchical Group DRO (arXiv 2510.02818), with ERM and Group DRO as its special cases.

Objective: min_θ max_{β∈Δ_G} Σ_g β_g · E_{(z,y)∼P_g} [ max_{‖z′−z‖∞ ≤ ε_g} ℓ(head(z′), y) ]

- inter-group ambiguity: the simplex weights β over the G groups (Group DRO's online mirror ascent, q below);
- intra-group ambiguity: an ℓ∞ ball of radius ε_g around each sample's penultimate features z (transport cost
  infinite across classes, so y is fixed), solved by one FGSM step z′ = z + ε_g·sign(∇_z ℓ);
- radii shrink with group size, ε_g = ε · n_g^{-½} / max_h n_h^{-½}: the smallest group gets the full ε, since
  its empirical distribution is the least certain;
- weights: q_g ← q_g · exp(η (ℓ_g + C/√n_g)), normalised (C/√n_g: Group DRO's generalisation adjustment),
  and the loss is Σ_g q_g ℓ_g.

ε = 0 gives Group DRO; ``mode="erm"`` the plain mean.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def group_radii(counts: torch.Tensor, eps: float) -> torch.Tensor:
    """ε_g = ε · n_g^{-½} / max_h n_h^{-½}, ``[G]``.

    >>> [round(r, 6) for r in group_radii(torch.tensor([400., 100., 100., 25.]), 0.2).tolist()]
    [0.05, 0.1, 0.1, 0.2]
    """
    inv = counts.float().clamp(min=1).rsqrt()
    return eps * inv / inv.max()


class GroupLoss:
    """The training loss of ERM, Group DRO or Hierarchical Group DRO.

    counts ``[G]``: training samples per group; eps: ε of the intra-group ball on z (0: none); eta: η of the
    weight update; adjust: C of the C/√n_g adjustment.
    """

    def __init__(
        self, counts: torch.Tensor, mode: str = "hdro", eps: float = 0.0, eta: float = 0.01, adjust: float = 0.0
    ):
        if mode not in ("erm", "group_dro", "hdro"):
            raise ValueError(f"mode must be erm, group_dro or hdro, got {mode!r}")
        self.mode, self.eta = mode, eta
        self.counts = counts.float()
        self.radii = group_radii(counts, eps) if mode == "hdro" else torch.zeros(len(counts))
        self.adj = adjust / self.counts.clamp(min=1).sqrt()
        self.q = torch.full((len(counts),), 1.0 / len(counts))

    def perturb(self, z: torch.Tensor, y: torch.Tensor, g: torch.Tensor, head: nn.Module) -> torch.Tensor:
        """z′ = z + ε_g · sign(∇_z ℓ(head(z), y)): one FGSM step per sample; the step itself carries no gradient,
        so the loss at z′ still trains both the features and the head."""
        zd = z.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(F.cross_entropy(head(zd), y, reduction="sum"), zd)
        return z + self.radii[g].unsqueeze(1) * grad.sign()

    def __call__(self, z: torch.Tensor, y: torch.Tensor, g: torch.Tensor, head: nn.Module) -> torch.Tensor:
        """z ``[B, D]`` features, y ``[B]`` labels, g ``[B]`` groups → scalar loss (updates q in place)."""
        if self.mode == "hdro" and bool((self.radii[g] > 0).any()):
            z = self.perturb(z, y, g, head)
        per = F.cross_entropy(head(z), y, reduction="none")
        if self.mode == "erm":
            return per.mean()
        n = torch.bincount(g, minlength=len(self.q)).float()
        group_loss = torch.zeros_like(self.q).index_add(0, g, per) / n.clamp(min=1)  # absent groups: 0
        self.q = self.q * torch.exp(self.eta * (group_loss.detach() + self.adj))
        self.q = self.q / self.q.sum()
        return group_loss @ self.q
