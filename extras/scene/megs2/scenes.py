r"""Procedural scenes with view-dependent colour for MEGS², without a download: one of the seeded SDF objects of
``extras.data.sdf_object`` (UPNet's), coloured by a smooth seeded albedo field and shaded Blinn-Phong,

.. math::
    c = \rho(\mathbf p)\,\big(k_a + k_d \max(0, \mathbf n\cdot\mathbf l)\big)
      + k_s \max(0, \mathbf n\cdot\mathbf h)^{\,n},\qquad \mathbf h = \frac{\mathbf l + \mathbf v}{\|\mathbf l+\mathbf v\|},

so the specular term moves with the viewer (what spherical harmonics or lobes must store), sphere-traced from
perspective cameras on a sphere around the object (``views`` of them: a Fibonacci spiral over the upper
hemisphere and a band below it; every ``test_every``-th view is held out).

>>> s = scene(seed=0, views=4, size=16, test_every=4)
>>> s["images"].shape, s["masks"].shape, len(s["cameras"]), s["test"].tolist()
(torch.Size([4, 16, 16, 3]), torch.Size([4, 16, 16]), 4, [False, False, False, True])
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras import data
from agentkit.extras.scene.megs2.render import Camera, look_at

RADIUS = 3.0  # cameras' distance from the object's centre
FOV = 30.0  # degrees


def viewpoints(n: int) -> np.ndarray:
    """``n`` unit directions: a Fibonacci spiral from 75° above to 30° below the horizon (z up)."""
    i = np.arange(n) + 0.5
    z = 1 - i / n * (1 - math.sin(math.radians(-30))) - (1 - math.sin(math.radians(75)))
    z = np.clip(z, -0.5, 0.97)
    phi = i * math.pi * (3 - math.sqrt(5))
    r = np.sqrt(1 - z**2)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], -1)


def albedo_field(seed: int):
    """A smooth seeded colour field on ℝ³: a few random Fourier features squashed into [0.15, 0.9]."""
    g = torch.Generator().manual_seed(seed)
    freq = torch.randn(6, 3, generator=g) * 2.0
    phase = torch.rand(6, generator=g) * 2 * math.pi
    mix = torch.randn(6, 3, generator=g)
    base = torch.rand(3, generator=g) * 0.6 + 0.2

    def field(p: torch.Tensor) -> torch.Tensor:
        return (0.15 + 0.75 * torch.sigmoid(torch.sin(p @ freq.t() + phase) @ mix + torch.logit(base))).clamp(0, 1)

    return field


@torch.no_grad()
def trace(sdf, cam: Camera, steps: int = 64, eps: float = 1e-3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sphere-trace ``sdf`` from ``cam``: the hit points ``[H, W, 3]``, whether each pixel hit, and the rays'
    directions."""
    ys, xs = torch.meshgrid(torch.arange(cam.height) + 0.5, torch.arange(cam.width) + 0.5, indexing="ij")
    d_cam = torch.stack([(xs - cam.cx) / cam.fx, (ys - cam.cy) / cam.fy, torch.ones_like(xs)], -1)
    d = F.normalize(d_cam @ cam.rot, dim=-1)  # camera → world: Wᵀ d
    o = cam.centre.expand_as(d)
    t, hit = data.sphere_trace(sdf, o, d, RADIUS - 1.2, RADIUS + 1.2, steps, eps)
    return o + t[..., None] * d, hit, d


def shade(
    albedo,
    points: torch.Tensor,
    normals: torch.Tensor,
    view: torch.Tensor,
    light: torch.Tensor,
    ambient: float = 0.25,
    diffuse: float = 0.6,
    specular: float = 0.5,
    shininess: float = 24.0,
) -> torch.Tensor:
    """Blinn-Phong colour ``[N, 3]`` at surface ``points`` with unit ``normals``, ``view`` (towards the eye) and
    ``light`` (towards the light) directions."""
    rho = albedo(points)
    half = F.normalize(light + view, dim=-1)
    lam = (normals * light).sum(-1, keepdim=True).clamp(min=0)
    spec = (normals * half).sum(-1, keepdim=True).clamp(min=0) ** shininess
    return (rho * (ambient + diffuse * lam) + specular * spec).clamp(0, 1)


@torch.no_grad()
def scene(
    seed: int,
    views: int = 48,
    size: int = 64,
    test_every: int = 6,
    category: str | None = None,
    background: float = 0.0,
) -> dict:
    """Render one seeded object from ``views`` cameras: ``images [V, S, S, 3]`` in [0, 1], ``masks [V, S, S]``,
    ``cameras``, the ``test`` flags (every ``test_every``-th view), the training views' surface hits ``surface [P, 3]``
    with their pixels' ``colours [P, 3]`` (to initialise Gaussians from), and the ``category``."""
    rng = np.random.default_rng(seed)
    cat = category or data.SDF_CATEGORIES[int(rng.integers(len(data.SDF_CATEGORIES)))]
    sdf = data.sdf_object(cat, seed)
    albedo = albedo_field(seed)
    light = F.normalize(torch.tensor(rng.normal(size=3) + np.array([0.0, 0.0, 1.5]), dtype=torch.float32), dim=0)
    cams = [
        look_at(
            torch.tensor(RADIUS * v, dtype=torch.float32), torch.zeros(3), size, FOV, up=torch.tensor([0.0, 0.0, 1.0])
        )
        for v in viewpoints(views)
    ]
    images, masks, surface, colours = [], [], [], []
    for cam, is_test in zip(cams, [(i + 1) % test_every == 0 for i in range(views)]):
        p, hit, d = trace(sdf, cam)
        img = torch.full((size, size, 3), float(background))
        if hit.any():
            n = data.sdf_normals(sdf, p[hit])
            img[hit] = shade(albedo, p[hit], n, -d[hit], light.expand_as(n))
            if not is_test:
                surface.append(p[hit])
                colours.append(img[hit])
        images.append(img)
        masks.append(hit)
    return {
        "images": torch.stack(images),
        "masks": torch.stack(masks),
        "cameras": cams,
        "test": torch.tensor([(i + 1) % test_every == 0 for i in range(views)]),
        "surface": torch.cat(surface) if surface else torch.zeros(0, 3),
        "colours": torch.cat(colours) if colours else torch.zeros(0, 3),
        "category": cat,
    }
