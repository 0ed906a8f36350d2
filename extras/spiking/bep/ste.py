"""The straight-through-estimator baseline: the same binary MLP trained with float latent weights (BinaryConnect /
BNN): forward sign(W) and sign(z), backward through sign as the identity where |x| ≤ 1 (hardtanh's gradient)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class SignSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x >= 0, 1.0, -1.0)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1).to(g.dtype)


class STEBinaryMLP(nn.Module):
    """±1 weights and activations in the forward pass, float latent weights in [−1, 1]; logits P a_L / √K_L."""

    def __init__(self, sizes: list[int], prototypes: torch.Tensor):
        super().__init__()
        self.weights = nn.ParameterList(
            nn.Parameter(torch.empty(o, i).uniform_(-1, 1)) for i, o in zip(sizes[:-1], sizes[1:])
        )
        self.register_buffer("P", prototypes.float())

    def forward(self, a0: torch.Tensor) -> torch.Tensor:
        a = a0.float()
        for w in self.weights:
            a = SignSTE.apply(a @ SignSTE.apply(w).T / math.sqrt(w.size(1)))  # scaled so |z| ≤ 1 is the STE window
        # the scores / √K_L lie in [−1, 1]; ×4 makes the softmax able to reach confident predictions
        return a @ self.P.T / math.sqrt(self.P.size(1)) * 4.0

    def loss(self, a0: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self(a0), y)

    @torch.no_grad()
    def clip(self) -> None:
        for w in self.weights:
            w.clamp_(-1, 1)


class STEBinaryRNN(nn.Module):
    """The STE baseline of BEP-TT: h_t = sign(W [x_t; h_{t−1}] / √K_in) with ±1 weights in the forward pass,
    backpropagation through time with the straight-through sign; logits 4 P h_T / √K_h."""

    def __init__(self, inputs: int, prototypes: torch.Tensor):
        super().__init__()
        hidden = prototypes.size(1)
        self.weights = nn.ParameterList([nn.Parameter(torch.empty(hidden, inputs + hidden).uniform_(-1, 1))])
        self.register_buffer("P", prototypes.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, T, K_x]`` ±1 → logits ``[B, C]``."""
        w = SignSTE.apply(self.weights[0])
        h = torch.ones(x.size(0), w.size(0))
        for t in range(x.size(1)):
            h = SignSTE.apply(torch.cat([x[:, t].float(), h], 1) @ w.T / math.sqrt(w.size(1)))
        return h @ self.P.T / math.sqrt(self.P.size(1)) * 4.0

    loss = STEBinaryMLP.loss
    clip = STEBinaryMLP.clip
