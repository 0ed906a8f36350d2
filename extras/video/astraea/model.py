r"""Astraea's pieces: a small video DiT, its token-wise sparse sampler, and the genetic search over per-step token
budgets.

**The video DiT.** A clip ``[B, F, S, S]`` is cut into :math:`N = F (S/p)^2` patch tokens (one frame, a
:math:`p \times p` patch each), embedded linearly with learned spatial and temporal positions, and run through
adaLN-Zero blocks (DiT) conditioned on the flow time t; a linear head gives each token's velocity. It is trained by
flow matching (``extras.nets.flow_pair``) and sampled with Euler steps from t = 1 to 0.

**Token-wise sparse sampling** [unverified; no code was released]. At step s only :math:`k_s = \mathrm{round}(b_s N)`
tokens are recomputed. Token i's score is

.. math::
    \mathrm{score}_i = S^{\mathrm{LSE}}_i\,\Delta_i + 0.5\,e^{n_i},

with :math:`S^{\mathrm{LSE}}_i` the log-sum-exp of token i's attention logits (mean over heads and blocks) the last
time it was computed, :math:`\Delta_i = \lVert u_i^{(s)} - u_i^{(s-1)}\rVert` the change of its latent patch over
the last step, and :math:`n_i` the steps since it was last recomputed (so no token starves). In every block the
selected tokens' queries attend to all N keys and values: their own fresh, the others' cached from when they were
last computed. Unselected tokens reuse their cached velocity. Step 0 computes every token (it fills the caches).
Every cost of a block (QKV, attention, projection, MLP) is linear in :math:`k_s`, and with every token selected the
sparse path runs exactly the dense one's operations, so a 100 % budget reproduces the full sample bit for bit.

**Budget search.** A genetic algorithm searches the vector :math:`(b_1, \dots, b_{S-1})` (step 0 stays full) with
mean budget over all S steps equal to the speed target; its fitness is the MSE of the final sample to the full
model's from the same noise (calibration noise, never the test noise). The paper uses 50 parents, 30 children and
30 generations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from agentkit.extras.nets import time_features


class Block(nn.Module):
    """A DiT block (adaLN-Zero around attention and a 4× MLP) that computes any subset of its tokens.

    ``forward(h, c, kv, idx)``: ``h [B, k, D]`` are the tokens computed now, at positions ``idx [B, k]`` of the
    sequence; ``kv`` holds every token's keys and values ``[B, H, N, D/H]`` (cached); the fresh keys and values are
    written into it at ``idx`` and the k queries attend to all N. Returns the k outputs and each query's attention
    log-sum-exp ``[B, k]`` (mean over heads)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(dim, elementwise_affine=False), nn.LayerNorm(dim, elementwise_affine=False)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))
        self.mod = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        nn.init.zeros_(self.mod[1].weight), nn.init.zeros_(self.mod[1].bias)

    def forward(
        self, h: torch.Tensor, c: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor], idx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b, k, d = h.shape
        dh = d // self.heads
        s1, b1, g1, s2, b2, g2 = self.mod(c)[:, None].chunk(6, dim=-1)
        q, kk, v = self.qkv(self.n1(h) * (1 + s1) + b1).view(b, k, 3, self.heads, dh).permute(2, 0, 3, 1, 4)
        at = idx[:, None, :, None].expand(b, self.heads, k, dh)
        keys, values = kv
        keys.scatter_(2, at, kk)
        values.scatter_(2, at, v)
        logits = q @ keys.transpose(-1, -2) / math.sqrt(dh)  # [B, H, k, N]
        lse = torch.logsumexp(logits, -1, keepdim=True)
        y = ((logits - lse).exp() @ values).transpose(1, 2).reshape(b, k, d)
        h = h + g1 * self.out(y)
        return h + g2 * self.mlp(self.n2(h) * (1 + s2) + b2), lse.squeeze(-1).mean(1)


class VideoDiT(nn.Module):
    """The flow-matching video transformer: clips ``[B, F, S, S]`` → velocities of the same shape.

    >>> net = VideoDiT(frames=2, size=8, patch=4, dim=16, depth=1, heads=2)
    >>> net(torch.zeros(3, 2, 8, 8), torch.rand(3)).shape, net.tokens
    (torch.Size([3, 2, 8, 8]), 8)
    """

    def __init__(self, frames: int, size: int, patch: int = 4, dim: int = 64, depth: int = 4, heads: int = 4):
        super().__init__()
        if size % patch:
            raise ValueError(f"size {size} must divide by patch {patch}")
        self.frames, self.size, self.patch, self.dim, self.heads = frames, size, patch, dim, heads
        self.grid = size // patch
        self.tokens = frames * self.grid**2
        self.inp = nn.Linear(patch * patch, dim)
        self.pos_space = nn.Parameter(0.02 * torch.randn(1, 1, self.grid**2, dim))
        self.pos_time = nn.Parameter(0.02 * torch.randn(1, frames, 1, dim))
        self.t_mlp = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)
        self.final_mod = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
        self.head = nn.Linear(dim, patch * patch)
        for m in (self.final_mod[1], self.head):
            nn.init.zeros_(m.weight), nn.init.zeros_(m.bias)

    # ---- tokens ----------------------------------------------------------------------------------------------
    def patchify(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, F, S, S]`` → ``[B, N, p²]`` (frame-major, then row-major patches)."""
        b, p, g = len(x), self.patch, self.grid
        return x.reshape(b, self.frames, g, p, g, p).permute(0, 1, 2, 4, 3, 5).reshape(b, self.tokens, p * p)

    def unpatchify(self, u: torch.Tensor) -> torch.Tensor:
        b, p, g = len(u), self.patch, self.grid
        return u.reshape(b, self.frames, g, g, p, p).permute(0, 1, 2, 4, 3, 5).reshape(b, self.frames, *(2 * [g * p]))

    def empty_cache(self, b: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        shape = (b, self.heads, self.tokens, self.dim // self.heads)
        dev = self.head.weight.device
        return [(torch.zeros(shape, device=dev), torch.zeros(shape, device=dev)) for _ in self.blocks]

    def compute(
        self, u: torch.Tensor, t: torch.Tensor, idx: torch.Tensor, cache: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the tokens at ``idx [B, k]`` of the patch tokens ``u [B, N, p²]`` through every block against the
        key/value ``cache`` (updated in place): their velocities ``[B, k, p²]`` and attention LSE ``[B, k]``."""
        pos = (self.pos_space + self.pos_time).reshape(1, self.tokens, self.dim).expand(len(u), -1, -1)
        gather = idx[..., None].expand(-1, -1, self.dim)
        h = self.inp(u.gather(1, idx[..., None].expand(-1, -1, u.shape[-1]))) + pos.gather(1, gather)
        c = self.t_mlp(time_features(t, self.dim))
        lse = torch.zeros(idx.shape, device=u.device)
        for blk, kv in zip(self.blocks, cache):
            h, l_blk = blk(h, c, kv, idx)
            lse = lse + l_blk / len(self.blocks)
        shift, scale = self.final_mod(c)[:, None].chunk(2, dim=-1)
        return self.head(self.norm(h) * (1 + scale) + shift), lse

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        idx = torch.arange(self.tokens, device=x.device).expand(len(x), -1)
        v, _ = self.compute(self.patchify(x), t, idx, self.empty_cache(len(x)))
        return self.unpatchify(v)

    def flops(self, k: int) -> int:
        """Multiply-accumulates ×2 of computing k of the N tokens once (the matmuls; norms and activations are
        left out): per block QKV 6kD², logits and mixing 4kND, projection 2kD², MLP 16kD²; plus the patch embedding
        and the head.

        >>> net = VideoDiT(frames=2, size=8, patch=4, dim=16, depth=1, heads=2)
        >>> net.flops(8) == 2 * net.flops(4), net.flops(0)
        (True, 0)
        """
        n, d, pp = self.tokens, self.dim, self.patch**2
        block = 6 * k * d * d + 4 * k * n * d + 2 * k * d * d + 16 * k * d * d
        return len(self.blocks) * block + 2 * k * pp * d * 2


# ---- sampling ---------------------------------------------------------------------------------------------------


@dataclass
class Schedule:
    """How a sampler spends compute over ``steps`` Euler steps.

    ``budgets[s]``: the share of tokens recomputed at step s (1.0: all); ``select``: ``score`` (Astraea's score) or
    ``random``; ``skip[s]``: reuse the previous step's velocity without running the network (timestep skipping)."""

    budgets: list[float]
    select: str = "score"
    skip: list[bool] = field(default_factory=list)

    @staticmethod
    def full(steps: int) -> Schedule:
        return Schedule([1.0] * steps)

    @staticmethod
    def uniform(steps: int, mean: float) -> Schedule:
        """Step 0 full, every other step the same budget, mean ``mean`` over all steps."""
        rest = (mean * steps - 1) / (steps - 1)
        return Schedule([1.0] + [rest] * (steps - 1))

    @staticmethod
    def skipping(steps: int, mean: float) -> Schedule:
        """Compute ``round(mean · steps)`` steps (step 0 and then evenly spaced ones), reuse the velocity on the
        rest."""
        keep = max(1, round(mean * steps))
        on = set(np.round(np.linspace(0, steps, keep, endpoint=False)).astype(int).tolist())
        return Schedule([1.0] * steps, skip=[s not in on for s in range(steps)])

    def counts(self, n: int) -> list[int]:
        """Tokens recomputed at each step: ``round(b_s · N)`` (at least 1; 0 on skipped steps; N at step 0)."""
        out = []
        for s, b in enumerate(self.budgets):
            if self.skip and self.skip[s]:
                out.append(0)
            else:
                out.append(n if s == 0 else min(n, max(1, round(b * n))))
        return out


def token_scores(lse: torch.Tensor, delta: torch.Tensor, age: torch.Tensor) -> torch.Tensor:
    """Astraea's token score ``S_LSE · Δ + 0.5 · e^n`` (module docstring), all ``[B, N]``.

    >>> token_scores(torch.tensor([[2.0, 1.0, 0.0]]), torch.tensor([[0.5, 3.0, 9.0]]), torch.tensor([[0.0, 0.0, 2.0]]))
    tensor([[1.5000, 3.5000, 3.6945]])
    """
    return lse * delta + 0.5 * torch.exp(age)


@torch.no_grad()
def sample(
    model: VideoDiT,
    noise: torch.Tensor,
    schedule: Schedule,
    generator: torch.Generator | None = None,
    velocities: list[torch.Tensor] | None = None,
) -> tuple[torch.Tensor, list[int]]:
    """Euler-sample clips from ``noise [B, F, S, S]`` (t = 1 → 0) spending compute as ``schedule`` says; returns
    the samples and the tokens recomputed per step (per clip). ``generator`` drives random selection; each step's
    velocity ``[B, F, S, S]`` is appended to ``velocities`` when given."""
    steps, n, b, dev = len(schedule.budgets), model.tokens, len(noise), noise.device
    counts = schedule.counts(n)
    ts = torch.linspace(1, 0, steps + 1, device=dev)
    x = noise
    cache = model.empty_cache(b)
    vel = torch.zeros(b, n, model.patch**2, device=dev)
    lse, age = torch.zeros(b, n, device=dev), torch.zeros(b, n, device=dev)
    u_prev = None
    for s, (t0, t1) in enumerate(zip(ts[:-1], ts[1:])):
        u = model.patchify(x)
        k = counts[s]
        if k > 0:
            if k == n:
                idx = torch.arange(n, device=dev).expand(b, -1)
            elif schedule.select == "random":
                idx = torch.rand(b, n, generator=generator).argsort(1)[:, :k].sort(1).values.to(dev)
            else:
                delta = (u - u_prev).norm(dim=-1) if u_prev is not None else torch.ones(b, n, device=dev)
                idx = token_scores(lse, delta, age).topk(k, dim=1).indices.sort(1).values
            v_sel, l_sel = model.compute(u, t0.expand(b), idx, cache)
            vel.scatter_(1, idx[..., None].expand(-1, -1, vel.shape[-1]), v_sel)
            lse.scatter_(1, idx, l_sel)
            age += 1
            age.scatter_(1, idx, 0.0)
        u_prev = u
        v = model.unpatchify(vel)
        if velocities is not None:
            velocities.append(v)
        x = x + (t1 - t0) * v
    return x, counts


def repair(b: np.ndarray, mean: float, lo: float, steps: int) -> np.ndarray:
    """Move budgets ``b [S−1]`` (steps 1…S−1) into [lo, 1] with ``(1 + Σ b) / S = mean`` (step 0 is full): shift
    the free ones until the mean holds.

    >>> r = repair(np.array([0.9, 0.1, 0.5]), 0.5, 0.05, 4)
    >>> bool(abs((1 + r.sum()) / 4 - 0.5) < 1e-9 and r.min() >= 0.05)
    True
    """
    target = mean * steps - 1
    b = np.clip(b, lo, 1.0)
    for _ in range(100):
        gap = target - b.sum()
        if abs(gap) < 1e-12:
            break
        free = (b < 1.0) if gap > 0 else (b > lo)
        if not free.any():
            break
        b = np.clip(b + gap / free.sum() * free, lo, 1.0)
    return b


def genetic_budgets(
    fitness,
    steps: int,
    mean: float,
    parents: int = 50,
    children: int = 30,
    generations: int = 30,
    lo: float = 0.05,
    mutation: float = 0.1,
    seed: int = 0,
    progress=None,
) -> tuple[list[float], list[float]]:
    """A (μ + λ) genetic algorithm over per-step budgets: ``parents`` budget vectors (the uniform one among them),
    each generation ``children`` from two tournament-picked parents by uniform crossover and Gaussian mutation
    (σ = ``mutation`` on a fifth of the genes), repaired to the mean; the best ``parents`` of both survive.
    ``fitness(budgets [S]) → float`` (lower is better). Returns the best budgets and the best fitness per
    generation (the uniform vector's first)."""
    rng = np.random.default_rng(seed)
    uniform = repair(np.full(steps - 1, mean), mean, lo, steps)
    pop = [uniform] + [repair(rng.uniform(lo, 1, steps - 1), mean, lo, steps) for _ in range(parents - 1)]
    scores = [fitness([1.0, *p]) for p in pop]
    history = [scores[0], min(scores)]
    for _ in progress(range(generations)) if progress else range(generations):
        kids = []
        for _ in range(children):
            a, b = (min(rng.choice(len(pop), 2, replace=False), key=lambda i: scores[i]) for _ in range(2))
            child = np.where(rng.random(steps - 1) < 0.5, pop[a], pop[b])
            child = child + (rng.random(steps - 1) < 0.2) * rng.normal(0, mutation, steps - 1)
            kids.append(repair(child, mean, lo, steps))
        pop, scores = pop + kids, scores + [fitness([1.0, *k]) for k in kids]
        keep = np.argsort(scores)[:parents]
        pop, scores = [pop[i] for i in keep], [scores[i] for i in keep]
        history.append(scores[0])
    return [1.0, *pop[0].tolist()], history
