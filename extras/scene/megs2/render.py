r"""A pure-PyTorch 3D Gaussian Splatting rasteriser: EWA projection, depth sort, dense alpha compositing.

gsplat's ``rasterization`` needs its CUDA kernels (its torch reference, ``gsplat.cuda._torch_impl``, is private),
so MEGS² here renders with this one; on small images every Gaussian is composited at every pixel, which a tiled
rasteriser would skip where α < 1/255.

For a Gaussian with mean μ, covariance Σ = R S Sᵀ Rᵀ (S = diag(e^{scale}), R from a unit quaternion), a camera
with world-to-camera rotation W and translation t and focal lengths f_x, f_y:

.. math::
    \mathbf m = W\mu + t,\quad J = \begin{pmatrix} f_x/m_z & 0 & -f_x m_x/m_z^2\\
    0 & f_y/m_z & -f_y m_y/m_z^2\end{pmatrix},\quad \Sigma' = J W \Sigma W^\top J^\top + 0.3\,I,

the 2D mean ``u = (f_x m_x/m_z + c_x, f_y m_y/m_z + c_y)`` and, at pixel p, α = min(0.99, o·exp(−½ (p − u)ᵀ Σ'⁻¹
(p − u))) (dropped below 1/255), composited front to back by depth:
``C(p) = Σ_i c_i α_i Π_{j<i} (1 − α_j) + T(p)·background``. The 0.3 px² dilation is 3DGS's low-pass filter.

>>> cam = look_at(torch.tensor([0.0, 0.0, -4.0]), torch.zeros(3), size=16, fov=40.0)
>>> g = torch.zeros(1, 3), torch.full((1, 3), -2.0), torch.tensor([[1.0, 0, 0, 0]])
>>> img, alpha = render(*g, torch.tensor([0.5]), torch.ones(1, 3), cam)
>>> img.shape, round(float(alpha.max()), 2)
(torch.Size([16, 16, 3]), 0.37)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class Camera:
    """A pinhole camera: ``rot [3, 3]`` and ``trans [3]`` map world to camera coordinates (x right, y down, z
    forward), ``fx, fy, cx, cy`` in pixels, images ``height × width``."""

    rot: torch.Tensor
    trans: torch.Tensor
    fx: float
    fy: float
    cx: float
    cy: float
    height: int
    width: int

    @property
    def centre(self) -> torch.Tensor:
        """The camera's position in world coordinates, −Wᵀt."""
        return -self.rot.t() @ self.trans


def look_at(eye: torch.Tensor, target: torch.Tensor, size: int, fov: float, up: torch.Tensor | None = None) -> Camera:
    """A ``size × size`` camera at ``eye`` looking at ``target`` with a ``fov``-degree field of view."""
    up = torch.tensor([0.0, 1.0, 0.0]) if up is None else up
    fwd = target - eye
    fwd = fwd / fwd.norm()
    right = torch.linalg.cross(fwd, up)
    if right.norm() < 1e-6:  # looking along ``up``
        right = torch.linalg.cross(fwd, torch.tensor([0.0, 0.0, 1.0]))
    right = right / right.norm()
    down = torch.linalg.cross(fwd, right)
    rot = torch.stack([right, down, fwd])
    f = size / 2 / math.tan(math.radians(fov) / 2)
    return Camera(rot, -rot @ eye, f, f, size / 2, size / 2, size, size)


def rotations(quat: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``[G, 3, 3]`` of quaternions ``[G, 4]`` (w, x, y, z; normalised here)."""
    w, x, y, z = (quat / quat.norm(dim=-1, keepdim=True).clamp(min=1e-12)).unbind(-1)
    return torch.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ],
        -1,
    ).view(-1, 3, 3)  # fmt: skip


def covariances(log_scale: torch.Tensor, quat: torch.Tensor) -> torch.Tensor:
    """Σ = R S Sᵀ Rᵀ, ``[G, 3, 3]``."""
    m = rotations(quat) * torch.exp(log_scale)[:, None, :]
    return m @ m.transpose(1, 2)


def project(means: torch.Tensor, cov: torch.Tensor, cam: Camera):
    """EWA splatting: 2D means ``[G, 2]``, 2D covariances ``[G, 2, 2]`` (dilated by 0.3 px²) and depths ``[G]``."""
    m = means @ cam.rot.t() + cam.trans
    x, y, z = m.unbind(-1)
    zc = z.clamp(min=1e-4)
    zero = torch.zeros_like(z)
    jac = torch.stack([cam.fx / zc, zero, -cam.fx * x / zc**2, zero, cam.fy / zc, -cam.fy * y / zc**2], -1).view(
        -1, 2, 3
    )
    t = jac @ cam.rot
    cov2 = t @ cov @ t.transpose(1, 2) + 0.3 * torch.eye(2, device=means.device)
    uv = torch.stack([cam.fx * x / zc + cam.cx, cam.fy * y / zc + cam.cy], -1)
    return uv, cov2, z


def render(
    means: torch.Tensor,
    log_scale: torch.Tensor,
    quat: torch.Tensor,
    opacity: torch.Tensor,
    colour: torch.Tensor,
    cam: Camera,
    background: torch.Tensor | None = None,
    near: float = 0.01,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Render Gaussians (``opacity [G]`` in [0, 1], ``colour [G, 3]``, already evaluated for this view) into
    ``(image [H, W, 3], alpha [H, W])``; Gaussians behind ``near`` are skipped."""
    uv, cov2, depth = project(means, covariances(log_scale, quat), cam)
    keep = depth > near
    order = torch.argsort(depth[keep])
    uv, cov2, op, col = uv[keep][order], cov2[keep][order], opacity[keep][order], colour[keep][order]
    det = cov2[:, 0, 0] * cov2[:, 1, 1] - cov2[:, 0, 1] ** 2
    ca, cb, cc = cov2[:, 1, 1] / det, -cov2[:, 0, 1] / det, cov2[:, 0, 0] / det  # the conic Σ'⁻¹
    ys, xs = torch.meshgrid(
        torch.arange(cam.height, device=means.device, dtype=means.dtype) + 0.5,
        torch.arange(cam.width, device=means.device, dtype=means.dtype) + 0.5,
        indexing="ij",
    )
    dx = xs.reshape(1, -1) - uv[:, :1]
    dy = ys.reshape(1, -1) - uv[:, 1:]
    power = -0.5 * (ca[:, None] * dx * dx + 2 * cb[:, None] * dx * dy + cc[:, None] * dy * dy)
    alpha = (op[:, None] * torch.exp(power)).clamp(max=0.99)
    alpha = alpha * (alpha >= 1 / 255)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:1]), 1 - alpha[:-1]]), 0)  # T before each Gaussian
    weight = alpha * trans
    img = weight.t() @ col
    acc = weight.sum(0)
    if background is not None:
        img = img + (1 - acc)[:, None] * background
    return img.view(cam.height, cam.width, 3), acc.view(cam.height, cam.width)
