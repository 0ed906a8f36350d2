"""IC-SSL: a transformer that builds a spectral representation of its context in context, then learns from the
labelled tokens by functional gradient descent; and the two models it is compared with.

All three read an episode of n points, the first m of them labelled (shapes: ``x [B, n, d]``, ``y [B, n]`` with
the labels of positions ≥ m ignored, ``m`` an int or a ``[B]`` tensor) and return class logits ``[B, n, C]``.

**Representation** (``ICSSL``). RBF attention scores every pair of context points,

.. math::

    A_{ij} = \\exp\\!\\big(-\\lVert x_i - x_j\\rVert^2 / 2h\\big), \\qquad
    S = D^{-1/2} A D^{-1/2}, \\qquad \\hat L = I - S,

with D the degrees and h = s·median_{i≠j}‖x_i − x_j‖² (s learned). The spec writes L̂ = I − AD⁻¹; S is its
symmetric form (the same eigenvalues; eigenvectors rescaled by D^{1/2}), so the eigenvectors are orthonormal.
The bottom k eigenvectors of L̂ are the top k of S (A is a Gaussian kernel, so S ⪰ 0 and power iteration
needs no shift). Linear-attention layers run subspace iteration:

.. math::

    \\Phi_{\\ell+1} = \\mathrm{orth}(S\\,\\Phi_\\ell), \\qquad \\Phi_0 \\sim \\mathcal N(0, 1)^{n\\times k},

``orth`` being a QR step (``power_iteration``).

**Prediction** (``GDStage``). With class embeddings w_c = e_c, functional gradient descent on the cross-entropy of
the m labelled points, in the kernel κ of the representation:

.. math::

    f_{\\ell+1}(i) = f_\\ell(i) + \\alpha_\\ell \\sum_{j \\le m} \\big[e_{y_j} - \\mathrm{softmax}(f_\\ell(j))\\big]
        \\,\\kappa(\\phi_i, \\phi_j), \\qquad f_0 = 0.

κ is a learned spectral filter g(λ) = Σ_t θ_t λ^t of S inside the subspace, κ = Φ g(ΦᵀSΦ) Φᵀ: for exact
eigenvectors U and eigenvalues Λ this is U g(Λ) Uᵀ, and it does not depend on the basis QR returns.

**EIG+ICL** (``EigICL``) replaces the in-context power iteration by exact offline eigenmaps (``torch.linalg.eigh``
of S at the initial bandwidth, not learned) and keeps the same GD stage. **Plain ICL** (``PlainICL``) is a
transformer encoder over tokens [x_i, e_{y_i} or 0, labelled flag], with no positional encoding.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def labelled_mask(m: int | torch.Tensor, batch: int, n: int) -> torch.Tensor:
    """``[B, n]`` float mask of the labelled positions (the first m of each episode)."""
    m = torch.as_tensor(m).reshape(-1).expand(batch)
    return (torch.arange(n)[None, :] < m[:, None]).float()


def rbf_attention(x: torch.Tensor, scale: torch.Tensor | float) -> torch.Tensor:
    """S = D^-½ A D^-½ ``[B, n, n]`` for A_ij = exp(−‖x_i − x_j‖²/2h), h = scale · (median off-diagonal squared
    distance of the episode)."""
    d2 = torch.cdist(x, x).pow(2)
    n = x.shape[1]
    off = d2.masked_select(~torch.eye(n, dtype=torch.bool).expand_as(d2)).reshape(len(x), -1)
    h = scale * off.median(1).values.clamp_min(1e-8)
    a = torch.exp(-d2 / (2 * h[:, None, None]))
    dm = a.sum(-1).rsqrt()
    return dm[:, :, None] * a * dm[:, None, :]


def power_iteration(s: torch.Tensor, k: int, layers: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``layers`` linear-attention steps Φ ← orth(SΦ) from Gaussian Φ₀: an orthonormal ``[B, n, k]`` basis of
    (approximately) the top-k eigenspace of S, i.e. the bottom-k of L̂ = I − S."""
    phi = torch.randn(s.shape[0], s.shape[1], k, generator=generator, dtype=s.dtype)
    for _ in range(layers):
        phi, _ = torch.linalg.qr(s @ phi)
    return phi


def exact_eigenmaps(s: torch.Tensor, k: int) -> torch.Tensor:
    """The top-k eigenvectors ``[B, n, k]`` of S (``torch.linalg.eigh``): the bottom-k Laplacian eigenmaps."""
    _, u = torch.linalg.eigh(s)
    return u[..., -k:]


class GDStage(nn.Module):
    """In-context functional gradient descent in a learned spectral kernel (module docstring): ``steps`` updates
    of the logits of every point from the residuals of the labelled ones."""

    def __init__(self, classes: int, steps: int, order: int = 3):
        super().__init__()
        self.classes = classes
        self.theta = nn.Parameter(torch.tensor([1.0] + [0.0] * (order - 1)))  # g(λ) = Σ θ_t λ^t, starts at 1
        self.log_alpha = nn.Parameter(torch.full((steps,), math.log(0.5)))
        self.log_temp = nn.Parameter(torch.zeros(()))

    def kernel(self, phi: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """κ = Φ g(ΦᵀSΦ) Φᵀ ``[B, n, n]``."""
        small = phi.transpose(1, 2) @ s @ phi  # [B, k, k]
        power = torch.eye(small.shape[-1]).expand_as(small)
        g = self.theta[0] * power
        for t in range(1, len(self.theta)):
            power = power @ small
            g = g + self.theta[t] * power
        return phi @ g @ phi.transpose(1, 2)

    def forward(self, kappa: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        onehot = F.one_hot(y.clamp(0, self.classes - 1), self.classes).float() * mask[..., None]
        f = torch.zeros(*y.shape, self.classes)
        for a in self.log_alpha.exp():
            resid = (onehot - f.softmax(-1)) * mask[..., None]
            f = f + a * kappa @ resid
        return f * self.log_temp.exp()


class ICSSL(nn.Module):
    """RBF attention → ``power_layers`` of in-context power iteration → the GD stage (module docstring). Learned:
    the bandwidth scale s, the spectral filter θ, the step sizes α and an output temperature."""

    def __init__(self, classes: int = 2, k: int = 8, power_layers: int = 20, gd_steps: int = 8, scale: float = 0.1):
        super().__init__()
        self.k, self.power_layers = k, power_layers
        self.log_scale = nn.Parameter(torch.tensor(math.log(scale)))
        self.gd = GDStage(classes, gd_steps)

    def forward(self, x: torch.Tensor, y: torch.Tensor, m: int | torch.Tensor) -> torch.Tensor:
        s = rbf_attention(x, self.log_scale.exp())
        gen = None if self.training else torch.Generator().manual_seed(0)  # a fixed Φ₀ at evaluation
        phi = power_iteration(s, self.k, self.power_layers, gen)
        return self.gd(self.gd.kernel(phi, s), y, labelled_mask(m, *y.shape))


class EigICL(nn.Module):
    """Offline eigenmaps (exact, at the fixed bandwidth scale) feeding the same GD stage as ``ICSSL``."""

    def __init__(self, classes: int = 2, k: int = 8, gd_steps: int = 8, scale: float = 0.1):
        super().__init__()
        self.k, self.scale = k, scale
        self.gd = GDStage(classes, gd_steps)

    def forward(self, x: torch.Tensor, y: torch.Tensor, m: int | torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            s = rbf_attention(x, self.scale)
            phi = exact_eigenmaps(s, self.k)
        return self.gd(self.gd.kernel(phi, s), y, labelled_mask(m, *y.shape))


class PlainICL(nn.Module):
    """A transformer encoder on raw tokens [x_i (zero-padded to ``d_in``), e_{y_i} or 0, labelled flag]: the
    in-context learner with no spectral structure built in. Permutation-equivariant (no positions)."""

    def __init__(self, d_in: int, classes: int = 2, width: int = 64, layers: int = 3, heads: int = 4):
        super().__init__()
        self.d_in, self.classes = d_in, classes
        self.embed = nn.Linear(d_in + classes + 1, width)
        block = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, classes))

    def forward(self, x: torch.Tensor, y: torch.Tensor, m: int | torch.Tensor) -> torch.Tensor:
        mask = labelled_mask(m, *y.shape)
        x = F.pad(x, (0, self.d_in - x.shape[-1]))
        onehot = F.one_hot(y.clamp(0, self.classes - 1), self.classes).float() * mask[..., None]
        return self.head(self.encoder(self.embed(torch.cat([x, onehot, mask[..., None]], -1))))
