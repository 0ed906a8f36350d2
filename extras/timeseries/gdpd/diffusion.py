"""GDPD's diffusion prior: a DDPM over the teacher's full-series features, and the differentiable posterior sampler
that completes a prefix's features.

**Forward process** (Ho et al., 2020), with a linear schedule β₁ … β_T, α_t = 1 − β_t, ᾱ_t = Π_{s≤t} α_s:

.. math::

    q(z_t \\mid z_0) = \\mathcal N\\big(\\sqrt{\\bar\\alpha_t}\\, z_0,\\; (1 - \\bar\\alpha_t) I\\big)

(``q_sample``). The prior ε_θ(z_t, t) is an MLP trained on ‖ε − ε_θ(√ᾱ_t z₀ + √(1−ᾱ_t) ε, t)‖².

**Posterior sampling from a prefix** [unverified]. The short-prefix features are a degraded observation of the
full-series ones. The chain starts from a mix of them and noise, with a learned per-dimension weight α ∈ (0, 1)^d,

.. math::

    z_T = \\alpha \\odot z_{short} + (1 - \\alpha) \\odot \\varepsilon,

and runs the DDPM reverse steps to ẑ_long (``sample_from``):

.. math::

    z_{t-1} = \\frac{1}{\\sqrt{\\alpha_t}}\\Big(z_t - \\frac{\\beta_t}{\\sqrt{1-\\bar\\alpha_t}}\\,
        \\varepsilon_\\theta(z_t, t)\\Big) + \\sigma_t \\xi, \\qquad
    \\sigma_t^2 = \\tilde\\beta_t = \\frac{1-\\bar\\alpha_{t-1}}{1-\\bar\\alpha_t}\\beta_t .

Every step is differentiable, so CE(head(ẑ_long), y) reaches the student's z_short and α through the frozen prior.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class Schedule:
    """The linear β schedule over ``steps`` (T) and its derived products."""

    def __init__(self, steps: int = 50, beta_1: float = 1e-4, beta_T: float = 0.2):
        self.steps = steps
        self.betas = torch.linspace(beta_1, beta_T, steps)
        self.alphas = 1 - self.betas
        self.alpha_bar = torch.cumprod(self.alphas, 0)
        prev = torch.cat([torch.ones(1), self.alpha_bar[:-1]])
        self.posterior_var = self.betas * (1 - prev) / (1 - self.alpha_bar)

    def q_sample(self, z0: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """A draw of q(z_t | z_0) for integer steps ``t [B]`` (0-based: t = 0 is one step of noise)."""
        ab = self.alpha_bar[t].unsqueeze(-1)
        return ab.sqrt() * z0 + (1 - ab).sqrt() * noise


def time_embedding(t: torch.Tensor, steps: int, dim: int = 16) -> torch.Tensor:
    """Sinusoidal features ``[B, dim]`` of t / steps."""
    freqs = torch.exp(-math.log(1000.0) * torch.arange(dim // 2) / (dim // 2))
    angle = (t.float() / steps).unsqueeze(-1) * 1000.0 * freqs
    return torch.cat([angle.sin(), angle.cos()], -1)


class Denoiser(nn.Module):
    """ε_θ(z_t, t): an MLP on [z_t, time embedding]."""

    def __init__(self, dim: int, steps: int, hidden: int = 128):
        super().__init__()
        self.steps = steps
        self.net = nn.Sequential(
            nn.Linear(dim + 16, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, dim)
        )

    def forward(self, z: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([z, time_embedding(t, self.steps)], -1))


def fit_prior(
    z0: torch.Tensor, schedule: Schedule, steps: int = 2000, hidden: int = 128, lr: float = 2e-3, batch: int = 256
) -> Denoiser:
    """Train ε_θ on the rows of ``z0`` (standardised features) by the DDPM noise-prediction loss; returned frozen."""
    model = Denoiser(z0.shape[1], schedule.steps, hidden)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        x = z0[torch.randint(0, len(z0), (batch,))]
        t = torch.randint(0, schedule.steps, (batch,))
        noise = torch.randn_like(x)
        loss = ((model(schedule.q_sample(x, t, noise), t) - noise) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.requires_grad_(False).eval()


def sample_from(denoiser: Denoiser, schedule: Schedule, z_T: torch.Tensor) -> torch.Tensor:
    """The DDPM reverse chain from ``z_T`` down to ẑ₀, differentiable in ``z_T``."""
    z = z_T
    for t in reversed(range(schedule.steps)):
        tt = torch.full((len(z),), t, dtype=torch.long)
        eps = denoiser(z, tt)
        z = (z - schedule.betas[t] / (1 - schedule.alpha_bar[t]).sqrt() * eps) / schedule.alphas[t].sqrt()
        if t > 0:
            z = z + schedule.posterior_var[t].sqrt() * torch.randn_like(z)
    return z
