r"""LPWM's dynamics: a causal spatio-temporal transformer over particles × time, and per-particle latent actions.

A frame's ``K`` particles and its background are ``K + 1`` tokens (``tokens``: position, scale, depth, the logit of
the transparency, the proposal score and the features; the background's features). Each block attends over the
tokens of one frame (spatial), then over each slot's past (temporal, causal), then an MLP, so the output at frame t
depends on frames ≤ t only.

**Latent actions** [code: ``DLPContext``]: a second causal transformer over the same tokens has two heads. The
inverse-dynamics head reads frame t + 1's outputs (which have seen frames ≤ t + 1) and gives the posterior
q(c_t | z_{≤t+1}) of the 7-d action of each token for the step t → t + 1; the latent policy reads frame t's
outputs and gives the prior π(c_t | z_{≤t}). The dynamics predicts p(z_{t+1} | z_{≤t}, c_{≤t}) with c added to the
tokens. Training (teacher forcing on the DLP's posterior) minimises

.. math::
    \beta_{\rm dyn} \sum_t \Big[\mathrm{KL}\big(q(z_{t+1}) \,\|\, p(z_{t+1} \mid z_{\le t}, c_{\le t})\big)
      + \mathrm{KL}\big(q(c_t \mid z_{\le t+1}) \,\|\, \pi(c_t \mid z_{\le t})\big)\Big],

the official dynamic ELBO's two KL terms, both weighted β_dyn. At inference the policy samples c_t, so one context
gives many futures. Without latent actions (``context_dim=0``) the same transformer is a deterministic predictor.
An ``action_dim`` > 0 adds a given action (e.g. the agent's move) to every token of its frame (action-conditioned).

>>> dyn = Dynamics(particle_dim=11, bg_dim=4, particles=3, frames=5, dim=16, layers=1, heads=2, context_dim=7)
>>> z, bg = torch.randn(2, 5, 3, 11), torch.randn(2, 5, 4)
>>> loss, parts = dyn.loss(z, torch.zeros_like(z), bg, torch.zeros_like(bg))
>>> out = dyn.rollout(z[:, :2], bg[:, :2], steps=3, sample=True)
>>> out[0].shape, out[1].shape
(torch.Size([2, 5, 3, 11]), torch.Size([2, 5, 4]))
"""

from __future__ import annotations

import torch
from torch import nn

from agentkit.extras.nets import gaussian
from agentkit.extras.world.lpwm.dlp import gauss_kl


def causal_mask(t: int, device=None) -> torch.Tensor:
    """``[t, t]`` boolean mask for ``nn.MultiheadAttention``: True where a query must not look (the future)."""
    return torch.triu(torch.ones(t, t, dtype=torch.bool, device=device), diagonal=1)


class SpatioTemporalBlock(nn.Module):
    """Pre-norm block on ``x [B, T, N, d]``: attention across the N tokens of each frame, causal attention across
    each token's T frames, then an MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.n1, self.n2, self.n3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.spatial = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.temporal = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, n, d = x.shape
        h = self.n1(x).reshape(b * t, n, d)
        x = x + self.spatial(h, h, h, need_weights=False)[0].view(b, t, n, d)
        h = self.n2(x).transpose(1, 2).reshape(b * n, t, d)
        a = self.temporal(h, h, h, attn_mask=causal_mask(t, x.device), need_weights=False)[0]
        x = x + a.view(b, n, t, d).transpose(1, 2)
        return x + self.mlp(self.n3(x))


class ParticleTransformer(nn.Module):
    """Tokens ``[B, T, K, Dp]`` (particles) and ``[B, T, Db]`` (background) → hidden states ``[B, T, K + 1, d]``,
    with slot and frame embeddings and optional per-token conditioning ``cond [B, T, K + 1, Dc]``."""

    def __init__(
        self,
        particle_dim: int,
        bg_dim: int,
        particles: int,
        frames: int,
        dim: int,
        layers: int,
        heads: int,
        cond_dim: int = 0,
    ):
        super().__init__()
        self.particle_in, self.bg_in = nn.Linear(particle_dim, dim), nn.Linear(bg_dim, dim)
        self.slot = nn.Parameter(0.02 * torch.randn(particles + 1, dim))
        self.time = nn.Parameter(0.02 * torch.randn(frames, dim))
        self.cond_in = nn.Linear(cond_dim, dim) if cond_dim else None
        self.blocks = nn.ModuleList(SpatioTemporalBlock(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def forward(self, z: torch.Tensor, bg: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        t = z.shape[1]
        x = torch.cat([self.particle_in(z), self.bg_in(bg)[:, :, None]], 2) + self.slot + self.time[:t, None]
        if self.cond_in is not None and cond is not None:
            x = x + self.cond_in(cond)
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)


class Dynamics(nn.Module):
    """The particle dynamics, with per-token latent actions of ``context_dim`` (0: deterministic) and an optional
    given action of ``action_dim`` per frame."""

    def __init__(
        self,
        particle_dim: int,
        bg_dim: int,
        particles: int,
        frames: int,
        dim: int = 64,
        layers: int = 3,
        heads: int = 4,
        context_dim: int = 7,
        context_layers: int = 2,
        action_dim: int = 0,
    ):
        super().__init__()
        self.particle_dim, self.bg_dim, self.context_dim, self.action_dim = (
            particle_dim,
            bg_dim,
            context_dim,
            action_dim,
        )
        cond = context_dim + action_dim
        self.trunk = ParticleTransformer(particle_dim, bg_dim, particles, frames, dim, layers, heads, cond)
        self.particle_out = nn.Linear(dim, 2 * particle_dim)
        self.bg_out = nn.Linear(dim, 2 * bg_dim)
        if context_dim:
            self.context = ParticleTransformer(
                particle_dim, bg_dim, particles, frames, dim, context_layers, heads, action_dim
            )
            self.inverse = nn.Linear(dim, 2 * context_dim)  # q(c_t | z_≤t+1), read at frame t + 1
            self.policy = nn.Linear(dim, 2 * context_dim)  # π(c_t | z_≤t), read at frame t

    def _cond(self, c: torch.Tensor | None, actions: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
        parts = []
        if self.context_dim:
            parts.append(c)
        if self.action_dim:
            parts.append(actions[:, : like.shape[1], None].expand(-1, -1, like.shape[2] + 1, -1))
        return torch.cat(parts, -1) if parts else None

    def latent_actions(self, z: torch.Tensor, bg: torch.Tensor, actions: torch.Tensor | None = None):
        """(q_μ, q_logvar) ``[B, T − 1, K + 1, C]`` of the inverse model and (π_μ, π_logvar) ``[B, T, K + 1, C]`` of
        the policy (π at frame t is the prior of c_t, the action that leads to frame t + 1)."""
        cond = actions[:, : z.shape[1], None].expand(-1, -1, z.shape[2] + 1, -1) if self.action_dim else None
        h = self.context(z, bg, cond)
        q_mu, q_lv = gaussian(self.inverse(h[:, 1:]))
        p_mu, p_lv = gaussian(self.policy(h))
        return q_mu, q_lv, p_mu, p_lv

    def predict(
        self, z: torch.Tensor, bg: torch.Tensor, c: torch.Tensor | None = None, actions: torch.Tensor | None = None
    ):
        """The prior of frame t + 1 at every frame t: particles (μ, logvar) ``[B, T, K, Dp]`` and background
        ``[B, T, Db]``; the means are frame t's plus a predicted change (the official ``predict_delta`` option), so
        a slot that keeps its content costs the transformer nothing to predict."""
        h = self.trunk(z, bg, self._cond(c, actions, z))
        p_mu, p_lv = gaussian(self.particle_out(h[:, :, :-1]))
        b_mu, b_lv = gaussian(self.bg_out(h[:, :, -1]))
        return z + p_mu, p_lv, bg + b_mu, b_lv  # the change from frame t (the official predict_delta)

    def loss(
        self, z_mu, z_lv, bg_mu, bg_lv, actions=None, beta_dyn: float = 0.2, weights=None
    ) -> tuple[torch.Tensor, dict]:
        """Teacher-forced dynamic KLs on a posterior sequence ``z [B, T, K, Dp]``, ``bg [B, T, Db]`` (μ and log σ²);
        the inputs are the posterior means; ``weights [B, T, K, Dp]`` weigh the particles' KL terms (e.g.
        ``dlp.kl_weights``: an off particle's attributes do not count)."""
        c = None
        kl_ctx = z_mu.new_zeros(())
        if self.context_dim:
            q_mu, q_lv, p_mu, p_lv = self.latent_actions(z_mu, bg_mu, actions)
            c = q_mu + torch.randn_like(q_mu) * (0.5 * q_lv).exp()  # c_t for t < T − 1
            kl_ctx = gauss_kl(q_mu, q_lv, p_mu[:, :-1], p_lv[:, :-1]).sum((1, 2, 3)).mean()
        n = z_mu.shape[1] - 1
        pm, pl, bm, bl = self.predict(z_mu[:, :n], bg_mu[:, :n], c, actions)
        kl_p = gauss_kl(z_mu[:, 1:], z_lv[:, 1:], pm, pl)
        if weights is not None:
            kl_p = kl_p * weights[:, 1:]
        kl_dyn = (kl_p.sum((1, 2, 3)) + gauss_kl(bg_mu[:, 1:], bg_lv[:, 1:], bm, bl).sum((1, 2))).mean()
        total = beta_dyn * (kl_dyn + kl_ctx)
        return total, {"loss": total.item(), "kl_dyn": kl_dyn.item(), "kl_ctx": kl_ctx.item()}

    @torch.no_grad()
    def rollout(
        self, z: torch.Tensor, bg: torch.Tensor, steps: int, sample: bool = True, actions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Continue ``z [B, t0, K, Dp]``, ``bg [B, t0, Db]`` (posterior means of the context frames) by ``steps``
        frames: each step's latent actions are inferred for the known transitions and drawn from the policy
        (``sample``; else its mean) for the new one, and the next frame is the dynamics' mean. ``actions [B, T, A]``
        are given for every frame when action-conditioned. Returns the whole sequences."""
        for _ in range(steps):
            c = None
            if self.context_dim:
                q_mu, _, p_mu, p_lv = self.latent_actions(z, bg, actions)
                new = p_mu[:, -1:] + (torch.randn_like(p_mu[:, -1:]) * (0.5 * p_lv[:, -1:]).exp() if sample else 0)
                c = torch.cat([q_mu, new], 1)
            pm, _, bm, _ = self.predict(z, bg, c, actions)
            z, bg = torch.cat([z, pm[:, -1:]], 1), torch.cat([bg, bm[:, -1:]], 1)
        return z, bg
