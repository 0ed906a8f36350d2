"""LRF-Dyn: spiking self-attention with local receptive fields, rewritten as causal neuron dynamics.

Spiking self-attention (SSA, Spikformer), per head of k channels over N tokens (spikes Q, K, V ∈ {0, 1}):
  SSA:      y_n = s · q_n Σ_{j=1}^{N} k_jᵀ v_j                              (all tokens; Spikformer computes (QKᵀ)V)
  LRF-SSA:  y = SSA + λ Σ_δ PW_δ(DW_δ(V))                                   (3×3 depthwise-separable convs of V on
            the token grid at dilations δ: local receptive fields)
  LRF-Dyn:  X_n = A ⊙ X_{n−1} + k_nᵀ v_n,  y_n = s · q_n X_n + λ Σ_δ PW_δ(DW_δ(V))_n      (tokens in raster order)
The charge (X_n integrates each token's kᵀv), decay A = σ(θ) ∈ (0, 1)^{k×k} per head (its tri-diagonal starts
near 1, the "dendrites" coupling neighbouring channels, the rest leaks faster) and the LIF neuron that fires on
y and resets: a causal rewrite whose inference state is X, h·k² = k·d values, instead of K and V for every
token. Training computes X for all n at once as a causal convolution with the kernel A^m (m = 0 … N−1), by FFT;
``dyn_recurrent`` is the token-by-token form (equal, tested). With A = 1 LRF-Dyn is causal LRF-SSA exactly.
Shapes: q, k, v ``[..., h, N, k]``; X ``[..., h, k, k]``; A ``[h, k, k]``.
"""

from __future__ import annotations

import torch
from torch import nn


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """q_n Σ_j k_jᵀ v_j over all j, or over j ≤ n (causal), ``[..., h, N, k]``."""
    if not causal:
        return q @ (k.transpose(-1, -2) @ v)
    n = q.size(-2)
    return ((q @ k.transpose(-1, -2)) * torch.ones(n, n).tril()) @ v


def dyn_parallel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """q_n X_n with X_n = Σ_{j ≤ n} A^{n−j} ⊙ k_jᵀ v_j, by an FFT causal convolution along the tokens (kept as the
    last, contiguous dim: [..., h, k, k, N])."""
    n = q.size(-2)
    qt, kt, vt = q.transpose(-1, -2), k.transpose(-1, -2), v.transpose(-1, -2)  # [..., h, k, N]
    kv = kt.unsqueeze(-2) * vt.unsqueeze(-3)  # k_jᵀ v_j for every j: [..., h, k, k, N]
    kernel = decay.unsqueeze(-1) ** torch.arange(n, dtype=q.dtype)  # A^m: [h, k, k, N]
    x = torch.fft.irfft(torch.fft.rfft(kv, 2 * n) * torch.fft.rfft(kernel, 2 * n), 2 * n)[..., :n]
    return torch.einsum("...an,...abn->...nb", qt, x)


def dyn_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """The same, token by token, holding only X ``[..., h, k, k]`` (the inference form)."""
    x = torch.zeros(*q.shape[:-2], q.size(-1), q.size(-1))
    out = []
    for i in range(q.size(-2)):
        x = decay * x + k[..., i, :].unsqueeze(-1) * v[..., i, :].unsqueeze(-2)  # charge
        out.append((q[..., i, :].unsqueeze(-2) @ x).squeeze(-2))
    return torch.stack(out, -2)


class LIF(nn.Module):
    """snntorch's leaky integrate-and-fire neuron (subtractive reset, arctan surrogate) run over the T steps of
    ``[T, ...]``."""

    def __init__(self, beta: float = 0.5):
        super().__init__()
        import snntorch as snn
        from snntorch import surrogate

        self.lif = snn.Leaky(beta=beta, spike_grad=surrogate.atan())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mem, out = self.lif.init_leaky(), []
        for t in range(x.size(0)):
            spk, mem = self.lif(x[t], mem)
            out.append(spk)
        return torch.stack(out)


class LinBNLIF(nn.Module):
    """Linear → BatchNorm over channels → LIF, on ``[T, B, N, d]``."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.lin, self.bn, self.lif = nn.Linear(d_in, d_out, bias=False), nn.BatchNorm1d(d_out), LIF()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.lin(x)
        return self.lif(self.bn(z.flatten(0, -2)).view_as(z))


class DWSep(nn.Module):
    """3×3 depthwise conv at a dilation, then 1×1 pointwise, on the token grid."""

    def __init__(self, d: int, dilation: int):
        super().__init__()
        self.dw = nn.Conv2d(d, d, 3, padding=dilation, dilation=dilation, groups=d, bias=False)
        self.pw = nn.Conv2d(d, d, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pw(self.dw(x))


class Attention(nn.Module):
    """SSA, LRF-SSA or LRF-Dyn on ``[T, B, N, d]`` spikes over a ``grid × grid`` token grid."""

    def __init__(self, kind: str, d: int, heads: int, grid: int, dilations: list[int], scale: float = 0.125):
        super().__init__()
        if kind not in ("ssa", "lrf", "dyn"):
            raise ValueError(f"kind: {kind!r} is not ssa, lrf or dyn")
        self.kind, self.heads, self.grid, self.scale = kind, heads, grid, scale
        self.q, self.k, self.v = LinBNLIF(d, d), LinBNLIF(d, d), LinBNLIF(d, d)
        self.out_bn, self.out_lif, self.proj = nn.BatchNorm1d(d), LIF(), LinBNLIF(d, d)
        if kind != "ssa":
            self.lrf = nn.ModuleList(DWSep(d, dil) for dil in dilations)
            self.lam = nn.Parameter(torch.tensor(0.5))
        if kind == "dyn":
            kd = d // heads
            tri = (torch.ones(kd, kd).triu(-1).tril(1) > 0).expand(heads, kd, kd)
            self.theta = nn.Parameter(torch.where(tri, 4.6, 2.2))  # σ: 0.99 on the tri-diagonal, 0.90 elsewhere

    def decay(self) -> torch.Tensor:
        return torch.sigmoid(self.theta)

    def mix(self, q, k, v, recurrent: bool = False) -> torch.Tensor:
        """Token mixing on heads ``[T, B, h, N, k]``."""
        if self.kind != "dyn":
            return linear_attention(q, k, v)
        return (dyn_recurrent if recurrent else dyn_parallel)(q, k, v, self.decay())

    def forward(self, x: torch.Tensor, recurrent: bool = False) -> torch.Tensor:
        t, b, n, d = x.shape
        heads = lambda z: z.view(t, b, n, self.heads, d // self.heads).transpose(2, 3)  # noqa: E731
        q, k, v = self.q(x), self.k(x), self.v(x)
        y = self.scale * self.mix(heads(q), heads(k), heads(v), recurrent).transpose(2, 3).reshape(t, b, n, d)
        if self.kind != "ssa":
            grid = v.reshape(t * b, self.grid, self.grid, d).permute(0, 3, 1, 2)
            local = sum(conv(grid) for conv in self.lrf).permute(0, 2, 3, 1).reshape(t, b, n, d)
            y = y + self.lam * local
        y = self.out_lif(self.out_bn(y.flatten(0, -2)).view_as(y))
        return self.proj(y)

    def state_bytes(self, n: int, d: int, dilations: list[int]) -> int:
        """Bytes the token mixing must hold at inference, per image, block and time step (spikes 1 byte, reals
        4): SSA / LRF-SSA as Spikformer runs them, K and V spikes of all tokens plus the h×N×N attention map
        (LRF-SSA adds its two conv outputs); LRF-Dyn, the state X (h·k² = k·d reals) plus the V spikes its
        dilated convs still need when streaming in raster order (2·δ_max·(grid + 1) + 1 tokens) and one conv
        output row."""
        if self.kind in ("ssa", "lrf"):
            extra = 2 * len(dilations) * n * d * 4 if self.kind == "lrf" else 0
            return 2 * n * d + 4 * self.heads * n * n + extra
        window = 2 * max(dilations) * (self.grid + 1) + 1
        return 4 * d * (d // self.heads) + window * d + 4 * d


class SpikingTransformer(nn.Module):
    """A tiny Spikformer: conv patch stem → LIF, ``blocks`` × (attention, MLP) with spike residuals, a linear head on
    the spike counts of every token averaged over the T time steps (the image is fed at every step: direct coding).
    The head reads all N·d counts, not Spikformer's global average: with d = 32 and a one-conv stem, pooling the
    tokens throws away where things are (SSA trained to ~0.5 on Fashion-MNIST with it)."""

    def __init__(
        self, kind: str, d: int = 64, heads: int = 8, blocks: int = 2, steps: int = 4, patch: int = 4,
        dilations: list[int] | None = None, image: int = 28, classes: int = 10,
    ):  # fmt: skip
        super().__init__()
        self.steps, self.grid, self.dilations = steps, image // patch, dilations or [1, 2]
        self.stem, self.stem_bn, self.stem_lif = nn.Conv2d(1, d, patch, patch, bias=False), nn.BatchNorm2d(d), LIF()
        self.attn = nn.ModuleList(Attention(kind, d, heads, self.grid, self.dilations) for _ in range(blocks))
        self.mlp = nn.ModuleList(nn.Sequential(LinBNLIF(d, 4 * d), LinBNLIF(4 * d, d)) for _ in range(blocks))
        self.d = d
        self.head = nn.Linear(self.grid**2 * d, classes)

    def forward(self, img: torch.Tensor, recurrent: bool = False) -> torch.Tensor:
        """``img [B, 1, H, W]`` → logits ``[B, classes]``."""
        z = self.stem_bn(self.stem(img)).flatten(2).transpose(1, 2)  # [B, N, d]
        x = self.stem_lif(z.unsqueeze(0).expand(self.steps, *z.shape))  # [T, B, N, d]
        for attn, mlp in zip(self.attn, self.mlp):
            x = x + attn(x, recurrent)
            x = x + mlp(x)
        return self.head(x.mean(0).flatten(1))

    def state_bytes(self) -> int:
        n, d = self.grid**2, self.d
        return sum(a.state_bytes(n, d, self.dilations) for a in self.attn)
