r"""Seeded LiDAR-like driving scenes, without a download (nuScenes and KITTI need one): a spinning sensor 1.8 m
above flat ground casts ``beams × azimuths`` rays into a scene of cars (yawed boxes), pedestrians (vertical
cylinders) and clutter (walls, poles, bushes and trees); each ray returns its first hit, so the density falls with
range and near objects hide far ones, as in a real sweep. The returns are voxelised on a BEV grid of ``grid × grid``
cells of ``voxel`` metres and ``height`` levels.

Classes: 0 background (ground and clutter), 1 car, 2 pedestrian. A voxel's label is its points' majority object;
an object is a detection target when at least one of its points lands in the grid (nuScenes drops boxes with no
LiDAR point the same way).

>>> s = scene(seed=0, grid=64, voxel=0.8)
>>> s["coords"].shape[1], s["features"].shape[1], set(s["labels"].tolist()) <= {0, 1, 2}
(3, 5, True)
>>> bool(len(s["coords"]) == len(s["labels"]) and s["centres"].shape[1] == 2)
True
"""

from __future__ import annotations

import numpy as np

SENSOR_HEIGHT = 1.8  # m above the ground; the sensor is at z = 0
Z_RANGE = (-2.0, 2.0)  # voxelised heights (m)
CLASSES = ("car", "pedestrian")


def _hit_ground(o: np.ndarray, d: np.ndarray) -> np.ndarray:
    t = np.full(len(d), np.inf)
    down = d[:, 2] < -1e-6
    t[down] = -SENSOR_HEIGHT / d[down, 2]
    return t


def _hit_boxes(d: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """First-hit distances ``[R, K]`` of rays from the origin along ``d [R, 3]`` on yawed boxes ``[K, 7]`` (centre
    x, y, z, length, width, height, yaw) by the slab test in each box's frame."""
    if not len(boxes):
        return np.full((len(d), 0), np.inf)
    c, s = np.cos(-boxes[:, 6]), np.sin(-boxes[:, 6])
    ox, oy, oz = -boxes[:, 0], -boxes[:, 1], -boxes[:, 2]  # the origin in each box's frame (before rotation)
    o = np.stack([c * ox - s * oy, s * ox + c * oy, oz], -1)  # [K, 3]
    dx = d[:, None, 0] * c - d[:, None, 1] * s
    dy = d[:, None, 0] * s + d[:, None, 1] * c
    dl = np.stack([dx, dy, np.broadcast_to(d[:, None, 2], dx.shape)], -1)  # [R, K, 3]
    half = boxes[None, :, 3:6] / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = (-half - o[None]) / dl
        t2 = (half - o[None]) / dl
    near = np.nanmax(np.minimum(t1, t2), -1)
    far = np.nanmin(np.maximum(t1, t2), -1)
    return np.where((far >= near) & (far > 0) & (near > 0), near, np.inf)


def _hit_cylinders(d: np.ndarray, cyl: np.ndarray) -> np.ndarray:
    """First-hit distances ``[R, K]`` on vertical cylinders ``[K, 5]`` (centre x, y, radius, z bottom, z top),
    side walls only (the sensor sits below every top it could see)."""
    if not len(cyl):
        return np.full((len(d), 0), np.inf)
    a = d[:, None, 0] ** 2 + d[:, None, 1] ** 2
    b = -2 * (d[:, None, 0] * cyl[None, :, 0] + d[:, None, 1] * cyl[None, :, 1])
    cc = cyl[None, :, 0] ** 2 + cyl[None, :, 1] ** 2 - cyl[None, :, 2] ** 2
    disc = b**2 - 4 * a * cc
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (-b - np.sqrt(disc)) / (2 * a)
    z = t * d[:, None, 2]
    ok = (disc >= 0) & (t > 0) & (z >= cyl[None, :, 3]) & (z <= cyl[None, :, 4])
    return np.where(ok, t, np.inf)


def _hit_spheres(d: np.ndarray, sph: np.ndarray) -> np.ndarray:
    """First-hit distances ``[R, K]`` on spheres ``[K, 4]`` (centre x, y, z, radius)."""
    if not len(sph):
        return np.full((len(d), 0), np.inf)
    b = d @ sph[:, :3].T  # d · c
    cc = (sph[:, :3] ** 2).sum(-1) - sph[:, 3] ** 2
    disc = b**2 - cc[None]
    with np.errstate(invalid="ignore"):
        t = b - np.sqrt(disc)
    return np.where((disc >= 0) & (t > 0), t, np.inf)


def _layout(rng: np.random.Generator, extent: float, counts: dict[str, tuple[int, int]]) -> dict[str, np.ndarray]:
    """Non-overlapping objects (by bounding circles in BEV) between 3 m and ``extent`` from the sensor."""
    ground = -SENSOR_HEIGHT
    placed: list[tuple[float, float, float]] = []
    out: dict[str, list] = {k: [] for k in ("car", "pedestrian", "wall", "pole", "bush", "tree")}

    def spot(radius: float) -> tuple[float, float] | None:
        for _ in range(50):
            x, y = rng.uniform(-extent + radius, extent - radius, 2)
            if np.hypot(x, y) < 3 + radius:
                continue
            if all(np.hypot(x - px, y - py) > radius + pr + 0.3 for px, py, pr in placed):
                placed.append((x, y, radius))
                return x, y
        return None

    order = ["wall", "car", "pedestrian", "tree", "bush", "pole"]
    for kind in order:
        for _ in range(rng.integers(counts[kind][0], counts[kind][1] + 1)):
            if kind == "car":
                ln, w, h = rng.uniform(3.9, 4.9), rng.uniform(1.7, 2.0), rng.uniform(1.4, 1.8)
                p = spot(np.hypot(ln, w) / 2)
                if p:
                    out[kind].append([p[0], p[1], ground + h / 2, ln, w, h, rng.uniform(-np.pi, np.pi)])
            elif kind == "wall":
                ln, h = rng.uniform(6, 14), rng.uniform(2.0, 3.5)
                p = spot(ln / 2)
                if p:
                    out[kind].append([p[0], p[1], ground + h / 2, ln, 0.3, h, rng.uniform(-np.pi, np.pi)])
            elif kind == "pedestrian":
                r, h = rng.uniform(0.25, 0.35), rng.uniform(1.6, 1.9)
                p = spot(r)
                if p:
                    out[kind].append([p[0], p[1], r, ground, ground + h])
            elif kind == "pole":
                r = rng.uniform(0.08, 0.15)
                p = spot(r)
                if p:
                    out[kind].append([p[0], p[1], r, ground, ground + rng.uniform(3, 6)])
            elif kind == "bush":
                r = rng.uniform(0.5, 1.3)
                p = spot(r)
                if p:
                    out[kind].append([p[0], p[1], ground + 0.7 * r, r])
            else:  # a tree: a trunk and a crown
                r = rng.uniform(1.0, 2.0)
                p = spot(r)
                if p:
                    out["pole"].append([p[0], p[1], rng.uniform(0.12, 0.2), ground, ground + 2.5])
                    out[kind].append([p[0], p[1], ground + 2.5 + 0.6 * r, r])
    return {k: np.asarray(v, dtype=np.float64).reshape(len(v), -1) for k, v in out.items()}


def scene(
    seed: int,
    grid: int = 128,
    voxel: float = 0.4,
    height: int = 8,
    beams: int = 16,
    azimuths: int = 512,
    fov: tuple[float, float] = (-25.0, 2.0),
    cars: tuple[int, int] = (4, 8),
    pedestrians: tuple[int, int] = (4, 8),
    clutter: float = 1.0,
) -> dict[str, np.ndarray]:
    """One sweep of a seeded scene, voxelised.

    Args:
        seed: seeds the layout, the sensor's azimuth phase and the range noise.
        grid: BEV cells a side.
        voxel: metres a BEV cell.
        height: height levels over ``Z_RANGE``.
        beams: the sensor's beams (elevations spread over ``fov`` degrees).
        azimuths: rays per beam.
        fov: the lowest and highest elevation (degrees).
        cars: the least and most cars.
        pedestrians: the least and most pedestrians.
        clutter: scales the counts of walls, poles, bushes and trees.

    Returns:
        ``coords [V, 3]`` (z, y, x voxel indices, int64), ``features [V, 5]`` (points in the voxel / 10, the
        points' mean offset from the voxel centre in voxel units (x, y, z), mean intensity), ``labels [V]``,
        ``centres [G, 2]`` (x, y in metres) and ``classes [G]`` (1 car, 2 pedestrian) of the targets, and
        ``points`` (the number of returns in the grid).
    """
    rng = np.random.default_rng(seed)
    extent = grid * voxel / 2
    k = clutter
    objs = _layout(
        rng,
        extent,
        {
            "car": cars,
            "pedestrian": pedestrians,
            "wall": (round(2 * k), round(4 * k)),
            "pole": (round(6 * k), round(12 * k)),
            "bush": (round(6 * k), round(12 * k)),
            "tree": (round(3 * k), round(6 * k)),
        },
    )
    el = np.deg2rad(np.linspace(fov[0], fov[1], beams))
    az = np.linspace(-np.pi, np.pi, azimuths, endpoint=False) + rng.uniform(0, 2 * np.pi / azimuths)
    e, a = np.meshgrid(el, az, indexing="ij")
    d = np.stack([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)], -1).reshape(-1, 3)
    # hit distances of every ray on every surface; column blocks: ground, cars, walls, pedestrians, poles, spheres
    spheres = np.concatenate([objs["bush"], objs["tree"]]) if len(objs["tree"]) else objs["bush"]
    blocks = [
        (_hit_ground(np.zeros(3), d)[:, None], 0),
        (_hit_boxes(d, objs["car"]), 1),
        (_hit_boxes(d, objs["wall"]), 0),
        (_hit_cylinders(d, objs["pedestrian"]), 2),
        (_hit_cylinders(d, objs["pole"]), 0),
        (_hit_spheres(d, spheres.reshape(-1, 4)), 0),
    ]
    t = np.concatenate([b for b, _ in blocks], 1)
    cls = np.concatenate([np.full(b.shape[1], c) for b, c in blocks])
    # object ids: ground -1, then cars 0.., pedestrians after the cars (targets), clutter -1
    n_car, n_ped = len(objs["car"]), len(objs["pedestrian"])
    oid = np.concatenate(
        [
            [-1],
            np.arange(n_car),
            np.full(len(objs["wall"]), -1),
            n_car + np.arange(n_ped),
            np.full(len(objs["pole"]), -1),
            np.full(len(spheres), -1),
        ]
    )
    first = t.argmin(1)
    dist = t[np.arange(len(d)), first]
    hit = np.isfinite(dist) & (dist < 60)
    dist = dist[hit] + rng.normal(0, 0.02, hit.sum())  # 2 cm range noise
    pts = d[hit] * dist[:, None]
    pcls, pid = cls[first[hit]], oid[first[hit]]
    inten = np.where(pcls == 1, 0.7, np.where(pcls == 2, 0.4, 0.25)) + rng.normal(0, 0.1, len(pts))
    ijk = np.stack(
        [
            np.floor((pts[:, 2] - Z_RANGE[0]) / ((Z_RANGE[1] - Z_RANGE[0]) / height)),
            np.floor((pts[:, 1] + extent) / voxel),
            np.floor((pts[:, 0] + extent) / voxel),
        ],
        -1,
    ).astype(np.int64)
    inside = (ijk[:, 0] >= 0) & (ijk[:, 0] < height) & (ijk[:, 1] >= 0) & (ijk[:, 1] < grid)
    inside &= (ijk[:, 2] >= 0) & (ijk[:, 2] < grid)
    pts, pcls, pid, inten, ijk = pts[inside], pcls[inside], pid[inside], inten[inside], ijk[inside]
    coords, inv, count = np.unique(ijk, axis=0, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    size = np.array([voxel, voxel, (Z_RANGE[1] - Z_RANGE[0]) / height])
    centre = np.stack(
        [
            -extent + (coords[:, 2] + 0.5) * voxel,
            -extent + (coords[:, 1] + 0.5) * voxel,
            Z_RANGE[0] + (coords[:, 0] + 0.5) * size[2],
        ],
        -1,
    )
    off = np.zeros((len(coords), 3))
    np.add.at(off, inv, pts)
    off = (off / count[:, None] - centre) / size
    it = np.zeros(len(coords))
    np.add.at(it, inv, inten)
    votes = np.zeros((len(coords), 3))
    np.add.at(votes, (inv, pcls), 1)
    feats = np.concatenate([count[:, None] / 10, off, (it / count)[:, None]], 1).astype(np.float32)
    seen = np.zeros(n_car + n_ped, dtype=bool)
    seen[np.unique(pid[pid >= 0])] = True
    centres = np.concatenate([objs["car"][:, :2], objs["pedestrian"][:, :2]]).reshape(-1, 2)
    classes = np.concatenate([np.ones(n_car), np.full(n_ped, 2)]).astype(np.int64)
    return {
        "coords": coords.astype(np.int64),
        "features": feats,
        "labels": votes.argmax(1).astype(np.int64),
        "centres": centres[seen].astype(np.float32),
        "classes": classes[seen],
        "points": np.int64(len(pts)),
    }
