r"""Screener's three networks (Goncharov et al., ICLR 2026) and the baselines it is compared with.

Anomaly segmentation as density estimation on dense self-supervised features:

1. **Descriptors** y = f(x) ∈ R^{D×S}: a UNet trained with dense VICReg. Two overlapping crops of a volume, each
   augmented (intensity scale and shift, noise, flips), are encoded; the features of the voxels the crops share
   are the pairs (``dense_pairs``).
2. **Condition** c = g(x) ∈ R^{C×S}: a second UNet trained the same way, except that each crop has random blocks
   masked out (``mask_blocks``). Its features must agree across views whatever each one hides, so they are what the
   context predicts at a voxel (which organ belongs there), not what the voxel shows.
3. **Density** q(y | c) = N(μ(c), diag σ²(c)), with μ and log σ² from 1×1×1 convolutions of c, i.e. an MLP applied
   to each voxel's c alone (``GaussianHead``). It is trained on normal volumes with f and g frozen.

The anomaly map is

.. math::
    s(v) = -\log q(y_v \mid c_v) = \tfrac12 \sum_{d=1}^{D} \Big[\log 2\pi + \log\sigma_d^2(c_v)
           + \frac{(y_{v,d} - \mu_d(c_v))^2}{\sigma_d^2(c_v)}\Big].

The comparisons swap c: a constant (the unconditional density), sin-cos features of the voxel's coordinates
(``sincos``: the positional condition of the earlier UVAS framework) and, apart from the density family, an
autoencoder's reconstruction error.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from agentkit.extras.nets import mlp


def unet(dims: int, in_ch: int, out_ch: int, width: int) -> nn.Module:
    """MONAI's ``BasicUNet`` (4 poolings) with features ``(w, w, 2w, 4w, 8w, w)``, batch norm, no dropout. Input
    ``[B, in_ch, *S]`` → ``[B, out_ch, *S]``; S need not divide by 16 (the up path pads)."""
    from monai.networks.nets import BasicUNet

    w = width
    return BasicUNet(dims, in_ch, out_ch, features=(w, w, 2 * w, 4 * w, 8 * w, w), norm="batch", dropout=0.0)


def autoencoder(dims: int, width: int) -> nn.Module:
    """MONAI's ``AutoEncoder``: three stride-2 convolutions (``w, 2w, 4w`` channels) and back, no skip connections,
    so it cannot copy what it has not learnt to reconstruct. ``[B, 1, *S]`` → ``[B, 1, *S]`` (S divisible by 8)."""
    from monai.networks.nets import AutoEncoder

    return AutoEncoder(dims, 1, 1, channels=(width, 2 * width, 4 * width), strides=(2, 2, 2), norm="batch")


def sincos(shape: tuple[int, ...], freqs: int) -> torch.Tensor:
    """Sin-cos features of each voxel's coordinates u ∈ [0, 1) per axis: sin(2^k π u), cos(2^k π u) for k < ``freqs``.
    Returns ``[2 · len(shape) · freqs, *shape]``.

    >>> sincos((4, 4), 2).shape
    torch.Size([8, 4, 4])
    """
    grids = torch.meshgrid(*[(torch.arange(n) + 0.5) / n for n in shape], indexing="ij")
    out = [f(2**k * math.pi * g) for g in grids for k in range(freqs) for f in (torch.sin, torch.cos)]
    return torch.stack(out)


def gaussian_nll(y: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """−log N(y; μ, diag σ²) summed over the last axis: ``[..., D]`` → ``[...]``.

    >>> y, mu, lv = torch.tensor([[1.0, 2.0]]), torch.zeros(1, 2), torch.tensor([[0.0, math.log(4.0)]])
    >>> round(float(gaussian_nll(y, mu, lv)[0]), 4)  # ½[(log 2π + 1) + (log 2π + log 4 + 1)]
    3.531
    """
    return 0.5 * (math.log(2 * math.pi) + logvar + (y - mu) ** 2 / logvar.exp()).sum(-1)


class GaussianHead(nn.Module):
    """q(y | c) = N(μ(c), diag σ²(c)) per voxel: an MLP on c (the same maths as 1×1×1 convolutions), log σ²
    clamped to [−8, 8]. ``cond_dim = 0`` is the unconditional density (μ and σ are learnt constants)."""

    def __init__(self, cond_dim: int, y_dim: int, hidden: int):
        super().__init__()
        self.cond_dim = cond_dim
        if cond_dim:
            self.net = mlp(cond_dim, hidden, 2 * y_dim, layers=2, act=nn.GELU)
        else:
            self.const = nn.Parameter(torch.zeros(2 * y_dim))

    def forward(self, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``c [..., cond_dim]`` → (μ, log σ²), each ``[..., y_dim]``."""
        h = self.net(c) if self.cond_dim else self.const.expand(*c.shape[:-1], -1)
        mu, logvar = h.chunk(2, -1)
        return mu, logvar.clamp(-8, 8)

    def nll(self, y: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """−log q(y | c) per voxel: ``y [..., D], c [..., C]`` → ``[...]``."""
        return gaussian_nll(y, *self(c))


def mask_blocks(x: torch.Tensor, ratio: float, block: int, gen: torch.Generator) -> torch.Tensor:
    """``x [B, 1, *S]`` with about ``ratio`` of it set to 0 in cubes (squares) of side ``block``: a coarse random grid
    upsampled, so the masked share is ``ratio`` in expectation."""
    spatial = x.shape[2:]
    coarse = [math.ceil(n / block) for n in spatial]
    keep = (torch.rand(x.shape[0], 1, *coarse, generator=gen) >= ratio).float()
    for axis, n in enumerate(spatial):
        keep = keep.repeat_interleave(block, dim=2 + axis).narrow(2 + axis, 0, n)
    return x * keep


def augment(x: torch.Tensor, noise: float, gen: torch.Generator) -> tuple[torch.Tensor, list[list[int]]]:
    """Intensity scale in [0.9, 1.1] and shift in [−0.05, 0.05] per sample, Gaussian noise of std ``noise``, and a
    flip of each spatial axis with probability ½. Returns the view and, per sample, the axes flipped (to undo on
    the features, ``unflip``)."""
    b = x.shape[0]
    shape = (b,) + (1,) * (x.dim() - 1)
    scale = 0.9 + 0.2 * torch.rand(shape, generator=gen)
    shift = 0.1 * torch.rand(shape, generator=gen) - 0.05
    x = x * scale + shift + noise * torch.randn(x.shape, generator=gen)
    flips = [[2 + a for a in range(x.dim() - 2) if torch.rand((), generator=gen) < 0.5] for _ in range(b)]
    return torch.stack([v.flip([a - 1 for a in f]) if f else v for v, f in zip(x, flips)]), flips


def unflip(z: torch.Tensor, flips: list[list[int]]) -> torch.Tensor:
    """Undo ``augment``'s flips on feature maps ``z [B, D, *S]`` so that voxel positions match the input's again."""
    return torch.stack([v.flip([a - 1 for a in f]) if f else v for v, f in zip(z, flips)])


def two_crops(x: torch.Tensor, crop: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two random crops of side ``crop`` of each sample of ``x [B, 1, *S]`` (they overlap in at least
    ``2·crop − S`` voxels per axis). Returns ``(a [B, 1, crop…], b [same], offsets [B, 2, ndim])``."""
    b = x.shape[0]
    offs = torch.stack(
        [torch.randint(0, n - crop + 1, (b, 2), generator=gen) for n in x.shape[2:]], -1
    )  # [B, 2 views, nd]
    views = []
    for v in range(2):
        views.append(
            torch.stack(
                [x[(i, slice(None)) + tuple(slice(o, o + crop) for o in offs[i, v].tolist())] for i in range(b)]
            )
        )
    return views[0], views[1], offs


def dense_pairs(
    za: torch.Tensor, zb: torch.Tensor, offs: torch.Tensor, crop: int, per_sample: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """The features both crops give to the same input voxels: ``za, zb [B, D, crop…]`` (flips undone),
    ``offs`` from ``two_crops``; up to ``per_sample`` shared voxels drawn per sample. Returns ``[N, D]`` twice, row i
    of each the same voxel."""
    rows_a, rows_b = [], []
    for i in range(za.shape[0]):
        oa, ob = offs[i, 0], offs[i, 1]
        lo, hi = torch.maximum(oa, ob), torch.minimum(oa, ob) + crop  # the overlap, in input coordinates
        grid = torch.stack(
            torch.meshgrid(*[torch.arange(int(a), int(b)) for a, b in zip(lo, hi)], indexing="ij"), -1
        ).reshape(-1, len(lo))
        pick = grid[torch.randperm(len(grid), generator=gen)[:per_sample]]
        ia, ib = (pick - oa).T, (pick - ob).T
        rows_a.append(za[i][(slice(None), *ia)].T)
        rows_b.append(zb[i][(slice(None), *ib)].T)
    return torch.cat(rows_a), torch.cat(rows_b)


def channels_last(z: torch.Tensor) -> torch.Tensor:
    """``[B, D, *S]`` → ``[B · prod(S), D]`` (one row per voxel)."""
    return z.movedim(1, -1).reshape(-1, z.shape[1])
