"""Symmetric-space latents with a conditional flow-matching decoder, and the VAE it is compared with
[unverified: no code exists; built from the paper's description].

**Encoder.** x ↦ (μ, log σ²) of coefficients c ∈ R^p on a learnable basis {P_j} ⊂ 𝔭 ⊂ so(n); P = Σ_j c_j P_j. A
second learnable basis {K_i} ⊂ 𝔨 completes the Cartan decomposition 𝔤 = 𝔨 ⊕ 𝔭 that ``lie.cartan_residual`` keeps.
On these tasks every factor of variation is a point of the symmetric space G/K, so the encoder gives no c_k (the
stabiliser's coordinates would carry nothing); {K_i} enters through L_Cartan alone.

**Decoder.** A flow-matching field v(x, t, g) conditioned on the group element g = exp(P) (``torch.linalg.matrix_exp``,
flattened), trained on the straight path of Lipman et al. (2023) from noise x₀ ~ N(0, I) to data x₁:

.. math::

    x_t = (1 - (1-\\sigma_{min})t)\\,x_0 + t\\,x_1, \\qquad
    \\mathcal L_{CFM} = \\mathbb E\\,\\lVert v(x_t, t, e^{P}) - (x_1 - (1-\\sigma_{min})x_0) \\rVert^2 .

Sampling integrates dx/dt = v from t = 0 to 1 with Euler steps.

**Geodesic-symmetry consistency.** −P is the geodesic reflection of exp(P)·o through the base point o. One Euler step
from fresh noise under −P must encode back to −P:

.. math::

    \\mathcal L_{GSC} = \\lVert \\mu_{enc}(x_0 + (1-\\sigma_{min})\\,v(x_0, 0, e^{-P})) + c \\rVert^2 ,

on the coefficients (the bases fixed), so a seen sample's reflection is trained to be a sample, where the data may
have none. The total is L_CFM + 0.01·L_KL + L_Cartan + L_GSC + 10⁻³·L_basis (each weight a config key; the "CFM"
baseline sets the Cartan and GSC weights to 0). Norms are summed over coordinates and averaged over the batch.

>>> m = SymSpace(dim=3, n=3, k_dim=1, p_dim=2, hidden=16)
>>> parts = m.loss(torch.randn(8, 3))
>>> sorted(parts)
['basis', 'cartan', 'cfm', 'gsc', 'kl']
>>> m.sample(5, steps=4).shape
torch.Size([5, 3])
"""

from __future__ import annotations

import torch
from torch import nn

from agentkit.extras.nets import gaussian, kl_std_normal, mlp
from agentkit.extras.theory.symspace.lie import antisymmetric, basis_loss, cartan_residual


class SymSpace(nn.Module):
    """Encoder to 𝔭-coefficients, learnable Cartan bases in so(n), and the field v(x, t, exp(P)).

    Args:
        dim: data dimension.
        n: the Lie algebra is so(n) (n × n antisymmetric matrices).
        k_dim, p_dim: sizes of the bases of 𝔨 and 𝔭 (p_dim is the latent size).
        hidden: width of the encoder's and the field's two hidden layers.
        sigma_min: the path's width at t = 1.
        weights: loss weights {kl, cartan, gsc, basis} (``DEFAULT_WEIGHTS`` where absent).
    """

    DEFAULT_WEIGHTS = {"kl": 0.01, "cartan": 1.0, "gsc": 1.0, "basis": 1e-3}

    def __init__(
        self,
        dim: int,
        n: int = 3,
        k_dim: int = 1,
        p_dim: int = 2,
        hidden: int = 128,
        sigma_min: float = 1e-4,
        weights: dict[str, float] | None = None,
    ):
        super().__init__()
        self.dim, self.p_dim, self.sigma_min = dim, p_dim, sigma_min
        self.weights = self.DEFAULT_WEIGHTS | (weights or {})
        self.encoder = mlp(dim, hidden, 2 * p_dim, act=nn.SiLU)
        self.raw_k = nn.Parameter(torch.randn(k_dim, n, n) / n)
        self.raw_p = nn.Parameter(torch.randn(p_dim, n, n) / n)
        self.field = mlp(dim + 1 + n * n, hidden, dim, act=nn.SiLU)

    def bases(self) -> tuple[torch.Tensor, torch.Tensor]:
        """({K_i} ``[k_dim, n, n]``, {P_j} ``[p_dim, n, n]``), antisymmetric."""
        return antisymmetric(self.raw_k), antisymmetric(self.raw_p)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ, log σ²) ``[b, p_dim]`` of the 𝔭-coefficients."""
        return gaussian(self.encoder(x))

    def condition(self, c: torch.Tensor) -> torch.Tensor:
        """exp(Σ_j c_j P_j), flattened: ``[b, n²]``."""
        p = torch.einsum("bj,jkl->bkl", c, self.bases()[1])
        return torch.linalg.matrix_exp(p).flatten(1)

    def velocity(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """v(x, t, g): ``[b, dim]`` for x ``[b, dim]``, t ``[b]``, g ``[b, n²]``."""
        return self.field(torch.cat([x, t[:, None], cond], -1)) - x

    def loss(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each term of the loss (unweighted) on the batch ``x [b, dim]``; ``total`` weighs them."""
        mu, logvar = self.encode(x)
        c = mu + (0.5 * logvar).exp() * torch.randn_like(mu)
        x0, t = torch.randn_like(x), torch.rand(len(x), device=x.device)
        xt = (1 - (1 - self.sigma_min) * t[:, None]) * x0 + t[:, None] * x
        target = x - (1 - self.sigma_min) * x0
        k, p = self.bases()
        out = {
            "cfm": (self.velocity(xt, t, self.condition(c)) - target).pow(2).sum(-1).mean(),
            "kl": kl_std_normal(mu, logvar).mean(),
            "cartan": cartan_residual(k, p),
            "basis": basis_loss(k, p),
        }
        z0 = torch.randn_like(x)
        reflected = z0 + (1 - self.sigma_min) * self.velocity(z0, torch.zeros_like(t), self.condition(-c))
        out["gsc"] = (self.encode(reflected)[0] + c).pow(2).sum(-1).mean()
        return out

    def total(self, parts: dict[str, torch.Tensor]) -> torch.Tensor:
        """L_CFM + Σ weight·term."""
        return parts["cfm"] + sum(w * parts[k] for k, w in self.weights.items() if w)

    @torch.no_grad()
    def decode(self, c: torch.Tensor, steps: int = 32) -> torch.Tensor:
        """Integrate the flow from fresh noise to a sample for each coefficient row ``c [b, p_dim]`` (Euler)."""
        cond = self.condition(c)
        x = torch.randn(len(c), self.dim)
        for i in range(steps):
            t = torch.full((len(c),), i / steps)
            x = x + self.velocity(x, t, cond) / steps
        return x

    @torch.no_grad()
    def sample(self, n: int, steps: int = 32) -> torch.Tensor:
        """``n`` samples: c ~ N(0, I), then ``decode``."""
        return self.decode(torch.randn(n, self.p_dim), steps)


class VAE(nn.Module):
    """The baseline: the same encoder, an MLP decoder z ↦ x, loss ‖x − dec(z)‖² + kl_weight·KL (a Gaussian
    likelihood of fixed variance).

    >>> VAE(3, 2, 16).sample(4).shape
    torch.Size([4, 3])
    """

    def __init__(self, dim: int, latent: int = 2, hidden: int = 128, kl_weight: float = 0.01):
        super().__init__()
        self.latent, self.kl_weight = latent, kl_weight
        self.encoder, self.decoder = mlp(dim, hidden, 2 * latent, act=nn.SiLU), mlp(latent, hidden, dim, act=nn.SiLU)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return gaussian(self.encoder(x))

    def loss(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        mu, logvar = self.encode(x)
        z = mu + (0.5 * logvar).exp() * torch.randn_like(mu)
        return {"recon": (self.decoder(z) - x).pow(2).sum(-1).mean(), "kl": kl_std_normal(mu, logvar).mean()}

    def total(self, parts: dict[str, torch.Tensor]) -> torch.Tensor:
        return parts["recon"] + self.kl_weight * parts["kl"]

    @torch.no_grad()
    def decode(self, z: torch.Tensor, steps: int = 0) -> torch.Tensor:
        return self.decoder(z)

    @torch.no_grad()
    def sample(self, n: int, steps: int = 0) -> torch.Tensor:
        return self.decoder(torch.randn(n, self.latent))


def chamfer(a: torch.Tensor, b: torch.Tensor) -> float:
    """Symmetric Chamfer distance: mean squared distance from each point of ``a`` to its nearest in ``b``, plus the
    same from ``b`` to ``a``.

    >>> chamfer(torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, 0.0], [2.0, 0.0]]))
    2.0
    """
    d = torch.cdist(a.double(), b.double()).pow(2)
    return float(d.min(1).values.mean() + d.min(0).values.mean())


def recall(target: torch.Tensor, generated: torch.Tensor) -> float:
    """One direction of ``chamfer``: mean squared distance from each ``target`` point to the nearest generated one
    (how well the samples cover the target region; 0 when every target point is generated)."""
    return float(torch.cdist(target.double(), generated.double()).pow(2).min(1).values.mean())
