"""FRE-RNN: a feedback-regulated residual RNN trained by Equilibrium Propagation (EP).

Layers s_0 = x (clamped), s_1 … s_N (the recurrent state), read out as ŷ = softmax(W_f s_N + b_f). One step,
every layer at once:
  s_i[t+1] = tanh(W_i s_{i−1}[t] + b_i + α W_{i+1}ᵀ s_{i+1}[t] + s_{i−k}[t] + 1[i = N] β B_f e[t]),
with α the feedback scale (α = 1: the symmetric network of classic EP; FRE: α ≪ 1, so a signal needs only ~N
steps to cross and the state settles fast), the residual s_{i−k} (identity, every layer i > k, when k > 0) that
keeps deep chains trainable, and, in the nudged phase only, the output error e = onehot(y) − ŷ sent back to
s_N through fixed random feedback B_f ``[C, K_N]`` at strength β.
Free phase: T steps from s = 0 with β = 0 → s⁰. Nudged phase: T/2 more steps from s⁰ with β > 0 → s^β.
Contrastive local update (fed to Adam as minus the gradient):
  ΔW_i = (s^β_i − s⁰_i) s⁰_{i−1}ᵀ / β,  Δb_i = (s^β_i − s⁰_i) / β,  and the readout's delta rule ΔW_f = e⁰ s⁰_Nᵀ.
Shapes: s_i ``[B, K_i]``; W_i ``[K_i, K_{i−1}]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class FRERNN(nn.Module):
    def __init__(self, sizes: list[int], classes: int, feedback: float = 0.01, residual: int = 0, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        if residual and len(set(sizes[1:])) > 1:
            raise ValueError(f"residual: identity skips need equal hidden widths, got {sizes[1:]}")
        self.layers = nn.ModuleList(nn.Linear(i, o) for i, o in zip(sizes[:-1], sizes[1:]))
        self.readout = nn.Linear(sizes[-1], classes)
        g = torch.Generator().manual_seed(seed + 1)
        self.register_buffer("B", torch.randn(classes, sizes[-1], generator=g) / classes**0.5)
        self.feedback, self.residual = feedback, residual

    def step(self, x_drive: torch.Tensor, s: list[torch.Tensor], beta: float = 0.0, y=None) -> list[torch.Tensor]:
        """One synchronous step; ``x_drive`` = W_1 x + b_1 (constant while x is clamped)."""
        n, out = len(s), []
        for i in range(n):  # i = 0 … N−1 is layer i + 1
            pre = x_drive if i == 0 else self.layers[i](s[i - 1])
            if i + 1 < n:
                pre = pre + self.feedback * (s[i + 1] @ self.layers[i + 1].weight)  # α W_{i+2}ᵀ s_{i+2}, row form
            if self.residual and i >= self.residual:
                pre = pre + s[i - self.residual]
            if i == n - 1 and beta:
                pre = pre + beta * (self.error(s[i], y) @ self.B)
            out.append(torch.tanh(pre))
        return out

    def error(self, s_last: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """e = onehot(y) − softmax(W_f s_N + b_f), ``[B, C]``."""
        return F.one_hot(y, self.readout.out_features).float() - self.readout(s_last).softmax(1)

    @torch.no_grad()
    def settle(
        self, x: torch.Tensor, steps: int, s=None, beta: float = 0.0, y=None, tol: float = 1e-3
    ) -> tuple[list[torch.Tensor], int]:
        """Run all ``steps`` steps (from 0, or from ``s``); also the first step after which no unit moved more than
        ``tol`` (``steps`` if that never happened). The phases do not end early: with α ≪ 1 the nudge reaching
        layer i is ~α^{N−i} β, far below any usable ``tol``, so a free state stopped at ``tol`` would swamp it."""
        drive = self.layers[0](x)
        s = s or [torch.zeros(len(x), layer.out_features) for layer in self.layers]
        settled = steps
        for t in range(steps):
            new = self.step(drive, s, beta, y)
            moved = max(float((a - b).abs().max()) for a, b in zip(new, s))
            s = new
            if moved < tol and settled == steps:
                settled = t + 1
        return s, settled

    @torch.no_grad()
    def ep_step(self, x: torch.Tensor, y: torch.Tensor, steps: int, beta: float, tol: float = 1e-3) -> int:
        """Free phase (``steps``), nudged phase (``steps // 2``), then set every ``.grad`` to minus the contrastive
        update; returns the free phase's settling step (at ``tol``)."""
        free, settled = self.settle(x, steps, tol=tol)
        nudged, _ = self.settle(x, max(1, steps // 2), [t.clone() for t in free], beta, y, tol)
        pres = [x, *free[:-1]]
        for layer, a, b, pre in zip(self.layers, nudged, free, pres):
            d = (a - b) / beta
            layer.weight.grad = -(d.T @ pre) / len(x)
            layer.bias.grad = -d.mean(0)
        e = self.error(free[-1], y)
        self.readout.weight.grad = -(e.T @ free[-1]) / len(x)
        self.readout.bias.grad = -e.mean(0)
        return settled

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The feed-forward pass (α = 0: the free fixed point of a chain with no feedback) as logits; the backprop
        baseline trains it."""
        s: list[torch.Tensor] = []
        for i, layer in enumerate(self.layers):
            pre = layer(x if i == 0 else s[-1])
            if self.residual and i >= self.residual:
                pre = pre + s[i - self.residual]
            s.append(torch.tanh(pre))
        return self.readout(s[-1])

    @torch.no_grad()
    def predict(self, x: torch.Tensor, steps: int, tol: float = 1e-3) -> tuple[torch.Tensor, int]:
        """Logits at the free phase's state after ``steps`` steps, and its settling step (at ``tol``)."""
        s, settled = self.settle(x, steps, tol=tol)
        return self.readout(s[-1]), settled
