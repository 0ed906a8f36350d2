"""Fore-Mamba3D's pieces by hand: the Hilbert order of a 4 × 4 grid, mambapy's parallel scan against a plain
sequential recurrence, windows that do not leak into each other (one window is plain bidirectional Mamba), the
submanifold 3D convolution against a dense one, AP on a hand case, and the LiDAR scenes' first hits."""

import numpy as np
import pytest
import torch

pytest.importorskip("mambapy")

from agentkit.extras.scene.foremamba3d.model import (  # noqa: E402
    SASF,
    BiMamba,
    VoxelEncoder,
    focal_loss,
    hilbert_index,
    serial_orders,
    windows,
)
from agentkit.extras.scene.foremamba3d.recipe import average_precision  # noqa: E402
from agentkit.extras.scene.foremamba3d.scenes import _hit_boxes, _hit_cylinders, scene  # noqa: E402


def test_hilbert_order_of_a_4x4_grid():
    """The cells (x, y) of a 4 × 4 grid in Hilbert order (Wikipedia's xy2d), worked out by hand: quadrant by
    quadrant (x < 2, y < 2), (x < 2, y ≥ 2), (x ≥ 2, y ≥ 2), (x ≥ 2, y < 2), the first traversed transposed and
    the last flipped and transposed, so that the curve starts at (0, 0), ends at (3, 0) and every step moves to
    an adjacent cell."""
    expected = [(0, 0), (1, 0), (1, 1), (0, 1), (0, 2), (0, 3), (1, 3), (1, 2),
                (2, 2), (2, 3), (3, 3), (3, 2), (3, 1), (2, 1), (2, 0), (3, 0)]  # fmt: skip
    xs, ys = torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij")
    d = hilbert_index(xs.flatten(), ys.flatten(), 4)
    order = [(int(xs.flatten()[i]), int(ys.flatten()[i])) for i in torch.argsort(d)]
    assert order == expected
    assert sorted(d.tolist()) == list(range(16))
    big = hilbert_index(*torch.meshgrid(torch.arange(16), torch.arange(16), indexing="ij"), 16).flatten()
    cells = torch.stack(torch.meshgrid(torch.arange(16), torch.arange(16), indexing="ij"), -1).view(-1, 2)[
        torch.argsort(big)
    ]
    assert (cells[1:] - cells[:-1]).abs().sum(1).eq(1).all()  # a curve: every step moves to an adjacent cell


def test_serial_orders_are_two_rotated_hilbert_scans():
    coords = torch.tensor([[0, y, x] for y in range(4) for x in range(4)])
    a, b = serial_orders(coords, 4)
    assert sorted(a.tolist()) == sorted(b.tolist()) == list(range(16)) and a.tolist() != b.tolist()
    first = coords[a][:4, 1:].tolist()  # (y, x) of the first four: the 2 × 2 corner at the origin
    assert sorted(map(tuple, first)) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_mambapy_parallel_scan_equals_a_sequential_recurrence():
    """h_t = exp(Δ_t A) h_{t−1} + Δ_t B_t x_t, y_t = C_t h_t + D x_t, written as a loop, against mambapy's
    parallel scan (a length that is not a power of two: mambapy pads it)."""
    from mambapy.mamba import MambaBlock, MambaConfig

    torch.manual_seed(0)
    block = MambaBlock(MambaConfig(d_model=8, n_layers=1, d_state=4))
    b, length, e, n = 2, 13, block.config.d_inner, 4
    x, delta = torch.randn(b, length, e), torch.rand(b, length, e) * 0.5
    big_b, big_c = torch.randn(b, length, n), torch.randn(b, length, n)
    a = -torch.exp(block.A_log.float())
    y = block.selective_scan(x, delta, a, big_b, big_c, block.D.float())
    h = torch.zeros(b, e, n)
    ref = []
    for t in range(length):
        h = torch.exp(delta[:, t, :, None] * a) * h + delta[:, t, :, None] * big_b[:, t, None, :] * x[:, t, :, None]
        ref.append((h * big_c[:, t, None, :]).sum(-1) + block.D * x[:, t])
    torch.testing.assert_close(y, torch.stack(ref, 1), atol=1e-5, rtol=1e-4)


def test_one_window_is_plain_bidirectional_mamba_and_windows_do_not_leak():
    torch.manual_seed(0)
    layer = BiMamba(dim=8, d_state=4)
    x = torch.randn(11, 8)
    h = layer.norm(x)
    plain = x + layer.fwd(h[None])[0] + layer.bwd(h.flip(0)[None])[0].flip(0)
    torch.testing.assert_close(layer(x, windows(11, 0, 0)), plain, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(layer(x, windows(11, 64, 0)), plain, atol=1e-5, rtol=1e-4)
    # three windows (the last shorter, padded): each equals the layer run on its slice alone
    out = layer(x, windows(11, 4, 0))
    for a, b in windows(11, 4, 0):
        torch.testing.assert_close(out[a:b], layer(x[a:b], [(0, b - a)]), atol=1e-5, rtol=1e-4)
    assert windows(10, 4, 2) == [(0, 2), (2, 6), (6, 10)]


def test_submanifold_conv_equals_a_dense_depthwise_conv_at_the_kept_voxels():
    torch.manual_seed(0)
    grid = (4, 8, 8)
    enc = VoxelEncoder(grid, dim=4, layers=1, sasf=True)
    occupied = torch.rand(grid) < 0.4
    coords = occupied.nonzero()
    neigh = enc.neighbours(coords)
    fuse = SASF(4)
    feats = torch.randn(len(coords), 4)
    sparse = (torch.cat([feats, torch.zeros(1, 4)])[neigh] * fuse.conv3d).sum(1)
    dense = torch.zeros(4, *grid)
    dense[:, coords[:, 0], coords[:, 1], coords[:, 2]] = feats.t()
    weight = fuse.conv3d.t().reshape(4, 1, 3, 3, 3)  # neighbour k = (dz, dy, dx) offsets in meshgrid order
    out = torch.nn.functional.conv3d(dense[None], weight, padding=1, groups=4)[0]
    torch.testing.assert_close(sparse, out[:, coords[:, 0], coords[:, 1], coords[:, 2]].t(), atol=1e-5, rtol=1e-4)


def test_average_precision_by_hand():
    """Two scenes, one true centre each; detections by score: hit (scene 0), miss, hit (scene 1) → precision
    1, 1/2, 2/3 at recall 1/2, 1/2, 1 → AP = 1/2 · 1 + 1/2 · 2/3."""
    dets = [[(0.9, 0.0, 0.0), (0.8, 9.0, 9.0)], [(0.7, 3.2, 0.0)]]
    gts = [np.array([[0.2, 0.0]]), np.array([[3.0, 0.0]])]
    assert average_precision(dets, gts, 0.5) == pytest.approx(0.5 + 0.5 * 2 / 3)
    assert average_precision(dets, gts, 0.1) == 0.0  # both hits are farther than 10 cm
    assert average_precision(dets, [np.zeros((0, 2)), np.zeros((0, 2))], 1.0) == 0.0


def test_focal_loss_reduces_to_weighted_cross_entropy_without_focusing():
    logits, target = torch.tensor([2.0, -1.0, 0.5]), torch.tensor([1.0, 0.0, 1.0])
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none")
    expected = (0.5 * bce).sum() / 2  # alpha 0.5 on both classes, divided by the 2 positives
    torch.testing.assert_close(focal_loss(logits, target, alpha=0.5, gamma=0.0), expected)


def test_rays_stop_at_the_first_surface():
    """A ray along +x meets a box at x ∈ [4, 6] at 4 m and a cylinder of radius 1 at x = 10 at 9 m; the scene
    keeps the nearer. A ray that misses both returns inf."""
    d = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    box = np.array([[5.0, 0.0, 0.0, 2.0, 2.0, 2.0, 0.0]])
    cyl = np.array([[10.0, 0.0, 1.0, -1.0, 1.0]])
    np.testing.assert_allclose(_hit_boxes(d, box)[:, 0], [4.0, np.inf])
    np.testing.assert_allclose(_hit_cylinders(d, cyl)[:, 0], [9.0, np.inf])


def test_scene_density_falls_with_range_and_most_voxels_are_background():
    s = scene(seed=3)
    assert 1000 < len(s["coords"]) <= 4096 and (s["labels"] == 0).mean() > 0.8
    assert len(s["centres"]) == len(s["classes"]) > 0 and set(s["classes"].tolist()) <= {1, 2}
    extent = 128 * 0.4 / 2
    xy = (s["coords"][:, [2, 1]] + 0.5) * 0.4 - extent
    r = np.hypot(xy[:, 0], xy[:, 1])
    pts = s["features"][:, 0] * 10  # returns per voxel
    assert pts[r < 8].mean() > 2 * pts[(r > 16) & (r < 24)].mean()
