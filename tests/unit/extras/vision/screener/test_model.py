"""Screener's pieces where the answer is known: the Gaussian NLL, VICReg's invariance on identical views, the
dense pairs, the masking and the crops."""

import math

import pytest
import torch
from torch import nn

from agentkit.extras.nets import vicreg
from agentkit.extras.vision.screener.model import (
    GaussianHead,
    augment,
    dense_pairs,
    gaussian_nll,
    mask_blocks,
    sincos,
    two_crops,
    unflip,
)


def test_minus_log_q_is_the_gaussian_nll_by_hand():
    """y = (1, 2), μ = (0, 0), σ² = (1, 4): −log q = ½[(log 2π + 0 + 1) + (log 2π + log 4 + 1)]."""
    y, mu, lv = torch.tensor([1.0, 2.0]), torch.zeros(2), torch.tensor([0.0, math.log(4.0)])
    hand = 0.5 * ((math.log(2 * math.pi) + 1) + (math.log(2 * math.pi) + math.log(4) + 1))
    assert gaussian_nll(y, mu, lv).item() == pytest.approx(hand, rel=1e-6)
    ref = -torch.distributions.Normal(mu, lv.mul(0.5).exp()).log_prob(y).sum()
    assert gaussian_nll(y, mu, lv).item() == pytest.approx(ref.item(), rel=1e-6)


def test_head_gives_the_nll_of_its_own_mean_and_variance_per_voxel():
    """The conditional head on [B, *S, C] maps: its nll is the Gaussian NLL of (μ(c), σ²(c)), voxel by voxel, and
    the unconditional head (cond_dim 0) takes empty conditions of any shape."""
    torch.manual_seed(0)
    head = GaussianHead(3, 2, 8)
    y, c = torch.randn(2, 4, 4, 2), torch.randn(2, 4, 4, 3)
    mu, lv = head(c)
    assert head.nll(y, c).shape == (2, 4, 4)
    assert torch.allclose(head.nll(y, c), gaussian_nll(y, mu, lv))
    i = (1, 2, 3)  # one voxel alone gives the same value: nothing mixes across voxels (1×1 convolutions)
    assert torch.allclose(head.nll(y[i][None], c[i][None])[0], head.nll(y, c)[i])
    none = GaussianHead(0, 2, 8)
    with torch.no_grad():
        none.const.copy_(torch.tensor([0.0, 0.0, 0.0, math.log(4.0)]))
    out = none.nll(y, torch.zeros(2, 4, 4, 0))
    assert out.shape == (2, 4, 4)
    assert torch.allclose(out, gaussian_nll(y, torch.zeros(2), torch.tensor([0.0, math.log(4.0)])))


def test_invariance_is_zero_for_identical_views_and_positive_otherwise():
    torch.manual_seed(0)
    z = torch.randn(256, 8)
    terms = vicreg(z, z)
    assert terms["invariance"].item() == 0.0
    assert vicreg(z, z + 0.1)["invariance"].item() == pytest.approx(25 * 0.01, rel=1e-5)
    # the variance hinge is 0 once every feature's std reaches 1; collapsed features pay it in full
    assert vicreg(3 * z, 3 * z)["variance"].item() == 0.0
    flat = torch.zeros(256, 8)
    assert vicreg(flat, flat)["variance"].item() == pytest.approx(2 * 25 * (1 - 1e-2), rel=1e-3)


def test_dense_pairs_match_the_same_input_voxels_through_crops_and_flips():
    """A network that returns its input (so features are intensities) on two crops: after augment's flips are
    undone, each pair holds the same voxel seen twice, so noise-free views with one intensity map agree exactly
    and VICReg's invariance is 0; a translation-equivariant conv net gives equal pairs away from crop borders."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 1, 12, 12, 12)
    a, b, offs = two_crops(x, 8, g)
    assert a.shape == b.shape == (3, 1, 8, 8, 8)
    ia, ib = dense_pairs(a, b, offs, 8, 1000, g)
    assert len(ia) >= 3 * 4**3 and torch.equal(ia, ib)  # the crops share at least 4³ voxels
    assert vicreg(ia, ib)["invariance"].item() == 0.0
    fa = [[2, 4], [3], []]
    flipped = torch.stack([v.flip([d - 1 for d in f]) if f else v for v, f in zip(a, fa)])
    assert torch.equal(unflip(flipped, fa), a)
    view, flips = augment(a, 0.0, g)
    back = unflip(view, flips)
    ratio = back / a  # one affine map per sample: back = s·a + t
    for i in range(3):
        fit = torch.linalg.lstsq(torch.stack([a[i].flatten(), torch.ones(a[i].numel())], 1), back[i].flatten()[:, None])
        s, t = fit.solution[:, 0].tolist()
        assert 0.9 <= s <= 1.1 and -0.05 <= t <= 0.05
        assert torch.allclose(back[i], s * a[i] + t, atol=1e-5)
    del ratio


def test_mask_blocks_hides_the_asked_share_in_blocks():
    g = torch.Generator().manual_seed(0)
    m = mask_blocks(torch.ones(64, 1, 16, 16), 0.3, 4, g)
    assert 1 - m.mean().item() == pytest.approx(0.3, abs=0.03)
    blocks = m[:, 0].reshape(64, 4, 4, 4, 4)  # every 4×4 block is all kept or all hidden
    assert torch.equal(blocks.amax((2, 4)), blocks.amin((2, 4)))


def test_sincos_features():
    p = sincos((4, 2), 2)
    assert p.shape == (8, 4, 2)
    u = (torch.arange(4) + 0.5) / 4
    assert torch.allclose(p[0, :, 0], torch.sin(math.pi * u)) and torch.allclose(p[3, :, 1], torch.cos(2 * math.pi * u))
    assert torch.allclose(p[4, 0], torch.sin(math.pi * torch.tensor([0.25, 0.75])))


def test_conv_features_pair_up_inside_the_overlap():
    """A translation-equivariant network (one 3×3×3 conv, zero padding) sees the same neighbourhood at a shared
    voxel away from both crops' borders, so those pairs agree exactly."""
    torch.manual_seed(0)
    net = nn.Conv3d(1, 4, 3, padding=1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 1, 16, 16, 16)
    a, b, offs = two_crops(x, 12, g)
    with torch.no_grad():
        za, zb = net(a), net(b)
    za, zb = za[..., 1:-1, 1:-1, 1:-1], zb[..., 1:-1, 1:-1, 1:-1]  # drop the borders (zero padding)
    pa, pb = dense_pairs(za, zb, offs + 1, 10, 500, g)
    assert torch.allclose(pa, pb, atol=1e-6)
