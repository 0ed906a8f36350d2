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
    tile: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Render Gaussians (``opacity [G]`` in [0, 1], ``colour [G, 3]``, already evaluated for this view) into
    ``(image [H, W, 3], alpha [H, W])``; Gaussians behind ``near`` are skipped.

    ``tile`` > 0 composites each ``tile × tile`` block of pixels over only the Gaussians whose support reaches it
    (as 3DGS's tiles do), in the same depth order; the support is where α ≥ 1/255, a disc of radius
    ``sqrt(2 λ_max ln(255 o))`` around u, so the tiled image equals the dense one (``tile=0``) up to rounding."""
    uv, cov2, depth = project(means, covariances(log_scale, quat), cam)
    keep = depth > near
    order = torch.argsort(depth[keep])
    uv, cov2, op, col = uv[keep][order], cov2[keep][order], opacity[keep][order], colour[keep][order]
    det = cov2[:, 0, 0] * cov2[:, 1, 1] - cov2[:, 0, 1] ** 2
    conic = torch.stack([cov2[:, 1, 1] / det, -cov2[:, 0, 1] / det, cov2[:, 0, 0] / det], -1)  # Σ'⁻¹
    dev, dt = means.device, means.dtype
    h, w = cam.height, cam.width
    if tile <= 0 or len(uv) == 0:
        ys, xs = torch.meshgrid(
            torch.arange(h, device=dev, dtype=dt) + 0.5, torch.arange(w, device=dev, dtype=dt) + 0.5, indexing="ij"
        )
        pix = torch.stack([xs.reshape(-1), ys.reshape(-1)], -1)
        img, acc = _composite(uv[:, None], conic[:, None], op[:, None], col[:, None], pix[None], None)
        img, acc = img[0], acc[0]
    else:
        with torch.no_grad():  # which Gaussians reach which tile (no gradient flows through the selection)
            half = 0.5 * (cov2[:, 0, 0] + cov2[:, 1, 1])
            lam = half + torch.sqrt(0.25 * (cov2[:, 0, 0] - cov2[:, 1, 1]) ** 2 + cov2[:, 0, 1] ** 2)
            radius = torch.sqrt(2 * lam * torch.log((255 * op).clamp(min=1.0)))
            ty, tx = torch.meshgrid(
                torch.arange(0, h, tile, device=dev), torch.arange(0, w, tile, device=dev), indexing="ij"
            )
            x0, y0 = tx.reshape(-1, 1).to(dt), ty.reshape(-1, 1).to(dt)
            hit = (uv[None, :, 0] + radius > x0) & (uv[None, :, 0] - radius < x0 + tile)
            hit &= (uv[None, :, 1] + radius > y0) & (uv[None, :, 1] - radius < y0 + tile)
            hit &= (op * 255 >= 1)[None]
            count = int(hit.sum(1).max()) if hit.any() else 1
            idx = torch.argsort((~hit).to(torch.int8), dim=1, stable=True)[:, : max(count, 1)]  # depth order kept
            valid = hit.gather(1, idx)
        ly, lx = torch.meshgrid(
            torch.arange(tile, device=dev, dtype=dt) + 0.5,
            torch.arange(tile, device=dev, dtype=dt) + 0.5,
            indexing="ij",
        )
        pix = torch.stack([x0 + lx.reshape(1, -1), y0 + ly.reshape(1, -1)], -1)  # [T, tile², 2]
        img, acc = _composite(uv[idx], conic[idx], op[idx], col[idx], pix, valid)
        n_ty, n_tx = tx.shape
        img = img.view(n_ty, n_tx, tile, tile, 3).permute(0, 2, 1, 3, 4).reshape(n_ty * tile, n_tx * tile, 3)[:h, :w]
        acc = acc.view(n_ty, n_tx, tile, tile).permute(0, 2, 1, 3).reshape(n_ty * tile, n_tx * tile)[:h, :w]
        img, acc = img.reshape(-1, 3), acc.reshape(-1)
    if background is not None:
        img = img + (1 - acc)[:, None] * background
    return img.view(h, w, 3), acc.view(h, w)


def _composite(uv, conic, op, col, pix, valid):
    """Front-to-back compositing of depth-sorted Gaussians ``[T, G, …]`` over pixels ``pix [T, P, 2]`` (``valid
    [T, G]`` masks padding): ``(colour [T, P, 3], accumulated alpha [T, P])``."""
    dx = pix[:, None, :, 0] - uv[:, :, None, 0]
    dy = pix[:, None, :, 1] - uv[:, :, None, 1]
    power = -0.5 * (conic[..., 0, None] * dx * dx + 2 * conic[..., 1, None] * dx * dy + conic[..., 2, None] * dy * dy)
    alpha = (op[..., None] * torch.exp(power)).clamp(max=0.99)
    alpha = alpha * (alpha >= 1 / 255)
    if valid is not None:
        alpha = alpha * valid[..., None]
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1 - alpha[:, :-1]], 1), 1)  # T before each
    weight = alpha * trans
    return weight.transpose(1, 2) @ col, weight.sum(1)
