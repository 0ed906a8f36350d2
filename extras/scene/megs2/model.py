r"""Gaussian-splatting models with either colour (``colour.py``) and the memory they take.

``GaussianModel(kind="sh")`` stores 3DGS's degree-3 spherical harmonics (48 floats a primitive, cut to degree d:
3(d+1)²); ``kind="sg"`` stores MEGS²'s base colour and ``lobes`` spherical Gaussians (3 + 7 a live lobe). Every
primitive also has a position, a log-scale, a rotation quaternion and an opacity logit (11 floats). Static memory is
counted as what the model must keep: ``static_floats`` (× 4 bytes).

>>> m = GaussianModel(torch.randn(5, 3), torch.rand(5, 3), kind="sg", lobes=3)
>>> m.static_floats(), GaussianModel(torch.randn(5, 3), torch.rand(5, 3), kind="sh").static_floats()
(175, 295)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from agentkit.extras.scene.megs2.colour import C0, fold, sg_colour, sh_colour
from agentkit.extras.scene.megs2.render import Camera, render

GEOMETRY_FLOATS = 11  # position 3, log-scale 3, quaternion 4, opacity 1


class GaussianModel(nn.Module):
    """Gaussians initialised at ``points [G, 3]`` with ``colours [G, 3]`` (e.g. surface samples and their pixels),
    isotropic scales ``init_scale``, opacity 0.5 and, for lobes, zero amplitudes on random axes (``generator``)."""

    def __init__(
        self,
        points: torch.Tensor,
        colours: torch.Tensor,
        kind: str = "sg",
        lobes: int = 3,
        init_scale: float = 0.03,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        if kind not in ("sh", "sg"):
            raise ValueError(f"kind: {kind!r} is not 'sh' or 'sg'")
        g = len(points)
        self.kind = kind
        self.means = nn.Parameter(points.clone().float())
        self.log_scale = nn.Parameter(torch.full((g, 3), float(torch.log(torch.tensor(init_scale)))))
        self.quat = nn.Parameter(torch.tensor([1.0, 0.0, 0.0, 0.0]).repeat(g, 1))
        self.opacity_logit = nn.Parameter(torch.zeros(g))
        if kind == "sh":
            sh = torch.zeros(g, 16, 3)
            sh[:, 0] = (colours.float() - 0.5) / C0  # degree 0 alone reproduces the colour
            self.sh = nn.Parameter(sh)
            self.degree = 3
        else:
            self.base = nn.Parameter(colours.clone().float())
            self.amp = nn.Parameter(torch.zeros(g, lobes, 3))
            self.axis = nn.Parameter(F.normalize(torch.randn(g, lobes, 3, generator=generator), dim=-1))
            self.sharp_raw = nn.Parameter(torch.full((g, lobes), 2.0))
            self.register_buffer("alive", torch.ones(g, lobes, dtype=torch.bool))

    @property
    def opacity(self) -> torch.Tensor:
        return torch.sigmoid(self.opacity_logit)

    @property
    def sharp(self) -> torch.Tensor:
        return F.softplus(self.sharp_raw)

    def colours(self, cam: Camera) -> torch.Tensor:
        """``[G, 3]``: each primitive's colour seen from ``cam`` (clamped at 0, as 3DGS does)."""
        dirs = F.normalize(self.means - cam.centre.to(self.means), dim=-1)
        if self.kind == "sh":
            k = (self.degree + 1) ** 2
            return sh_colour(self.sh[:, :k], dirs).clamp(min=0)
        amp = self.amp * self.alive[..., None]
        return sg_colour(self.base, amp, self.axis, self.sharp, dirs).clamp(min=0)

    def forward(self, cam: Camera, background: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return render(self.means, self.log_scale, self.quat, self.opacity, self.colours(cam), cam, background)

    def static_floats(self) -> int:
        """Floats the model keeps: 11 a primitive, plus 3(d+1)² (SH) or 3 + 7 a live lobe (SG)."""
        g = len(self.means)
        if self.kind == "sh":
            return g * (GEOMETRY_FLOATS + 3 * (self.degree + 1) ** 2)
        return g * (GEOMETRY_FLOATS + 3) + 7 * int(self.alive.sum())

    @torch.no_grad()
    def keep(self, mask: torch.Tensor) -> None:
        """Remove the primitives where ``mask`` is False (new parameters: rebuild the optimiser after)."""
        for name, p in list(self._parameters.items()):
            setattr(self, name, nn.Parameter(p.detach()[mask].clone()))
        if self.kind == "sg":
            self.alive = self.alive[mask].clone()

    @torch.no_grad()
    def keep_most_opaque(self, n: int) -> None:
        """Keep the ``n`` most opaque primitives (at least one): opacity pruning."""
        mask = torch.zeros(len(self.means), dtype=torch.bool, device=self.means.device)
        mask[torch.argsort(self.opacity, descending=True)[: max(1, n)]] = True
        self.keep(mask)

    @torch.no_grad()
    def drop_lobes(self, dead: torch.Tensor) -> None:
        """Prune the lobes where ``dead [G, L]``, folding each into its base colour with its mean over the sphere."""
        dead = dead & self.alive
        self.base += (fold(self.amp, self.sharp) * dead[..., None]).sum(1)
        self.amp[dead] = 0
        self.alive &= ~dead

    @torch.no_grad()
    def cut_degree(self, degree: int) -> None:
        """Keep the SH bands up to ``degree`` (the higher coefficients are dropped, as LightGaussian's distillation
        starts from)."""
        self.degree = min(self.degree, degree)
        self.sh[:, (self.degree + 1) ** 2 :] = 0
