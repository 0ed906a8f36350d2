r"""View-dependent colour of a Gaussian primitive: spherical harmonics up to degree 3 (3D Gaussian Splatting's
48 floats) or MEGS²'s spherical-Gaussian lobes,

.. math::
    c(\mathbf v) = c_0 + \sum_{i \le L} a_i\, e^{s_i(\boldsymbol\mu_i \cdot \mathbf v - 1)},

each lobe 7 floats (amplitude a_i ∈ ℝ³, unit axis μ_i, sharpness s_i ≥ 0). A lobe that is pruned is folded into the
base colour with its mean over the sphere,

.. math::
    \frac{1}{4\pi}\int_{S^2} a\, e^{s(\boldsymbol\mu\cdot\mathbf v - 1)}\,d\mathbf v
    = a\,\frac{1 - e^{-2s}}{2s},

so the colour a pruned lobe leaves behind is its average, not nothing [the fold is unverified: no code is out].

Shapes: ``dirs [..., 3]`` unit view directions; SH coefficients ``[G, (deg+1)², 3]``; lobes ``amp [G, L, 3]``,
``axis [G, L, 3]`` (normalised inside), ``sharp [G, L]``.

>>> d = torch.tensor([[0.0, 0.0, 1.0]])
>>> sg_colour(torch.zeros(1, 3), torch.ones(1, 1, 3), d[:, None], torch.full((1, 1), 5.0), d).tolist()
[[1.0, 1.0, 1.0]]
>>> fold(torch.ones(1, 3), torch.tensor([2.0])).tolist()  # (1 - e^-4) / 4
[[0.24542109668254852, 0.24542109668254852, 0.24542109668254852]]
"""

from __future__ import annotations

import torch

# Real spherical-harmonic constants of 3DGS's ``sh_utils.eval_sh`` (degrees 0–3).
C0 = 0.28209479177387814
C1 = 0.4886025119029199
C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
C3 = (
    -0.5900435899266435,
    2.890611442640554,
    -0.4570457994644658,
    0.3731763325901154,
    -0.4570457994644658,
    1.445305721320277,
    -0.5900435899266435,
)


def sh_basis(dirs: torch.Tensor, degree: int = 3) -> torch.Tensor:
    """The real SH basis ``[..., (degree+1)²]`` at unit ``dirs`` (3DGS's ordering and signs)."""
    x, y, z = dirs.unbind(-1)
    out = [torch.full_like(x, C0)]
    if degree >= 1:
        out += [-C1 * y, C1 * z, -C1 * x]
    if degree >= 2:
        xx, yy, zz, xy, yz, xz = x * x, y * y, z * z, x * y, y * z, x * z
        out += [C2[0] * xy, C2[1] * yz, C2[2] * (2 * zz - xx - yy), C2[3] * xz, C2[4] * (xx - yy)]
    if degree >= 3:
        out += [
            C3[0] * y * (3 * xx - yy),
            C3[1] * xy * z,
            C3[2] * y * (4 * zz - xx - yy),
            C3[3] * z * (2 * zz - 3 * xx - 3 * yy),
            C3[4] * x * (4 * zz - xx - yy),
            C3[5] * z * (xx - yy),
            C3[6] * x * (xx - 3 * yy),
        ]
    return torch.stack(out, -1)


def sh_colour(coeffs: torch.Tensor, dirs: torch.Tensor) -> torch.Tensor:
    """``[G, 3]`` colours of SH ``coeffs [G, K, 3]`` (K = (deg+1)²) seen along ``dirs [G, 3]``, with 3DGS's +0.5
    offset (the degree-0 coefficient 0 is mid-grey)."""
    degree = int(round(coeffs.shape[1] ** 0.5)) - 1
    return (sh_basis(dirs, degree)[:, :, None] * coeffs).sum(1) + 0.5


def sg_colour(
    base: torch.Tensor, amp: torch.Tensor, axis: torch.Tensor, sharp: torch.Tensor, dirs: torch.Tensor
) -> torch.Tensor:
    """``[G, 3]``: c0 + Σ_i a_i exp(s_i (μ_i · v − 1)) along ``dirs [G, 3]``; lobes with ``sharp`` = 0 are flat
    (a constant a_i), so a pruned lobe is one whose amplitude is 0, not whose sharpness is."""
    mu = axis / axis.norm(dim=-1, keepdim=True).clamp(min=1e-8)
    cos = (mu * dirs[:, None]).sum(-1)
    return base + (amp * torch.exp(sharp * (cos - 1))[..., None]).sum(1)


def fold(amp: torch.Tensor, sharp: torch.Tensor) -> torch.Tensor:
    """A lobe's mean over the sphere, ``a (1 − e^{−2s}) / (2s)`` (``a`` as s → 0): what folding it adds to c0."""
    s = sharp.clamp(min=1e-6)[..., None]
    return amp * (-torch.expm1(-2 * s)) / (2 * s)
