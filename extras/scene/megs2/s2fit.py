r"""Colour alone, on the sphere: how well SH of degree d (3(d+1)² floats) and L spherical-Gaussian lobes
(3 + 7L floats) fit the view-dependent radiance of one surface point, before any splatting. The targets are the
Blinn-Phong radiance of ``scenes.shade``,

.. math::
    c(\mathbf v) = \rho\,(k_a + k_d \max(0, \mathbf n\cdot\mathbf l)) + k_s \max(0, \mathbf n\cdot\mathbf h(\mathbf v))^{\,n},

at seeded normals, lights, albedos and shininess n ∈ {8, 24, 64}, sampled at Fibonacci directions (even ones to fit,
odd ones to test). SH is linear in its coefficients, so its fit is the least-squares optimum; lobes are fitted by
Adam from axes started at the best of a few sampled directions (the lobe fit is not convex).

>>> r = fit_s2(seed=0, functions=2, directions=64, steps=5)
>>> sorted(r), r["SH-3"]["floats"], r["3 lobes"]["floats"]
(['1 lobe', '2 lobes', '3 lobes', 'SH-0', 'SH-1', 'SH-2', 'SH-3'], 48, 24)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from agentkit.extras.nets import psnr_each
from agentkit.extras.scene.megs2.colour import sg_colour, sh_basis
from agentkit.extras.scene.megs2.scenes import shade


def fibonacci_sphere(n: int) -> torch.Tensor:
    """``n`` near-uniform unit directions ``[n, 3]``."""
    i = torch.arange(n, dtype=torch.float64) + 0.5
    z = 1 - 2 * i / n
    phi = i * math.pi * (3 - math.sqrt(5))
    r = (1 - z**2).sqrt()
    return torch.stack([r * phi.cos(), r * phi.sin(), z], -1).float()


def radiance(seed: int, functions: int, dirs: torch.Tensor) -> torch.Tensor:
    """``[F, D, 3]``: the Blinn-Phong radiance of ``functions`` seeded surface points along ``dirs [D, 3]``."""
    g = torch.Generator().manual_seed(seed)
    normal = F.normalize(torch.randn(functions, 3, generator=g), dim=-1)
    light = F.normalize(normal + torch.randn(functions, 3, generator=g) * 0.7, dim=-1)
    rho = torch.rand(functions, 3, generator=g) * 0.75 + 0.15
    shininess = torch.tensor([8.0, 24.0, 64.0])[torch.randint(3, (functions,), generator=g)]
    out = []
    for f in range(functions):
        n, v = normal[f].expand_as(dirs), dirs
        albedo = lambda p, c=rho[f]: c.expand(len(p), 3)  # noqa: E731 - a constant albedo at this point
        out.append(shade(albedo, v, n, v, light[f].expand_as(dirs), shininess=float(shininess[f])))
    return torch.stack(out)


def _lobes_at(base, amp, axis, sharp, dirs: torch.Tensor) -> torch.Tensor:
    """``[F, D, 3]``: the lobe colours of ``F`` functions (``base [F, 3]``, ``amp``/``axis [F, L, 3]``,
    ``sharp [F, L]``) along each of ``dirs [D, 3]``."""
    f, n = base.shape[0], dirs.shape[0]
    rep = lambda t: t.repeat_interleave(n, 0)  # noqa: E731
    return sg_colour(rep(base), rep(amp), rep(axis), rep(sharp), dirs.repeat(f, 1)).view(f, n, 3)


def fit_s2(seed: int, functions: int = 64, directions: int = 2048, steps: int = 400, lr: float = 0.05) -> dict:
    """``{model: {"floats": n, "psnr": mean test PSNR over the functions}}`` for SH-0…3 and 1–3 lobes."""
    dirs = fibonacci_sphere(directions)
    target = radiance(seed, functions, dirs)
    tr, te = slice(0, None, 2), slice(1, None, 2)
    out = {}
    for deg in range(4):
        basis = sh_basis(dirs, deg)  # [D, K]
        coef = torch.linalg.lstsq(basis[tr], target[:, tr].permute(1, 0, 2).reshape(basis[tr].shape[0], -1)).solution
        pred = (basis[te] @ coef).reshape(-1, functions, 3).permute(1, 0, 2)
        out[f"SH-{deg}"] = {
            "floats": 3 * (deg + 1) ** 2,
            "psnr": float(psnr_each(pred.clamp(0, 1), target[:, te]).mean()),
        }
    g = torch.Generator().manual_seed(seed + 1)
    for lobes in (1, 2, 3):
        # start each lobe's axis at one of the 8·L brightest training directions (distinct), its amplitude at 0
        bright = target[:, tr].sum(-1)  # [F, D/2]
        pick = torch.randperm(lobes * 8, generator=g)[:lobes]
        idx = bright.topk(lobes * 8, dim=1).indices[:, pick]  # [F, L]
        axis = dirs[tr][idx].clone().requires_grad_(True)  # [F, L, 3]
        base = target[:, tr].mean(1).clone().requires_grad_(True)
        amp = torch.zeros(functions, lobes, 3, requires_grad=True)
        log_sharp = torch.full((functions, lobes), math.log(10.0), requires_grad=True)
        opt = torch.optim.Adam([axis, base, amp, log_sharp], lr=lr)

        for _ in range(steps):
            loss = (_lobes_at(base, amp, axis, log_sharp.exp(), dirs[tr]) - target[:, tr]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            psnr = psnr_each(_lobes_at(base, amp, axis, log_sharp.exp(), dirs[te]).clamp(0, 1), target[:, te]).mean()
        out[f"{lobes} lobe{'s' if lobes > 1 else ''}"] = {"floats": 3 + 7 * lobes, "psnr": float(psnr)}
    return out
