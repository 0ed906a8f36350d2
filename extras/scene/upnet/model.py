r"""UPNet's training targets, its selection from predicted maps, and the selection strategies it is compared with.

**Targets.** For an image from view :math:`v`, the map holds, at each view-relative HEALPix direction
:math:`h_k`, what acquiring the view :math:`R_v h_k` adds to the reconstruction (the official code stores the
per-view PSNR of SplatterImage's reconstruction from the one image; here the reconstructor is the visual hull):

.. math::
    g_k = \mathrm{IoU}(H(\{v, R_v h_k\}), O) - \mathrm{IoU}(H(\{v\}), O) \ge 0,
    \qquad y_k = g_k / \max_j g_j \in [0, 1],

with :math:`O` the object's voxels. The hull only shrinks as views are added and always contains :math:`O`, so
every gain is non-negative.

**Episodes.** Every strategy starts from the same view and picks among the 48 object-frame HEALPix candidates,
one at a time, until ``max_views`` are taken; the hull IoU after each count is recorded, and the time each pick
took.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras.scene.upnet import geometry as G


def target_map(
    shape, view: np.ndarray, dirs: np.ndarray, size: int, n: int, occ: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The image from ``view`` ``[size, size]`` and its gains ``g [K]`` at the view-relative ``dirs [K, 3]``
    (``occ``: the object's voxels, when already known)."""
    views = np.concatenate([view[None], G.to_object_frame(view, dirs)])
    image, sil = G.render(shape, views, size)
    keep = G.carve(sil, views, n)
    occ = G.occupancy(shape, n) if occ is None else occ
    base = G.iou(keep[0], occ)
    return image[0], G.iou(keep[0] & keep[1:], occ) - base


def normalise(gains: torch.Tensor) -> torch.Tensor:
    """``g / max g`` per row (rows of zeros stay zero): the regression target."""
    return gains / gains.max(-1, keepdim=True).values.clamp(min=1e-6)


class Scene:
    """One test object seen from the candidate views: their images, what each silhouette keeps of the grid, and
    the object's voxels. ``hull(taken)`` is the visual hull of the views taken."""

    def __init__(self, sdf, candidates: np.ndarray, size: int, n: int):
        self.candidates, self.n, self.size = candidates, n, size
        self.images, self.sil = G.render(sdf, candidates, size)
        self.keep = G.carve(self.sil, candidates, n)  # [N, n³]
        self.occ = G.occupancy(sdf, n)

    def hull(self, taken: list[int]) -> torch.Tensor:
        return self.keep[taken].all(0)

    def iou(self, taken: list[int]) -> float:
        return float(G.iou(self.hull(taken), self.occ))


# A strategy sees the scene and the views taken so far and returns the next candidate's index.
Strategy = Callable[[Scene, list[int]], int]


def episode(scene: Scene, pick: Strategy, start: int, max_views: int) -> tuple[list[float], list[float], list[int]]:
    """Run one selection episode: the hull IoU after 1 … ``max_views`` views, each pick's time in ms, and the views
    taken in order."""
    taken, ious, ms = [start], [scene.iou([start])], []
    for _ in range(max_views - 1):
        t = time.perf_counter()
        nxt = pick(scene, taken)
        ms.append(1000 * (time.perf_counter() - t))
        if nxt in taken:
            raise RuntimeError(f"strategy picked view {nxt}, which it had taken")
        taken.append(nxt)
        ious.append(scene.iou(taken))
    return ious, ms, taken


def _free(scene: Scene, taken: list[int]) -> np.ndarray:
    free = np.ones(len(scene.candidates), bool)
    free[taken] = False
    return free


def random_strategy(rng: np.random.Generator) -> Strategy:
    return lambda scene, taken: int(rng.choice(np.flatnonzero(_free(scene, taken))))


def farthest(scene: Scene, taken: list[int]) -> int:
    """The candidate whose view axis makes the largest smallest angle with every taken one's. Axes, not
    directions: an orthographic silhouette and its antipode's are mirror images, so "farthest" by direction would
    pick the one view that adds nothing."""
    c = scene.candidates
    ang = np.arccos(np.clip(np.abs(c @ c[taken].T), 0, 1)).min(1)
    ang[taken] = -1
    return int(np.argmax(ang))


def oracle(scene: Scene, taken: list[int]) -> int:
    """Greedy on the true IoU: every candidate's hull with the views taken (the upper bound)."""
    h = scene.hull(taken)
    gains = G.iou(h[None] & scene.keep, scene.occ).numpy()
    gains[taken] = -1
    return int(np.argmax(gains))


def _project(points: torch.Tensor, views: np.ndarray, size: int) -> torch.Tensor:
    """Flat pixel index ``[P, V]`` of each point in each view's image."""
    R = torch.as_tensor(G.camera_frame(views), dtype=torch.float32)
    col = ((points @ R[:, :, 0].T + 1) / 2 * size).floor().long().clamp(0, size - 1)
    row = ((1 - points @ R[:, :, 1].T) / 2 * size).floor().long().clamp(0, size - 1)
    return row * size + col


def reconstruction(scene: Scene, taken: list[int]) -> int:
    """Reconstruction-based uncertainty: every hull voxel is unknown (silhouettes alone never confirm one), so the
    information a view can bring is the rays through the unknown volume (the volumetric information gain of
    Isler et al., 2016, without occlusion: silhouettes see through). Render the current hull from every candidate
    and take the one whose silhouette covers the most pixels."""
    n, size = scene.n, scene.size
    hull = scene.hull(taken)
    sil = torch.zeros(len(scene.candidates), size * size)
    sil.scatter_(1, _project(G.grid(n)[hull], scene.candidates, size).T, 1.0)
    area = F.max_pool2d(sil.view(-1, 1, size, size), 3, stride=1, padding=1).flatten(1).sum(1).numpy()  # voxels
    area[taken] = -1  # are ~2 pixels wide, so each covers its pixel's neighbours
    return int(np.argmax(area))


def from_maps(predict: Callable[[list[int]], list[np.ndarray]], radius_deg: float, threshold: float) -> Strategy:
    """UPNet's selection: ``predict(taken)`` gives each taken view's view-relative map (``[K]`` at the HEALPix
    directions of its camera frame); each is rotated into the object frame, interpolated to the candidates
    (``geometry.interpolate_map``) and the product of all of them picks (``geometry.select``)."""
    from agentkit.extras.data import healpix_directions

    def pick(scene: Scene, taken: list[int]) -> int:
        dirs = healpix_directions(2)
        maps = [
            G.interpolate_map(m, G.to_object_frame(scene.candidates[t], dirs), scene.candidates, radius_deg)
            for t, m in zip(taken, predict(taken))
        ]
        return G.select(maps, taken, threshold)

    return pick
