"""BEP (Binary Error Propagation): a binary network trained by a discrete chain rule, with integers only.

Forward (a_0 ∈ {−1, +1}^{K_0} a binarised input; sign(0) = +1):
  W_l = sign(H_l) with integer hidden weights H_l (int16), z_l = W_l a_{l−1} (int32), a_l = sign(z_l);
  class scores ŷ = P a_L with fixed random ±1 prototypes P ``[C, K_L]``.
Backward, for a sample whose margin ŷ_y − max_{c≠y} ŷ_c is below r·K_L:
  a*_L = P_y (the true class's prototype);
  a*_{l−1} = sign(W_lᵀ (g_l ⊙ a*_l)) with the stability gate g_l = 1[|z_l| ≤ ⌊ν K_{l−1}⌋] (only neurons near their
  threshold pass the error down); where that sum is 0 the target stays a_{l−1};
  mask M_l: in each group of γ₀ neurons, the wrong neuron (a_l ≠ a*_l) with the smallest |z_l| (least stable);
  update H_l += 2 Σ_batch (M_l ⊙ a*_l) a_{l−1}ᵀ, clipped to int16;
  (``feedback="random"``: fixed random ±1 matrices B_l replace W_lᵀ, the local-rule baseline);
  reinforcement: each neuron that is already right is, with probability p_r √(2 / (π K_{l−1})), pushed further
  from its threshold, H_l += a*_l a_{l−1}ᵀ (its weights move away from 0 where they agree).
BEP-TT (``BinaryRNN``): h_t = sign(W [x_t; h_{t−1}]) with h_0 = +1 and scores P h_T; the error travels back
through time as a*_{t−1} = sign(W_hᵀ (g_t ⊙ a*_t)) (W_h the recurrent block of W), every step t gets the masked
update and reinforcement against its input [x_t; h_{t−1}], summed over t and applied once per batch.
Every tensor the forward and backward passes make is an integer (the tests check each op's dtype): ±1 products
are int16 matmuls (exact, since |z| ≤ K_in ≤ 32767), H is int16; randomness is drawn as integers against a
threshold computed once in Python. ``bit_ops`` counts one XNOR-popcount per synapse a sample's forward or
backward pass crosses, and one integer add per weight an update touches.
"""

from __future__ import annotations

import math

import torch

INT16 = 32767


def sign(x: torch.Tensor) -> torch.Tensor:
    """±1 as int8, with sign(0) = +1."""
    return (x >= 0).to(torch.int8) * 2 - 1


def binarise(x: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    """±1 inputs: +1 where x exceeds its per-feature threshold (e.g. the training median), as int8."""
    return (x > thresholds).to(torch.int8) * 2 - 1


def thermometer(x: torch.Tensor, levels: torch.Tensor) -> torch.Tensor:
    """Thermometer code of scalars ``[...]`` at increasing ``levels [L]``: ``[..., L]`` int8, +1 where x exceeds
    the level (so the count of +1s grows with x)."""
    return (x[..., None] > levels).to(torch.int8) * 2 - 1


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for ±1 / 0 int8 operands, as an int16 matmul (twice as fast as int32 here, and exact: see above)."""
    return a.to(torch.int16) @ b.to(torch.int16)


def _init(shape: tuple[int, int], h_init: int, gen: torch.Generator) -> torch.Tensor:
    magnitude = torch.randint(1, h_init + 1, shape, generator=gen)
    return (magnitude * sign(torch.randint(-1, 1, shape, generator=gen))).to(torch.int16)


def _gates(p_r: float, nu: float, k_in: int) -> tuple[int, float]:
    """(⌊ν K_in⌋, the reinforcement probability min(1, p_r √(2 / (π K_in))))."""
    return math.floor(nu * k_in), min(1.0, p_r * math.sqrt(2 / (math.pi * k_in)))


def mask(z: torch.Tensor, wrong: torch.Tensor, group: int) -> torch.Tensor:
    """The least-stable wrong neuron of each group of γ₀ (int8 0/1, ``[B, K]``)."""
    b, k = z.shape
    stability = torch.where(wrong, z.abs(), torch.iinfo(z.dtype).max).view(b, k // group, group)
    pick = torch.zeros_like(stability, dtype=torch.int8).scatter_(2, stability.argmin(2, keepdim=True), 1)
    return pick.view(b, k) * wrong.to(torch.int8)


def back(z: torch.Tensor, want: torch.Tensor, gate: int, feedback: torch.Tensor, a_prev: torch.Tensor) -> torch.Tensor:
    """a*_{l−1} = sign(Fᵀ (g ⊙ a*_l)), g = 1[|z_l| ≤ gate], F ``[K_l, K_{l−1}]`` (W_l, or fixed random ±1); where
    the sum is 0 the target stays a_{l−1}. ``[B, K_{l−1}]`` int8."""
    s = _mm((z.abs() <= gate).to(torch.int8) * want, feedback)
    return torch.where(s == 0, a_prev, sign(s))


def update(
    z: torch.Tensor,
    a_prev: torch.Tensor,
    a: torch.Tensor,
    want: torch.Tensor,
    live: torch.Tensor,
    group: int,
    p_reinforce: float,
    gen: torch.Generator,
) -> tuple[torch.Tensor, int, int]:
    """One layer's integer update ΔH ``[K_l, K_{l−1}]`` int16 (masked flips, 2 (M ⊙ a*) a_{l−1}ᵀ, plus reinforcement
    a* a_{l−1}ᵀ for right neurons of ``live`` (triggered) rows with probability p), with (flipped neurons, adds)."""
    m = mask(z, a != want, group)
    right = ((a == want) & live[:, None]).to(torch.int8)
    threshold = round(p_reinforce * 2**16)  # Bernoulli(p) as an integer draw below p·2^16
    lucky = right * (torch.randint(0, 2**16, right.shape, generator=gen) < threshold).to(torch.int8)
    delta = _mm(((2 * m + lucky) * want).T, a_prev)
    touched = int(m.sum()) + int(lucky.sum())
    return delta, int(m.sum()), touched * a_prev.size(1)


def _check(widths: list[int], group: int, feedback: str) -> None:
    for k in widths:
        if k % group:
            raise ValueError(f"group: {group} does not divide the layer width {k}")
    if feedback not in ("transpose", "random"):
        raise ValueError(f"feedback: {feedback!r} is not transpose or random")


def _apply(h: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    return (h.int() + delta).clamp(-INT16, INT16).to(torch.int16)


def _triggered(scores: torch.Tensor, y: torch.Tensor, margin: int) -> torch.Tensor:
    """margin ŷ_y − max_{c≠y} ŷ_c below r·K_L, ``[B]`` bool."""
    other = scores.scatter(1, y[:, None], torch.iinfo(scores.dtype).min).amax(1)
    return scores.gather(1, y[:, None])[:, 0] - other < margin


class BinaryMLP:
    """Integer hidden weights, binary weights and activations, fixed ±1 prototypes; ``step`` is one BEP update."""

    def __init__(
        self,
        sizes: list[int],
        classes: int,
        group: int = 4,
        r: float = 0.5,
        nu: float = 0.01,
        p_r: float = 0.5,
        h_init: int = 8,
        seed: int = 0,
        feedback: str = "transpose",
    ):
        _check(sizes[1:], group, feedback)
        self.gen = torch.Generator().manual_seed(seed)
        self.H = [_init((o, i), h_init, self.gen) for i, o in zip(sizes[:-1], sizes[1:])]
        self.P = sign(torch.randint(-1, 1, (classes, sizes[-1]), generator=self.gen))
        # "random": fixed ±1 feedback matrices in place of W_lᵀ, a local rule (binary feedback alignment) that
        # needs no weight transport; the baseline BEP's exact binary chain rule is compared with
        self.B = (
            None
            if feedback == "transpose"
            else [sign(torch.randint(-1, 1, h.shape, generator=self.gen)) for h in self.H]
        )
        self.group = group
        self.margin = math.floor(r * sizes[-1])  # trigger below r·K_L
        self.gates, self.reinforce = zip(*(_gates(p_r, nu, k) for k in sizes[:-1]))

    @property
    def W(self) -> list[torch.Tensor]:
        return [sign(h) for h in self.H]

    def forward(self, a0: torch.Tensor, W: list[torch.Tensor] | None = None):
        """``(z [l] int16 [B, K_l], a [l] int8 [B, K_l], with a[0] = a0)``."""
        acts, zs = [a0], []
        for w in W or self.W:
            zs.append(_mm(acts[-1], w.T))
            acts.append(sign(zs[-1]))
        return zs, acts

    def scores(self, a0: torch.Tensor) -> torch.Tensor:
        """Class scores P a_L, int16 ``[B, C]``."""
        return _mm(self.forward(a0)[1][-1], self.P.T)

    def predict(self, a0: torch.Tensor) -> torch.Tensor:
        return self.scores(a0).argmax(1)

    def targets(self, zs, acts, y: torch.Tensor, triggered: torch.Tensor, W=None) -> list[torch.Tensor]:
        """Desired activations a*_l for l = 1 … L (untriggered rows keep a_l)."""
        W = W or self.W
        want = [torch.where(triggered[:, None], self.P[y], acts[-1])]
        for k in range(len(self.H) - 1, 0, -1):  # a*_k from layer k + 1 (0-based: H[k])
            t = back(zs[k], want[0], self.gates[k], W[k] if self.B is None else self.B[k], acts[k])
            want.insert(0, torch.where(triggered[:, None], t, acts[k]))
        return want

    def step(self, a0: torch.Tensor, y: torch.Tensor) -> dict[str, int]:
        """One BEP update on a batch (int8 ``[B, K_0]``, labels ``[B]``); returns counts."""
        W = self.W
        zs, acts = self.forward(a0, W)
        triggered = _triggered(_mm(acts[-1], self.P.T), y, self.margin)
        want = self.targets(zs, acts, y, triggered, W)
        flips = update_ops = 0
        for k, (z, a_prev, a, t) in enumerate(zip(zs, acts[:-1], acts[1:], want)):
            delta, f, ops = update(z, a_prev, a, t, triggered, self.group, self.reinforce[k], self.gen)
            self.H[k] = _apply(self.H[k], delta)
            flips, update_ops = flips + f, update_ops + ops
        n, fired = len(y), int(triggered.sum())
        forward = n * (sum(h.numel() for h in self.H) + self.P.numel())
        return {
            "triggered": fired,
            "updated_neurons": flips,
            "update_ops": update_ops,
            "bit_ops": forward + fired * sum(h.numel() for h in self.H[1:]) + update_ops,
        }


class BinaryRNN:
    """BEP-TT: one binary recurrent layer h_t = sign(W [x_t; h_{t−1}]), h_0 = +1, class scores P h_T.

    ``H`` int16 ``[K_h, K_x + K_h]``; inputs int8 ``[B, T, K_x]``.
    """

    def __init__(
        self,
        inputs: int,
        hidden: int,
        classes: int,
        group: int = 4,
        r: float = 0.5,
        nu: float = 0.01,
        p_r: float = 0.5,
        h_init: int = 8,
        seed: int = 0,
        feedback: str = "transpose",
    ):
        _check([hidden], group, feedback)
        self.gen = torch.Generator().manual_seed(seed)
        self.H = _init((hidden, inputs + hidden), h_init, self.gen)
        self.P = sign(torch.randint(-1, 1, (classes, hidden), generator=self.gen))
        self.B = None if feedback == "transpose" else sign(torch.randint(-1, 1, (hidden, hidden), generator=self.gen))
        self.inputs, self.group = inputs, group
        self.margin = math.floor(r * hidden)
        self.gate, self.reinforce = _gates(p_r, nu, inputs + hidden)

    def forward(self, x: torch.Tensor, W: torch.Tensor | None = None):
        """``(z [t] int16 [B, K_h] for t = 1 … T, u [t] = [x_t; h_{t−1}] int8, h [t] int8 for t = 0 … T)``."""
        W = sign(self.H) if W is None else W
        h = [torch.ones(x.size(0), self.H.size(0), dtype=torch.int8)]
        zs, us = [], []
        for t in range(x.size(1)):
            us.append(torch.cat([x[:, t], h[-1]], 1))
            zs.append(_mm(us[-1], W.T))
            h.append(sign(zs[-1]))
        return zs, us, h

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        return _mm(self.forward(x)[2][-1], self.P.T)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.scores(x).argmax(1)

    def step(self, x: torch.Tensor, y: torch.Tensor, depth: int = 0) -> dict[str, int]:
        """One BEP-TT update on a batch of sequences; the error crosses every step back to t = 1, or only the last
        ``depth`` steps (truncated; 0: all)."""
        W = sign(self.H)
        fb = W[:, self.inputs :] if self.B is None else self.B  # [K_h, K_h]: W_h, or fixed random ±1
        zs, us, h = self.forward(x, W)
        live = _triggered(_mm(h[-1], self.P.T), y, self.margin)
        want = torch.where(live[:, None], self.P[y], h[-1])
        delta = torch.zeros_like(self.H)
        flips = update_ops = 0
        stop = max(0, len(zs) - depth) if depth else 0
        for t in range(len(zs) - 1, stop - 1, -1):
            d, f, ops = update(zs[t], us[t], h[t + 1], want, live, self.group, self.reinforce, self.gen)
            delta, flips, update_ops = delta + d, flips + f, update_ops + ops
            if t > stop:
                want = torch.where(live[:, None], back(zs[t], want, self.gate, fb, h[t]), h[t])
        self.H = _apply(self.H, delta)
        n, fired, steps = len(y), int(live.sum()), len(zs)
        return {
            "triggered": fired,
            "updated_neurons": flips,
            "update_ops": update_ops,
            "bit_ops": n * (steps * self.H.numel() + self.P.numel())
            + fired * (steps - 1 - stop) * fb.numel()
            + update_ops,
        }
