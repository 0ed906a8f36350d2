"""Denoising dequantisation (arXiv 2409.09245): quantisation as additive noise, undone by ridge regression.

Per block of ``block`` consecutive values along the last dimension (b = block min, s = (max − min)/(2^bits − 1),
both without gradient):

    f = (x − b) / s,    q = f + sg(round(f) − f)                     (value: the integer code; ∂q/∂x = 1/s)

Dequantisers, x̂ = g(q):

- ridge (the method):  g(q) = Cov(x, q) / (Var(q) + λ) · (q − q̄) + x̄, per block, λ = 0.01. The slope and
  intercept are the least-squares regression of x on its code, so x̂ is the denoised estimate of x (at 1 bit:
  roughly the two conditional means, not the block's min and max), and gradients reach x through q̄, x̄ and
  Cov as well as through q.
- ste (the baseline): g(q) = s·q + b, i.e. x̂ = round-to-grid(x) with the straight-through gradient ∂x̂/∂x = 1.

Sparsification is the same noise model: with ``nm = (n, m)`` each group of m values keeps its n largest
magnitudes, x_s = x + sg(mask·x − x) (the extra stop-gradient error before f); with ``bits=None`` the code
is x_s itself and ridge regresses x on it.

Shapes: any ``[..., d]``; blocks of ``block`` along d when it divides d, else one block per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class QuantSpec:
    """bits: 1–8, or None for no rounding; dequant: ridge | ste; nm: (n, m) sparsity or None."""

    bits: int | None = 4
    dequant: str = "ridge"
    block: int = 128
    lam: float = 0.01
    nm: tuple[int, int] | None = None


def sg(t: torch.Tensor) -> torch.Tensor:
    return t.detach()


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    d = x.shape[-1]
    return x.reshape(*x.shape[:-1], d // block, block) if d % block == 0 and d > block else x.unsqueeze(-2)


def sparsify(x: torch.Tensor, n: int, m: int) -> torch.Tensor:
    """n:m sparsity with a straight-through error: value mask·x, gradient 1 (``[..., d]``, m divides d)."""
    g = x.reshape(*x.shape[:-1], -1, m)
    keep = torch.zeros_like(g, dtype=torch.bool).scatter(-1, g.abs().topk(n, -1).indices, True)
    return x + sg((g * keep).reshape(x.shape) - x)


def quantize(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """x̂ = g(q(x)) as above; same shape as x."""
    if spec.bits is None and spec.nm is None:
        return x
    xs = sparsify(x, *spec.nm) if spec.nm else x
    xb, xsb = _blocks(x, spec.block), _blocks(xs, spec.block)
    if spec.bits is not None:
        lo, hi = sg(xsb).amin(-1, keepdim=True), sg(xsb).amax(-1, keepdim=True)
        s = ((hi - lo) / (2**spec.bits - 1)).clamp(min=1e-8)
        f = (xsb - lo) / s
        q = f + sg(f.round() - f)
    else:
        lo, s, q = 0.0, 1.0, xsb
    if spec.dequant == "ste":
        out = s * q + lo
    elif spec.dequant == "ridge":
        qc, xc = q - q.mean(-1, keepdim=True), xb - xb.mean(-1, keepdim=True)
        slope = (xc * qc).mean(-1, keepdim=True) / (qc.pow(2).mean(-1, keepdim=True) + spec.lam)
        out = slope * qc + xb.mean(-1, keepdim=True)
    else:
        raise ValueError(f"dequant must be ridge or ste, got {spec.dequant!r}")
    return out.reshape(x.shape)


class QuantLinear(nn.Linear):
    """nn.Linear whose input (activations) and weight pass through ``quantize`` on every forward."""

    def __init__(
        self, d_in: int, d_out: int, act: QuantSpec | None = None, weight: QuantSpec | None = None, bias: bool = True
    ):
        super().__init__(d_in, d_out, bias=bias)
        self.act, self.wspec = act, weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = quantize(x, self.act) if self.act else x
        w = quantize(self.weight, self.wspec) if self.wspec else self.weight
        return F.linear(x, w, self.bias)
