"""UPNet's geometry and selection where the answer is known: the camera frames, a rendered sphere, the visual hull
of a sphere from the six axis views, the map interpolation, and the aggregation's pick by hand."""

import math

import numpy as np
import pytest
import torch

from agentkit.extras import data
from agentkit.extras.scene.upnet import geometry as G
from agentkit.extras.scene.upnet.model import Scene, episode, farthest, from_maps, oracle, reconstruction, target_map

AXES = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], float)


def ball(r: float):
    return data.SDFObject("ball", [("sphere", ((0, 0, 0), r), 1)], 0.0)


def test_camera_frames_are_rotations_that_look_along_the_view():
    v = data.sphere(50, seed=3).astype(float)
    R = G.camera_frame(np.concatenate([v, AXES]))
    assert np.allclose(R.transpose(0, 2, 1) @ R, np.eye(3), atol=1e-9)
    assert np.allclose(np.linalg.det(R), 1)
    assert np.allclose(R[:, :, 2], np.concatenate([v, AXES]), atol=1e-6)


def test_a_rendered_sphere_covers_pi_r_squared_and_faces_the_camera():
    """Radius 0.5 in a 64² image of [−1, 1]²: π · 0.25 / (2/64)² ≈ 804 pixels; the centre pixel's normal points
    at the camera (full Lambert shade 1.0)."""
    image, sil = G.render(ball(0.5), AXES[:2], 64)
    area = math.pi * 0.25 / (2 / 64) ** 2
    assert sil.sum((1, 2)).float().numpy() == pytest.approx([area, area], rel=0.02)
    assert image[0, 31:33, 31:33].min().item() == pytest.approx(1.0, abs=0.01)
    assert (image[~sil] == 0).all()


def test_the_visual_hull_of_a_sphere_from_six_axis_views_contains_it():
    """Three orthographic axis silhouettes intersect in the Steinmetz tricylinder, of volume 8(2 − √2) r³ against
    the sphere's 4/3 π r³: IoU = (4π/3) / (8(2 − √2)) ≈ 0.894, which the undilated hull gives on the grid. The
    one-pixel dilation (the default) grows the radius by up to 1.5 pixels (0.047), lowering it to no less than
    0.894 · (0.6 / 0.647)³, and makes the hull contain every object voxel. Opposite views add nothing
    but pixel-grid effects (orthographic silhouettes are mirror images)."""
    sdf = ball(0.6)
    _, sil = G.render(sdf, AXES, 64)
    occ = G.occupancy(sdf, 32)
    tricylinder = (4 * math.pi / 3) / (8 * (2 - math.sqrt(2)))
    exact = G.carve(sil, AXES, 32, dilate=0).all(0)
    assert G.iou(exact, occ).item() == pytest.approx(tricylinder, abs=0.02)
    keep = G.carve(sil, AXES, 32)
    hull = keep.all(0)
    assert (hull | ~occ).all(), "the hull must contain every object voxel"
    assert tricylinder * (0.6 / (0.6 + 1.5 * 2 / 64)) ** 3 <= G.iou(hull, occ).item() < tricylinder
    assert G.iou(keep[0], keep[1]).item() > 0.95  # voxel centres project onto pixel edges: mirroring moves them
    assert G.iou(keep[[0, 2, 4]].all(0), hull).item() > 0.95
    one = G.iou(G.carve(sil[:1], AXES[:1], 32, dilate=0)[0], occ).item()  # a cylinder of length 2 around it
    assert one == pytest.approx((4 / 3 * 0.6**3) / (0.6**2 * 2), abs=0.02)


def test_target_gains_are_non_negative_and_largest_across_the_view():
    """An elongated box seen end-on: the side views, about 90° away, add the most; the directions nearest the view
    and its antipode (23.6°: the HEALPix ring closest to the pole) add less than half as much on average."""
    box = data.SDFObject("box", [("box", ((0, 0, 0), (0.15, 0.15, 0.7), 0.0), 1)], 0.0)
    dirs = data.healpix_directions(2)
    image, gains = target_map(box, np.array([0.0, 0, 1]), dirs, 32, 16)
    assert image.shape == (32, 32) and (gains >= 0).all()
    angle = np.degrees(np.arccos(np.clip(dirs[:, 2], -1, 1)))  # camera-frame angle from the view
    side, along = gains[np.abs(angle - 90) < 20], gains[(angle < 25) | (angle > 155)]
    assert side.mean() > 2 * along.mean() and abs(angle[int(gains.argmax())] - 90) < 20


def test_interpolation_weights_are_the_official_exp_minus_angle():
    """Two map directions 10° and 20° from the candidate: weights e^{−0.1745} and e^{−0.3491}; a third at 40° is
    outside the 30° radius."""
    c = np.array([[1.0, 0, 0]])
    at = np.array([[np.cos(np.radians(a)), np.sin(np.radians(a)), 0] for a in (10, 20, 40)])
    w = np.exp(-np.radians([10, 20]))
    hand = (w @ [1.0, 4.0]) / w.sum()
    assert G.interpolate_map(np.array([1.0, 4.0, 100.0]), at, c)[0] == pytest.approx(hand)


def test_the_aggregation_picks_the_hand_computed_view():
    """Two maps over five candidates, view 0 taken. Min-max normalised:
    U₁ = (0, 1, 0.5, 0.9, 0.05 → dropped), U₂ = (0, 0.08 → candidate 1 dropped, 1, 0.5, 1).
    Products over the survivors (2, 3): 0.5, 0.45 → candidate 2, though candidate 1 leads U₁ and 4 leads U₂."""
    u1 = np.array([0.0, 1.0, 0.5, 0.9, 0.05]) * 2 + 1  # an affine map: normalisation undoes it
    u2 = np.array([0.0, 0.08, 1.0, 0.5, 1.0])
    assert G.select([u1, u2], taken=[0]) == 2
    assert G.select([u1], taken=[0]) == 1
    assert G.select([u1, u2], taken=[0, 2]) == 3


def test_map_rotation_reads_a_camera_frame_map_in_the_object_frame():
    """A map that is 1 only at the camera-frame direction nearest +x (the camera's right), read from a camera at
    +z: the candidate to the world's camera right (the camera frame's first column) must score highest."""
    dirs = data.healpix_directions(2)
    k = int(np.argmax(dirs[:, 0]))
    m = np.zeros(48)
    m[k] = 1.0
    cands = data.healpix_directions(2)
    view = np.array([0.3, 0.2, 0.93]) / np.linalg.norm([0.3, 0.2, 0.93])
    read = G.interpolate_map(m, G.to_object_frame(view, dirs), cands)
    right = G.camera_frame(view)[:, 0]
    assert np.nanargmax(read) == int(np.argmax(cands @ right))


def test_strategies_on_a_box_never_repeat_and_oracle_is_the_upper_bound_at_two_views():
    box = data.SDFObject("box", [("box", ((0, 0, 0), (0.2, 0.4, 0.6), 0.05), 1)], 0.3)
    scene = Scene(box, data.healpix_directions(2), 32, 16)
    best = {}
    for name, pick in {
        "oracle": oracle,
        "farthest": farthest,
        "reconstruction": reconstruction,
        "maps": from_maps(lambda taken: [np.ones(48)] * len(taken), 30.0, 0.1),
    }.items():
        ious, ms, taken = episode(scene, pick, 5, 6)
        assert len(set(taken)) == 6 and len(ms) == 5
        assert all(b >= a - 1e-9 for a, b in zip(ious, ious[1:])), "the hull only shrinks toward the object"
        best[name] = ious[1]
    assert best["oracle"] == max(best.values())


def test_sdf_objects_lie_in_the_unit_ball_and_are_seeded():
    g = G.grid(24)
    for cat in data.SDF_CATEGORIES:
        obj = data.sdf_object(cat, seed=11)
        inside = obj(g) < 0
        assert inside.any() and g[inside].norm(dim=1).max() < 1.0, cat
        assert torch.equal(obj(g), data.sdf_object(cat, seed=11)(g))
    with pytest.raises(ValueError, match="unknown SDF category 'sofa'"):
        data.sdf_object("sofa")


CUBE_OBJ = """v -1 -1 -1
v 1 -1 -1
v 1 1 -1
v -1 1 -1
v -1 -1 1
v 1 -1 1
v 1 1 1
v -1 1 1
f 1 4 3 2
f 5 6 7 8
f 1 2 6 5
f 2 3 7 6
f 3 4 8 7
f 4 1 5 8
"""


def test_a_mesh_renders_like_the_same_sdf_and_its_winding_number_marks_the_inside():
    """The cube OBJ is scaled to corner radius 0.9 (half edge 0.9/√3). Its winding number is ±1 at the centre and 0
    outside; its rasterised silhouettes match the sphere-traced SDF box's; its occupancy is the box's."""
    mesh = data.read_obj(CUBE_OBJ, "cube")
    half = 0.9 / math.sqrt(3)
    box = data.SDFObject("box", [("box", ((0, 0, 0), (half, half, half), 0.0), 1)], 0.0)
    w = G.winding(mesh, torch.tensor([[0.0, 0, 0], [0.2, -0.3, 0.1], [0.9, 0, 0], [0, 0.6, 0.6]]))
    assert w.abs().tolist() == pytest.approx([1, 1, 0, 0], abs=1e-5)
    views = np.concatenate([AXES[[0, 2, 4]], data.sphere(3, seed=1)])
    img_m, sil_m = G.render(mesh, views, 64)
    img_s, sil_s = G.render(box, views, 64)
    assert G.iou(sil_m.flatten(1), sil_s.flatten(1)).min().item() > 0.97
    per_side = 2 * math.floor(half / (2 / 64) + 0.5)  # pixel centres (k + ½ pixels from the middle) inside
    assert sil_m[0].sum().item() == per_side**2
    assert (img_m[0][sil_m[0]] - 1.0).abs().max().item() < 1e-5  # a face seen head-on: full shade
    assert G.iou(G.occupancy(mesh, 16), G.occupancy(box, 16)).item() > 0.99
