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
Every tensor the forward and backward passes make is an integer (the tests check each op's dtype); randomness is
drawn as integers against a threshold computed once in Python.
"""

from __future__ import annotations

import math

import torch

INT16 = 32767


def sign(x: torch.Tensor) -> torch.Tensor:
    """±1 as int8, with sign(0) = +1."""
    return torch.where(x >= 0, 1, -1).to(torch.int8)


def binarise(x: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    """±1 inputs: +1 where x exceeds its per-feature threshold (e.g. the training median), as int8."""
    return torch.where(x > thresholds, 1, -1).to(torch.int8)


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
        for k in sizes[1:]:
            if k % group:
                raise ValueError(f"group: {group} does not divide the layer width {k}")
        self.gen = torch.Generator().manual_seed(seed)
        self.H = [
            (
                torch.randint(1, h_init + 1, (o, i), generator=self.gen)
                * sign(torch.randint(-1, 1, (o, i), generator=self.gen))
            ).to(torch.int16)
            for i, o in zip(sizes[:-1], sizes[1:])
        ]
        self.P = sign(torch.randint(-1, 1, (classes, sizes[-1]), generator=self.gen))
        if feedback not in ("transpose", "random"):
            raise ValueError(f"feedback: {feedback!r} is not transpose or random")
        # "random": fixed ±1 feedback matrices in place of W_lᵀ, a local rule (binary feedback alignment) that
        # needs no weight transport; the baseline BEP's exact binary chain rule is compared with
        self.B = (
            None
            if feedback == "transpose"
            else [sign(torch.randint(-1, 1, h.shape, generator=self.gen)) for h in self.H]
        )
        self.group = group
        self.margin = math.floor(r * sizes[-1])  # trigger below r·K_L
        self.gates = [math.floor(nu * k) for k in sizes[:-1]]  # |z_l| ≤ ⌊ν K_{l−1}⌋
        self.reinforce = [min(1.0, p_r * math.sqrt(2 / (math.pi * k))) for k in sizes[:-1]]

    @property
    def W(self) -> list[torch.Tensor]:
        return [sign(h) for h in self.H]

    def forward(self, a0: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """``(z [l] int32 [B, K_l], a [l] int8 [B, K_l], with a[0] = a0)``."""
        acts, zs = [a0], []
        for w in self.W:
            zs.append(acts[-1].int() @ w.int().T)
            acts.append(sign(zs[-1]))
        return zs, acts

    def scores(self, a0: torch.Tensor) -> torch.Tensor:
        """Class scores P a_L, int32 ``[B, C]``."""
        return self.forward(a0)[1][-1].int() @ self.P.int().T

    def predict(self, a0: torch.Tensor) -> torch.Tensor:
        return self.scores(a0).argmax(1)

    def targets(self, zs, acts, y: torch.Tensor, triggered: torch.Tensor) -> list[torch.Tensor]:
        """Desired activations a*_l for l = 1 … L (untriggered rows keep a_l)."""
        want = [torch.where(triggered[:, None], self.P[y], acts[-1])]
        for k in range(len(self.H) - 1, 0, -1):  # a*_k from layer k + 1 (0-based: H[k])
            g = (zs[k].abs() <= self.gates[k]).to(torch.int8)
            fb = self.W[k] if self.B is None else self.B[k]
            back = (g * want[0]).int() @ fb.int()  # W_{k+1}ᵀ (g ⊙ a*_{k+1}), [B, K_k]
            t = torch.where(back == 0, acts[k], sign(back))
            want.insert(0, torch.where(triggered[:, None], t, acts[k]))
        return want

    def mask(self, z: torch.Tensor, wrong: torch.Tensor) -> torch.Tensor:
        """The least-stable wrong neuron of each group of γ₀ (int8 0/1, ``[B, K]``)."""
        b, k = z.shape
        stability = torch.where(wrong, z.abs(), torch.iinfo(torch.int32).max).view(b, k // self.group, self.group)
        pick = torch.zeros_like(stability, dtype=torch.int8).scatter_(2, stability.argmin(2, keepdim=True), 1)
        return pick.view(b, k) * wrong.to(torch.int8)

    def step(self, a0: torch.Tensor, y: torch.Tensor) -> dict[str, int]:
        """One BEP update on a batch (int8 ``[B, K_0]``, labels ``[B]``); returns counts."""
        zs, acts = self.forward(a0)
        s = acts[-1].int() @ self.P.int().T
        other = s.scatter(1, y[:, None], torch.iinfo(torch.int32).min).amax(1)
        triggered = s.gather(1, y[:, None])[:, 0] - other < self.margin
        want = self.targets(zs, acts, y, triggered)
        flips = update_ops = 0
        for k, (z, a_prev, a, t) in enumerate(zip(zs, acts[:-1], acts[1:], want)):
            m = self.mask(z, a != t)
            delta = 2 * (m * t).int().T @ a_prev.int()
            right = ((a == t) & triggered[:, None]).to(torch.int8)
            threshold = round(self.reinforce[k] * 2**16)  # Bernoulli(p) as an integer draw below p·2^16
            lucky = (torch.randint(0, 2**16, right.shape, generator=self.gen) < threshold).to(torch.int8)
            delta += (right * lucky * t).int().T @ a_prev.int()
            self.H[k] = (self.H[k].int() + delta).clamp(-INT16, INT16).to(torch.int16)
            flips += int(m.sum())
            update_ops += (int(m.sum()) + int((right * lucky).sum())) * a_prev.size(1)  # one add per synapse touched
        return {"triggered": int(triggered.sum()), "updated_neurons": flips, "update_ops": update_ops}
