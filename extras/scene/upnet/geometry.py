r"""The world UPNet looks at: orthographic cameras on the view sphere, sphere-traced renders of SDF objects, the
visual hull (the reconstructor) and its IoU, and the rotation of a view-relative map into the object frame.

Every object lies in the unit ball. A camera at unit direction :math:`v` looks at the origin along :math:`-v`; its
frame :math:`R_v = [r, u, v]` has right :math:`r = \mathrm{normalize}(z \times v)` (world up z; y near the poles)
and up :math:`u = v \times r`. Pixel :math:`(i, j)` of an ``S × S`` image is the ray through
:math:`x_j r + y_i u` with :math:`x, y \in [-1, 1]` at pixel centres, so a world point :math:`p` lands at
:math:`(p \cdot r, p \cdot u)`: orthographic, which is what makes the visual hull exact to compute on a grid.

The visual hull of views :math:`V` keeps the voxels whose centres project inside every silhouette:

.. math::
    H(V) = \{x : \forall v \in V,\ \mathrm{sil}_v(\pi_v(x)) = 1\} \supseteq \text{object},

each silhouette dilated by one pixel so that the containment survives the grid. A view-relative map gives
values at directions :math:`h_k` of the camera frame (``healpix_directions``), that is at :math:`R_v h_k` in the
object frame.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras.data import Mesh, sdf_normals, sphere_trace


def camera_frame(v: np.ndarray) -> np.ndarray:
    """The frames ``[..., 3, 3]`` of cameras at unit directions ``v [..., 3]``: columns right, up, view.

    >>> R = camera_frame(np.array([1.0, 0, 0]))
    >>> R.round(3).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    v = np.asarray(v, float)
    v = v / np.linalg.norm(v, axis=-1, keepdims=True)
    up = np.where(np.abs(v[..., 2:3]) > 0.99, np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 1.0]))
    r = np.cross(up, v)
    r /= np.linalg.norm(r, axis=-1, keepdims=True)
    return np.stack([r, np.cross(v, r), v], -1)


def _pixels(size: int) -> torch.Tensor:
    """Pixel-centre coordinates in [−1, 1], top row first: ``[size]``."""
    return (torch.arange(size) + 0.5) / size * 2 - 1


@torch.no_grad()
def render(
    shape, views: np.ndarray, size: int = 64, steps: int = 48, eps: float = 2e-3
) -> tuple[torch.Tensor, torch.Tensor]:
    """Render ``shape`` (an SDF, sphere-traced in ``steps``; or a ``data.Mesh``, rasterised) from cameras at unit
    directions ``views [V, 3]``.

    Returns:
        ``(image, silhouette)``, both ``[V, size, size]``: Lambert shading (light from the camera, 0.25 ambient,
        background 0) and whether each pixel's ray hits the surface.
    """
    if isinstance(shape, Mesh):
        return _raster(shape, views, size)
    sdf = shape
    R = torch.as_tensor(camera_frame(views), dtype=torch.float32)  # [V, 3, 3]
    g = _pixels(size)
    y, x = torch.meshgrid(-g, g, indexing="ij")  # image rows run down, +up is the top row
    origin = (
        x[None, ..., None] * R[:, None, None, :, 0]
        + y[None, ..., None] * R[:, None, None, :, 1]
        + 1.2 * R[:, None, None, :, 2]
    )  # [V, S, S, 3]
    d = -R[:, None, None, :, 2].expand_as(origin)
    t, hit = sphere_trace(sdf, origin, d, 0.0, 2.4, steps, eps)
    p = origin + t[..., None] * d
    normal = sdf_normals(sdf, p[hit])
    shade = torch.zeros_like(t)
    shade[hit] = 0.25 + 0.75 * (normal * -d[hit]).sum(-1).clamp(min=0)
    return shade, hit


def grid(n: int = 32) -> torch.Tensor:
    """Voxel centres of an ``n³`` grid over [−1, 1]³, flattened: ``[n³, 3]``."""
    g = _pixels(n)
    return torch.stack(torch.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)


def occupancy(shape, n: int = 32) -> torch.Tensor:
    """The object's voxels (centre inside): ``[n³]`` bool. For a mesh, inside is a generalised winding number
    above ½ (``winding``), which tolerates small holes and overlapping parts."""
    if isinstance(shape, Mesh):
        return winding(shape, grid(n)).abs() > 0.5
    return shape(grid(n)) < 0


@torch.no_grad()
def winding(mesh: Mesh, points: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    r"""The generalised winding number of ``points [P, 3]`` with respect to ``mesh``: the triangles' solid angles
    over 4π, each by Van Oosterom and Strackee's formula with :math:`a, b, c` the corners minus the point,

    .. math::
        \tan\frac{\Omega}{2} = \frac{a \cdot (b \times c)}{|a||b||c| + (a \cdot b)|c| + (a \cdot c)|b| + (b \cdot c)|a|}.

    1 inside a closed, outward-oriented mesh, 0 outside (−1 inside when inward-oriented)."""
    tri = torch.as_tensor(mesh.vertices)[torch.as_tensor(mesh.faces)]  # [F, 3, 3]
    out = []
    for p in points.split(chunk):
        a, b, c = (tri[None, :, k] - p[:, None] for k in range(3))  # [P, F, 3]
        la, lb, lc = a.norm(dim=-1), b.norm(dim=-1), c.norm(dim=-1)
        num = (a * torch.cross(b, c, dim=-1)).sum(-1)
        den = la * lb * lc + (a * b).sum(-1) * lc + (a * c).sum(-1) * lb + (b * c).sum(-1) * la
        out.append(2 * torch.atan2(num, den).sum(1) / (4 * np.pi))
    return torch.cat(out)


@torch.no_grad()
def _raster(mesh: Mesh, views: np.ndarray, size: int, chunk: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """Orthographic rasterisation of a mesh in ``render``'s camera model: per pixel, the nearest triangle whose
    projection holds the pixel centre (edge functions), shaded by its face normal (either side)."""
    R = torch.as_tensor(camera_frame(views), dtype=torch.float32)
    tri = torch.as_tensor(mesh.vertices)[torch.as_tensor(mesh.faces)]  # [F, 3, 3]
    n = torch.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0], dim=-1)
    n = F.normalize(n, dim=-1)
    g = _pixels(size)
    y, x = torch.meshgrid(-g, g, indexing="ij")
    px = torch.stack([x.flatten(), y.flatten()], -1)  # [S², 2]
    images, sils = [], []
    for r in R:
        q = tri @ r  # [F, 3 corners, (x, y, depth)]
        depth = torch.full((size * size,), -np.inf)
        face = torch.full((size * size,), -1, dtype=torch.long)
        for lo in range(0, len(q), chunk):
            qc = q[lo : lo + chunk]
            a, b, c = qc[:, 0], qc[:, 1], qc[:, 2]  # [f, 3]

            def edge(u, v):  # [S², f]: which side of the edge u → v each pixel lies on
                return (v[:, 0] - u[:, 0]) * (px[:, 1:2] - u[:, 1]) - (v[:, 1] - u[:, 1]) * (px[:, 0:1] - u[:, 0])

            w0, w1, w2 = edge(b, c), edge(c, a), edge(a, b)
            area = w0 + w1 + w2
            inside = ((w0 >= 0) & (w1 >= 0) & (w2 >= 0)) | ((w0 <= 0) & (w1 <= 0) & (w2 <= 0))
            inside &= area.abs() > 1e-12
            z = (w0 * a[:, 2] + w1 * b[:, 2] + w2 * c[:, 2]) / torch.where(inside, area, torch.ones_like(area))
            z = torch.where(inside, z, torch.full_like(z, -np.inf))
            best, idx = z.max(1)
            closer = best > depth
            depth = torch.where(closer, best, depth)
            face = torch.where(closer, idx + lo, face)
        hit = face >= 0
        shade = torch.zeros(size * size)
        shade[hit] = 0.25 + 0.75 * (n[face[hit]] @ r[:, 2]).abs()
        images.append(shade.view(size, size))
        sils.append(hit.view(size, size))
    return torch.stack(images), torch.stack(sils)


def carve(silhouettes: torch.Tensor, views: np.ndarray, n: int = 32, dilate: int = 1) -> torch.Tensor:
    """Per view, the voxels each silhouette keeps: ``silhouettes [V, S, S]`` from ``views [V, 3]`` →
    ``[V, n³]`` bool. The visual hull of any subset of views is the AND of its rows.

    Each silhouette is first dilated by ``dilate`` pixels (max-pooling), so that no object voxel is carved by the
    sampling of pixels.
    """
    size = silhouettes.shape[-1]
    sil = silhouettes.float()[:, None]
    if dilate:
        sil = F.max_pool2d(sil, 2 * dilate + 1, stride=1, padding=dilate)
    R = torch.as_tensor(camera_frame(views), dtype=torch.float32)
    pts = grid(n)
    x = pts @ R[:, :, 0].T  # [n³, V]
    y = pts @ R[:, :, 1].T
    col = ((x + 1) / 2 * size).floor().long().clamp(0, size - 1)
    row = ((1 - y) / 2 * size).floor().long().clamp(0, size - 1)
    v = torch.arange(len(views))
    return sil[v[None], 0, row, col].T > 0.5


def iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """IoU of boolean voxel sets along the last axis (broadcasting)."""
    return (a & b).sum(-1) / (a | b).sum(-1).clamp(min=1)


def to_object_frame(view: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Directions of the camera frame at ``view`` (``[K, 3]``, e.g. the HEALPix map's) in the object frame:
    :math:`R_v h_k`."""
    return directions @ camera_frame(view).T


def interpolate_map(values: np.ndarray, at: np.ndarray, candidates: np.ndarray, radius_deg: float = 30.0) -> np.ndarray:
    r"""A map's ``values [K]`` given at unit directions ``at [K, 3]``, read at ``candidates [N, 3]``: the official
    weighting :math:`w_k \propto e^{-\angle(c, a_k)}` (angles in radians) over the directions within
    ``radius_deg`` of the candidate (NaN where none is).

    >>> interpolate_map(np.array([1.0, 3.0]), np.eye(3)[:2], np.eye(3)[:1]).round(3).tolist()
    [1.0]
    """
    ang = np.arccos(np.clip(candidates @ at.T, -1, 1))  # [N, K]
    w = np.where(ang < np.radians(radius_deg), np.exp(-ang), 0.0)
    with np.errstate(invalid="ignore"):
        return (w @ values) / w.sum(1)


def select(maps: list[np.ndarray], taken: list[int], threshold: float = 0.1) -> int:
    r"""UPNet's choice among candidates, given each acquired view's map already read at the candidates
    (``maps``: ``[N]`` arrays, higher = more to gain there): min-max normalise each map, drop the candidates any map
    ever scored :math:`\le` ``threshold`` and those already taken, and pick :math:`\arg\max_c \prod_t U_t(c)`
    (``our_policy_single.py``: ``filter_viewpoints_small`` then ``view_select_all``). If the filter drops every
    candidate, the product over the untaken ones decides.

    >>> select([np.array([0.0, 1.0, 0.8, 0.5]), np.array([0.0, 0.2, 1.0, 0.9])], taken=[0])
    2
    """
    U = np.stack([np.nan_to_num((m - np.nanmin(m)) / max(np.nanmax(m) - np.nanmin(m), 1e-12)) for m in maps])
    free = np.ones(U.shape[1], bool)
    free[taken] = False
    keep = free & (U > threshold).all(0)
    score = U.prod(0)
    pool = keep if keep.any() else free
    return int(np.flatnonzero(pool)[np.argmax(score[pool])])
