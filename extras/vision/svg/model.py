r"""SVG's pieces: a frozen self-supervised ViT, a residual ViT aligned to its statistics, the conv decoder, the KL-VAE
it is compared with, and the SiT flow-matching transformer with QK-norm.

**Latent.** Frozen SSL patch features :math:`F_D \in \mathbb{R}^{B \times D \times N}` concatenated with a residual
ViT's :math:`F_R \in \mathbb{R}^{B \times 8 \times N}`, aligned to :math:`F_D`'s statistics
(``match_distribution`` in ``dino_decoder.py``):

.. math::
    \hat F_R = \frac{F_R - \mu_R}{\sigma_R + \epsilon}\,\sigma_D + \mu_D,

where each :math:`\mu, \sigma` is one detached scalar: the per-channel mean and standard deviation over batch and
tokens, averaged over channels. In training, each sample's residual is replaced by a learned mask token with
probability 0.1 (before the alignment, as in the official code), so the decoder also learns to decode :math:`F_D`
alone.

**Flow matching** (SiT's linear path): with data :math:`x_0`, noise :math:`\varepsilon \sim N(0, I)` and
:math:`t \sim U[0, 1]`,

.. math::
    x_t = (1 - t)\,x_0 + t\,\varepsilon, \qquad v^\star = \frac{dx_t}{dt} = \varepsilon - x_0,

the network regresses :math:`v^\star` (MSE), and sampling integrates :math:`dx/dt = v(x, t)` from :math:`t = 1`
to 0 with Euler steps (``extras.nets.flow_pair`` and ``euler_sample``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from agentkit.extras.nets import ViT, time_features


def align(f_r: torch.Tensor, f_d: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Residual features ``f_r [B, C, N]`` moved to the SSL features' ``f_d [B, D, N]`` scalar mean and std (both
    detached; the module docstring's formula).

    >>> d, r = torch.randn(4, 6, 10) * 3 + 2, torch.randn(4, 2, 10)
    >>> a = align(r, d)
    >>> bool(torch.isclose(a.mean(), d.mean(dim=(0, 2)).mean(), atol=1e-5))
    True
    """
    mu_d, sd_d = f_d.mean(dim=(0, 2)).mean().detach(), f_d.std(dim=(0, 2)).mean().detach()
    mu_r, sd_r = f_r.mean(dim=(0, 2)).mean().detach(), f_r.std(dim=(0, 2)).mean().detach()
    return (f_r - mu_r) / (sd_r + eps) * sd_d + mu_d


class SSLEncoder(nn.Module):
    """The frozen encoder's stand-in for DINO: a small ViT whose patch tokens are the features ``[B, D, N]``,
    trained here with VICReg on two augmented views (its mean-pooled tokens through an expander)."""

    def __init__(self, size: int, patch: int, dim: int, depth: int, heads: int):
        super().__init__()
        self.vit = ViT(1, size, patch, dim, depth, heads)
        self.expander = nn.Sequential(
            nn.Linear(dim, 4 * dim), nn.BatchNorm1d(4 * dim), nn.ReLU(), nn.Linear(4 * dim, 4 * dim)
        )

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.vit.tokens(x)[:, 1:].transpose(1, 2)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.expander(self.features(x).mean(2))


class ResidualEncoder(nn.Module):
    """A small ViT whose patch tokens, projected to ``channels``, carry what the SSL features miss; with the
    learned mask token that replaces a sample's residual in training with probability ``mask_ratio``."""

    def __init__(self, size: int, patch: int, dim: int, depth: int, heads: int, channels: int, mask_ratio: float):
        super().__init__()
        self.vit = ViT(1, size, patch, dim, depth, heads)
        self.proj = nn.Linear(dim, channels)
        self.mask_ratio = mask_ratio
        self.mask_token = nn.Parameter(0.02 * torch.randn(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(self.vit.tokens(x)[:, 1:]).transpose(1, 2)  # [B, C, N]
        if self.training and self.mask_ratio > 0:
            m = (torch.rand(len(h), 1, 1) < self.mask_ratio).float()
            h = h * (1 - m) + self.mask_token.expand_as(h) * m
        return h


class Decoder(nn.Module):
    """Latent ``[B, C, g, g]`` → image ``[B, 1, 4g, 4g]``: a 3×3 conv, a residual block, then two ×2 upsamplings
    (nearest + conv), each followed by a residual block."""

    def __init__(self, channels: int, width: int):
        super().__init__()
        w = width

        def res(c: int) -> nn.Module:
            return _Res(c)

        self.net = nn.Sequential(
            nn.Conv2d(channels, 2 * w, 3, padding=1),
            res(2 * w),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(2 * w, w, 3, padding=1),
            res(w),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(w, w, 3, padding=1),
            res(w),
            nn.GroupNorm(8, w),
            nn.SiLU(),
            nn.Conv2d(w, 1, 3, padding=1),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


class _Res(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.GroupNorm(8, c),
            nn.SiLU(),
            nn.Conv2d(c, c, 3, padding=1),
            nn.GroupNorm(8, c),
            nn.SiLU(),
            nn.Conv2d(c, c, 3, padding=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class KLEncoder(nn.Module):
    """The KL-VAE's encoder (the SD-VAE role): two stride-2 convs to ``[B, 2C, g, g]``, split into mean and log
    variance; ``forward`` returns ``(z, mu, logvar)`` with z sampled in training and the mean in eval."""

    def __init__(self, channels: int, width: int):
        super().__init__()
        w = width
        self.net = nn.Sequential(
            nn.Conv2d(1, w, 3, padding=1),
            _Res(w),
            nn.Conv2d(w, 2 * w, 4, stride=2, padding=1),
            _Res(2 * w),
            nn.Conv2d(2 * w, 2 * w, 4, stride=2, padding=1),
            _Res(2 * w),
            nn.GroupNorm(8, 2 * w),
            nn.SiLU(),
            nn.Conv2d(2 * w, 2 * channels, 3, padding=1),
        )

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = self.net(x).chunk(2, dim=1)
        logvar = logvar.clamp(-30, 20)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp() if self.training else mu
        return z, mu, logvar


class _Attention(nn.Module):
    """Multi-head self-attention with QK-norm (LayerNorm over each head's queries and keys, as SiT with QK-Norm
    in SVG's ``train_svg.py``)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.q_norm, self.k_norm = nn.LayerNorm(dim // heads), nn.LayerNorm(dim // heads)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(self.q_norm(q), self.k_norm(k), v)
        return self.out(y.transpose(1, 2).reshape(b, n, d))


class _Block(nn.Module):
    """A DiT/SiT block: adaLN-Zero modulation by the time embedding around attention and the MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(dim, elementwise_affine=False), nn.LayerNorm(dim, elementwise_affine=False)
        self.attn = _Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))
        self.mod = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        nn.init.zeros_(self.mod[1].weight), nn.init.zeros_(self.mod[1].bias)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        s1, b1, g1, s2, b2, g2 = self.mod(c)[:, None].chunk(6, dim=-1)
        x = x + g1 * self.attn(self.n1(x) * (1 + s1) + b1)
        return x + g2 * self.mlp(self.n2(x) * (1 + s2) + b2)


class SiT(nn.Module):
    """The flow-matching transformer on a latent ``[B, C, g, g]``: a linear patch embedding of each latent
    position (patch 1), learned positions, ``depth`` adaLN-Zero blocks with QK-norm conditioned on the sinusoidal
    embedding of t, and a zero-initialised linear head predicting the velocity, ``[B, C, g, g]``.

    >>> SiT(5, 4, dim=16, depth=1, heads=2)(torch.zeros(2, 5, 4, 4), torch.rand(2)).shape
    torch.Size([2, 5, 4, 4])
    """

    def __init__(self, channels: int, grid: int, dim: int = 128, depth: int = 4, heads: int = 4):
        super().__init__()
        self.inp = nn.Linear(channels, dim)
        self.pos = nn.Parameter(0.02 * torch.randn(1, grid * grid, dim))
        self.t_mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.blocks = nn.ModuleList(_Block(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)
        self.final_mod = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
        self.head = nn.Linear(dim, channels)
        for m in (self.final_mod[1], self.head):
            nn.init.zeros_(m.weight), nn.init.zeros_(m.bias)
        self.dim = dim

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        b, ch, g, _ = x.shape
        h = self.inp(x.flatten(2).transpose(1, 2)) + self.pos
        c = self.t_mlp(time_features(t, self.dim))
        for blk in self.blocks:
            h = blk(h, c)
        shift, scale = self.final_mod(c)[:, None].chunk(2, dim=-1)
        out = self.head(self.norm(h) * (1 + scale) + shift)
        return out.transpose(1, 2).reshape(b, ch, g, g)


def frechet_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    r"""The Fréchet distance between Gaussians fitted to feature sets ``a [N, d]`` and ``b [M, d]`` (FID's formula,
    on whatever features are given): :math:`\lVert\mu_a - \mu_b\rVert^2 + \mathrm{tr}(\Sigma_a + \Sigma_b -
    2(\Sigma_a \Sigma_b)^{1/2})`.

    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.randn(4000, 3, generator=g)
    >>> round(frechet_distance(x, x + 1.0), 2)  # a shift by 1 in each of 3 dimensions
    3.0
    """
    import numpy as np

    a, b = a.double().numpy(), b.double().numpy()
    mu_a, mu_b = a.mean(0), b.mean(0)
    sa, sb = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    # tr (Σa Σb)^½ = Σ √λ over the eigenvalues of Σa^½ Σb Σa^½ (similar to Σa Σb, and symmetric PSD)
    w, u = np.linalg.eigh(sa)
    root = (u * np.sqrt(w.clip(min=0))) @ u.T
    lam = np.linalg.eigvalsh(root @ sb @ root).clip(min=0)
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(sa) + np.trace(sb) - 2 * np.sqrt(lam).sum())
