"""DiffPC: predictive coding whose messages are ternary spikes that encode changes.

Predictive coding (PC) on layers x_0 (the input, clamped), x_1 … x_{L−1} (free) and x_L (the output, clamped
to the one-hot label while training):
  prediction μ_l = W_l φ(x_{l−1}) + b_l (φ = ReLU, identity on the input); error ε_l = x_l − μ_l;
  energy F = Σ_l ½‖ε_l‖²; relaxation x_l += γ (−ε_l + φ'(x_l) ⊙ W_{l+1}ᵀ ε_{l+1}) for the free layers;
  then the local weight rule ΔW_l ∝ ε_l φ(x_{l−1})ᵀ (fed to AdamW as the gradient −ε_l φ(x_{l−1})ᵀ / B).
Float PC sends φ(x_l) forward and ε_l backward as 32-bit numbers at every step. DiffPC sends them as changes:
every sender keeps a target x_T (the value it means) and an announced value x_A (what its receivers know);
  s = sign(x_T − x_A) · 1[|x_T − x_A| > T_θ] ∈ {−1, 0, +1}, x_A += T_θ s,
and each receiver accumulates x_F += T_θ W s (so x_F = W x_A without any value crossing the wire). The
threshold schedule T_θ(t) = 2^m / 2^{t mod n} sweeps coarse to fine, so after each cycle of n steps a value
that moved less than 2^{m+1} is known to within 2^{m+1−n}. The weight rule uses, at each synapse, the
presynaptic announced value and the neuron's own error: all information a synapse has locally.
Shapes: values ``[B, K_l]``; spikes int8 ``[B, K_l]``; W_l ``[K_l, K_{l−1}]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


def threshold(t: int, m: int, n: int) -> float:
    """T_θ(t) = 2^m / 2^{t mod n}."""
    return 2.0**m / 2.0 ** (t % n)


def spikes(target: torch.Tensor, announced: torch.Tensor, theta: float) -> torch.Tensor:
    """Ternary spikes sign(x_T − x_A) · 1[|x_T − x_A| > T_θ], int8."""
    d = target - announced
    return (torch.sign(d) * (d.abs() > theta)).to(torch.int8)


class Channel:
    """One layer's outgoing message: the announced values, and what the receiving layer has accumulated.

    ``weight`` maps the sender's values to the receiver's input (W_l for a prediction, W_lᵀ for an error);
    ``start`` is what the receiver holds before any spike (b_l, or 0).
    """

    def __init__(self, weight: torch.Tensor, shape: tuple[int, int], start: torch.Tensor | float = 0.0):
        self.weight = weight  # [K_out, K_in] applied as x @ weightᵀ
        self.announced = torch.zeros(shape)
        self.received = torch.zeros(shape[0], weight.size(0)) + start
        self.spikes = 0  # non-zero spikes sent

    def send(self, target: torch.Tensor, theta: float | None) -> None:
        """One step: ternary spikes at T_θ = theta, or (theta None) the exact float value."""
        if theta is None:
            self.received += (target - self.announced) @ self.weight.T
            self.announced = target.clone()
            return
        s = spikes(target, self.announced, theta)
        self.announced += theta * s
        self.received += theta * (s.float() @ self.weight.T)  # the receiver sees only the spikes
        self.spikes += int(s.count_nonzero())


@dataclass
class Code:
    """How PC's messages travel: ``spiking`` False sends 32-bit floats; True sends DiffPC's ternary spikes with
    T_θ(t) = 2^m / 2^{t mod n}; ``cycles`` of n steps carry the feed-forward sweep into each layer."""

    spiking: bool = True
    m: int = 2
    n: int = 8
    cycles: int = 1


class PCNet(nn.Module):
    """An MLP ``sizes`` (ReLU hidden layers) trained by predictive coding; ``forward`` is the plain feed-forward
    pass (the BP baseline trains it with backprop)."""

    def __init__(self, sizes: list[int]):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(i, o) for i, o in zip(sizes[:-1], sizes[1:]))

    @staticmethod
    def phi(x: torch.Tensor, i: int) -> torch.Tensor:
        return x if i == 0 else torch.relu(x)

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for i, layer in enumerate(self.layers):
            x = layer(self.phi(x, i))
        return x

    @torch.no_grad()
    def sweep(self, x0: torch.Tensor, code: Code) -> tuple[list[torch.Tensor], list[Channel]]:
        """The feed-forward sweep, layer by layer through the channels: x_l = μ_l as received. ``(xs, up)``:
        the values of layers 0 … L and the L forward channels (layer l−1 → l)."""
        xs, up = [x0], []
        for i, layer in enumerate(self.layers):
            ch = Channel(layer.weight, (len(x0), layer.in_features), layer.bias)
            steps = code.cycles * code.n if code.spiking else 1
            for t in range(steps):
                ch.send(self.phi(xs[-1], i), threshold(t, code.m, code.n) if code.spiking else None)
            up.append(ch)
            xs.append(ch.received.clone())
        return xs, up

    @torch.no_grad()
    def relax(
        self, x0: torch.Tensor, target: torch.Tensor, steps: int, gamma: float, code: Code
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], int, list[int]]:
        """Clamp x_0 and x_L = target, relax the free layers for ``steps`` steps, and set each W_l's and b_l's
        ``.grad`` to PC's local rule −ε_l φ(x_{l−1})_announcedᵀ / B. ``(xs, errors ε_1 … ε_L, non-zero spikes,
        messages per layer)``: float PC sends one message per sender per step."""
        xs, up = self.sweep(x0, code)
        xs[-1] = target.clone()
        L = len(self.layers)
        down = [Channel(self.layers[i].weight.T, (len(x0), self.layers[i].out_features)) for i in range(1, L)]
        for t in range(steps):
            theta = threshold(t, code.m, code.n) if code.spiking else None
            errors = [xs[i] - up[i - 1].received for i in range(1, L + 1)]  # ε_i from what layer i received
            for i in range(1, L):  # ε_{i+1} travels back to layer i
                down[i - 1].send(errors[i], theta)
            for i in range(1, L):
                grad_phi = (xs[i] > 0).float()
                xs[i] = xs[i] + gamma * (-errors[i - 1] + grad_phi * down[i - 1].received)
                up[i].send(self.phi(xs[i], i), theta)  # and its new φ(x_i) travels forward
        errors = [xs[i] - up[i - 1].received for i in range(1, L + 1)]
        for i, layer in enumerate(self.layers):
            pre = up[i].announced  # φ(x_i), the input of W_{i+1}, as its synapses know it
            layer.weight.grad = -(errors[i].T @ pre) / len(x0)
            layer.bias.grad = -errors[i].mean(0)
        sent = sum(c.spikes for c in up + down)
        return xs, errors, sent, [c.announced.size(1) for c in up + down]

    @torch.no_grad()
    def predict(self, x0: torch.Tensor, code: Code) -> tuple[torch.Tensor, int]:
        """Class scores x_L after the feed-forward sweep, and the non-zero spikes it took."""
        xs, up = self.sweep(x0, code)
        return xs[-1], sum(c.spikes for c in up)


def bits(spike_count: int, neurons: int, samples: int) -> float:
    """Bits per neuron per sample for ternary spikes: non-zero spikes × log₂3."""
    return spike_count * math.log2(3) / (neurons * samples)
