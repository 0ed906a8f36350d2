"""The Lie-algebra pieces of symmetric-space latents: learnable bases of a Cartan decomposition 𝔤 = 𝔨 ⊕ 𝔭 and the
losses that keep them one [unverified: no code exists; from the paper's description].

A Cartan decomposition splits a Lie algebra of matrices (here so(n): antisymmetric n×n) into 𝔨 and 𝔭 with

.. math::

    [\\mathfrak k, \\mathfrak k] \\subseteq \\mathfrak k, \\qquad [\\mathfrak k, \\mathfrak p] \\subseteq \\mathfrak p,
    \\qquad [\\mathfrak p, \\mathfrak p] \\subseteq \\mathfrak k, \\qquad [A, B] = AB - BA .

Then G/K is a symmetric space: exp(P)·o for P ∈ 𝔭 reaches its points, and P ↦ −P is the geodesic symmetry at o.
S² = SO(3)/SO(2) is the example: 𝔨 = ⟨L_z⟩ (rotations about the pole), 𝔭 = ⟨L_x, L_y⟩.

**L_Cartan** (``cartan_residual``) sums, over every pair of basis elements, the squared Frobenius norm of the part of
their bracket outside the span it must lie in (least squares on the flattened matrices). **L_basis**
(``basis_loss``) = Σ_i 1/‖K_i‖₁ + Σ_j 1/‖P_j‖₁ keeps the bases from shrinking to 0, where every residual vanishes.
"""

from __future__ import annotations

import torch


def so3() -> torch.Tensor:
    """The standard basis ``[3, 3, 3]`` (L_x, L_y, L_z) of so(3): (L_a)_{bc} = −ε_{abc}, so [L_x, L_y] = L_z."""
    eps = torch.zeros(3, 3, 3)
    for a, b, c in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
        eps[a, b, c], eps[a, c, b] = 1.0, -1.0
    return -eps


def antisymmetric(raw: torch.Tensor) -> torch.Tensor:
    """Map free parameters ``[m, n, n]`` to elements of so(n): (A − Aᵀ)/2."""
    return (raw - raw.transpose(-1, -2)) / 2


def bracket(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[A, B] = AB − BA, broadcast over leading axes."""
    return a @ b - b @ a


def span_residual(m: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """Squared Frobenius norm of the part of each matrix of ``m [k, n, n]`` outside span(``basis [r, n, n]``)
    (least squares on the flattened matrices); ``[k]``. An empty basis leaves all of m."""
    flat = m.reshape(len(m), -1)
    if len(basis) == 0:
        return flat.pow(2).sum(-1)
    b = basis.reshape(len(basis), -1).T  # [n², r]
    coef = torch.linalg.lstsq(b, flat.T).solution  # [r, k]
    return (flat.T - b @ coef).pow(2).sum(0)


def cartan_residual(k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """L_Cartan: Σ‖[K_a, K_b] off 𝔨‖² + Σ‖[K_a, P_b] off 𝔭‖² + Σ‖[P_a, P_b] off 𝔨‖² over the bases
    ``k [r, n, n]``, ``p [s, n, n]`` (pairs a < b within one basis)."""
    total = k.new_zeros(())
    for x, y, target in ((k, k, k), (k, p, p), (p, p, k)):
        if x is y:  # the pairs a < b only ([A, A] = 0 and [B, A] = −[A, B])
            a, b = torch.triu_indices(len(x), len(x), 1)
            pairs = bracket(x[a], x[b])
        else:
            pairs = bracket(x[:, None], y[None]).reshape(-1, *x.shape[1:])
        if len(pairs):
            total = total + span_residual(pairs, target).sum()
    return total


def basis_loss(k: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """L_basis = Σ_i 1/‖K_i‖₁ + Σ_j 1/‖P_j‖₁ (entrywise L1 norms)."""
    return sum((1.0 / b.abs().sum((-1, -2)).clamp_min(1e-8)).sum() for b in (k, p) if len(b))
