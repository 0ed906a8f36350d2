"""Skipless transformers via initialisation (arXiv 2510.00345): a small ViT whose blocks can drop both residual
connections, with the paper's initialisation that restores the conditioning the skips gave.

Block with skips (pre-LN):   x ← x + MHSA(LN(x));  x ← x + MLP(LN(x))
Skipless block:              x ← MHSA(LN(x));      x ← MLP(LN(x))

Initialisation of a skipless block ("paper"; "default" keeps PyTorch's):

- value/output: W_V = c·U, W_O = c·Vᵀ from the SVD U S Vᵀ of a Gaussian d×d matrix, so W_V W_O = c²·UVᵀ is
  c² times an orthogonal matrix (condition number κ = 1); c = 3.
- query/key: per head h, W_Q^h W_K^hᵀ ≈ αZ + βI with Z ∼ N(0, 1/d) (d×d); the rank-d_h factorisation from the
  SVD M = U S Vᵀ of M = αZ + βI is W_Q^h = U_{:d_h} S_{:d_h}^{½}, W_K^h = V_{:d_h} S_{:d_h}^{½}. The βI part
  biases every token towards attending to itself, which mimics the skip; α = 2, β = 0.6 (supervised).
- MLP: orthogonal weights, zero biases.

Shapes: images ``[B, 1, 28, 28]`` → ``patch``×``patch`` patches → tokens ``[B, T, d]`` (T = (28/patch)²) →
mean-pooled → logits ``[B, classes]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    """Multi-head self-attention with separate W_Q, W_K, W_V [d, d] (heads side by side) and W_O [d, d]."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, d]
        b, t, d = x.shape

        def split(z):
            return z.view(b, t, self.heads, d // self.heads).transpose(1, 2)

        a = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)))
        return self.o(a.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, skip: bool):
        super().__init__()
        self.skip = skip
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.attn(self.ln1(x))
        x = x + a if self.skip else a
        m = self.mlp(self.ln2(x))
        return x + m if self.skip else m


@torch.no_grad()
def skipless_init(block: Block, alpha: float = 2.0, beta: float = 0.6, c: float = 3.0) -> None:
    """The paper's initialisation of one block, in place (see the module docstring)."""
    at = block.attn
    d, heads = at.q.weight.shape[0], at.heads
    dh = d // heads
    u, _, vh = torch.linalg.svd(torch.randn(d, d))
    # nn.Linear computes x Wᵀ, so the matrices of the equations (acting as x W) are the transposed weights
    at.v.weight.copy_((c * u).T)
    at.o.weight.copy_((c * vh).T)
    wq, wk = torch.empty(d, d), torch.empty(d, d)
    for h in range(heads):
        m = alpha * torch.randn(d, d) / d**0.5 + beta * torch.eye(d)
        uu, s, vvh = torch.linalg.svd(m)
        root = s[:dh].sqrt()
        wq[:, h * dh : (h + 1) * dh] = uu[:, :dh] * root
        wk[:, h * dh : (h + 1) * dh] = vvh[:dh].T * root
    at.q.weight.copy_(wq.T)
    at.k.weight.copy_(wk.T)
    for lin in (block.mlp[0], block.mlp[2]):
        nn.init.orthogonal_(lin.weight)
        nn.init.zeros_(lin.bias)


class ViT(nn.Module):
    """variant: "skip", "skipless" (default init) or "skipless-init" (the paper's init)."""

    def __init__(
        self,
        variant: str = "skip",
        depth: int = 8,
        d: int = 64,
        heads: int = 4,
        patch: int = 7,
        classes: int = 10,
        size: int = 28,
        alpha: float = 2.0,
        beta: float = 0.6,
        c: float = 3.0,
    ):
        super().__init__()
        if variant not in ("skip", "skipless", "skipless-init"):
            raise ValueError(f"variant must be skip, skipless or skipless-init, got {variant!r}")
        self.patch = patch
        self.embed = nn.Linear(patch * patch, d)
        self.pos = nn.Parameter(0.02 * torch.randn((size // patch) ** 2, d))
        self.blocks = nn.ModuleList(Block(d, heads, variant == "skip") for _ in range(depth))
        if variant == "skipless-init":
            for blk in self.blocks:
                skipless_init(blk, alpha, beta, c)
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, 1, H, W]`` → patch embeddings plus positions ``[B, T, d]``."""
        p = F.unfold(x, self.patch, stride=self.patch).transpose(1, 2)  # [B, T, patch²]
        return self.embed(p) + self.pos

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tokens(x)
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.ln(h).mean(1))


def attention_jacobian_condition(block: Block, h: torch.Tensor) -> float:
    """κ = σ_max / σ_min of the Jacobian of the block's attention sub-layer, x ↦ x + MHSA(x) (skip) or MHSA(x)
    (skipless), at one sample's LayerNorm-ed tokens ``h`` [T, d]; the Jacobian is [T·d, T·d]. (The LN itself
    is left out: its Jacobian is singular by construction, a null direction per token, with or without skips.)"""
    x = block.ln1(h).detach()

    def f(z):
        a = block.attn(z.view(1, *x.shape)).view(-1)
        return z + a if block.skip else a

    j = torch.autograd.functional.jacobian(f, x.reshape(-1), vectorize=True)
    s = torch.linalg.svdvals(j)
    return (s.max() / s.min()).item()
