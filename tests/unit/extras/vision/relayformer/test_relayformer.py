"""RelayFormer's mechanics by hand: tiling, 4D RoPE, what crosses tiles, the edge loss, and the forged data."""

import math

import numpy as np
import pytest
import torch

from agentkit.errors import AgentkitError
from agentkit.extras import data
from agentkit.extras.vision.relayformer.model import (
    LoRALinear,
    RelayFormer,
    apply_4d_rope,
    edge_band,
    from_tiles,
    relay_loss,
    tile_count,
    to_tiles,
)


def test_tiling_and_reassembly_are_exact_with_overlaps_averaged():
    x = torch.randn(2, 3, 96, 160)  # 64-px tiles at stride 32: 2 × 4 tiles, no padding needed
    assert (tile_count(96, 64, 32), tile_count(160, 64, 32), tile_count(64, 64, 32), tile_count(65, 64, 32)) == (
        2,
        4,
        1,
        2,
    )
    tiles = to_tiles(x, 64, 32)
    assert tiles.shape == (2, 8, 3, 64, 64)
    assert torch.equal(tiles[1, 5], x[1, :, 32:96, 32:96])  # row 1, column 1
    assert torch.allclose(from_tiles(tiles, 2, 4, 32), x)
    # tiles holding constants 0..7: a pixel covered by tiles (0, 0), (0, 1), (1, 0), (1, 1) gets their mean
    const = torch.arange(8.0).view(1, 8, 1, 1, 1).expand(1, 8, 1, 64, 64)
    merged = from_tiles(const, 2, 4, 32)[0, 0]
    assert merged[0, 0] == 0 and merged[40, 40] == (0 + 1 + 4 + 5) / 4 and merged[10, 40] == (0 + 1) / 2
    assert merged[95, 159] == 7


def test_4d_rope_is_a_rotation_that_depends_only_on_relative_offsets():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 2, 6, 40, generator=g), torch.randn(2, 2, 6, 40, generator=g)
    pos = torch.randint(0, 8, (2, 6, 4), generator=g)
    shift = torch.randint(-5, 5, (2, 1, 4), generator=g)  # a different offset per axis, the same for every token
    rq, rk = apply_4d_rope(q, pos), apply_4d_rope(k, pos)
    scores = rq @ rk.transpose(-1, -2)
    shifted = apply_4d_rope(q, pos + shift) @ apply_4d_rope(k, pos + shift).transpose(-1, -2)
    assert torch.allclose(scores, shifted, atol=1e-4)
    assert torch.allclose(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-5)  # a rotation
    assert torch.equal(rq[..., 32:], q[..., 32:])  # channels past 4·8 pass unchanged
    # each axis moves its own channels: a frame offset turns channels 0–7 only
    moved = apply_4d_rope(q, pos + torch.tensor([1, 0, 0, 0])) - rq
    assert moved[..., :8].abs().max() > 0.01 and moved[..., 8:].abs().max() < 1e-6
    # the pair (0, 1) at frame position p turns by p radians (ω₀ = 1)
    one = torch.zeros(1, 1, 1, 40)
    one[..., 0] = 1
    turned = apply_4d_rope(one, torch.tensor([[[2, 0, 0, 0]]]))
    assert turned[0, 0, 0, :2].tolist() == pytest.approx([math.cos(2), math.sin(2)], abs=1e-6)
    with pytest.raises(ValueError, match="4·axis_dim"):
        apply_4d_rope(torch.randn(1, 1, 2, 16), pos[:1, :2])


@torch.no_grad()
def test_without_relay_tokens_tiles_are_independent_and_with_them_they_are_not():
    """Changing one tile's pixels: with 0 relay tokens and no overlap, no other tile's features move; with
    overlaps, only tiles within reach of the shared tokens (one tile per block); with relay tokens, every tile."""
    torch.manual_seed(0)
    x = torch.randn(1, 3, 64, 448)  # 7 tiles in a row without overlap
    y = x.clone()
    y[..., :, :64] += 1.0  # tile 0 only

    def moved(relay, overlap):
        torch.manual_seed(1)
        net = RelayFormer(relay=relay, dim=64, depth=2, heads=2, overlap=overlap).eval()
        fa, fb = net.features([x])[0], net.features([y])[0]
        return (fa - fb).abs().amax(dim=(0, 1, 2))  # per feature column

    alone = moved(0, 0)  # 4 feature columns per tile
    assert alone[:4].min() > 1e-3 and alone[4:].max() == 0
    relayed = moved(3, 0)
    assert relayed[-4:].min() > 1e-5  # the last tile moves too
    overlapped = moved(0, 16)  # stride 32 px = 2 feature columns; depth 2: the change spreads a few columns only
    assert overlapped[:4].min() > 1e-3 and overlapped[-8:].max() == 0
    frames = torch.stack([x[0], x[0]])  # the same clip, frame 1 changed: its relays reach frame 0's tiles
    changed = frames.clone()
    changed[1, :, :, :64] += 1.0
    torch.manual_seed(1)
    net = RelayFormer(relay=3, dim=64, depth=2, heads=2, overlap=0).eval()
    assert (net.features([frames])[0][0] - net.features([changed])[0][0]).abs().max() > 1e-5
    assert torch.equal(net.features([frames[:1]])[0][0], net.features([changed[:1]])[0][0])


def test_relay_former_takes_any_size_and_pads_nothing_into_its_output():
    torch.manual_seed(0)
    net = RelayFormer(relay=2, dim=32, depth=2, heads=1, highpass=True)
    assert net.embed.in_channels == 6  # RGB and its high-pass residual
    out = net([torch.randn(1, 3, 50, 131), torch.randn(3, 3, 64, 64), torch.randn(1, 3, 200, 97)])
    assert [tuple(o.shape) for o in out] == [(1, 1, 50, 131), (3, 1, 64, 64), (1, 1, 200, 97)]
    relay_loss(out, [torch.zeros_like(o) for o in out]).backward()
    assert net.relay_tokens.grad.abs().sum() > 0
    assert net.blocks[1].qkv.B["global"].grad.abs().sum() > 0  # block 2 serves the global step after block 1
    assert net.blocks[0].qkv.B["global"].grad is None  # block 1's global LoRA never runs (as officially)


def test_lora_branches_start_at_the_base_map_and_then_differ():
    torch.manual_seed(0)
    lin, x = LoRALinear(6, 4, rank=2, alpha=4), torch.randn(3, 6)
    assert torch.equal(lin(x, "local"), lin.base(x)) and torch.equal(lin(x, "global"), lin.base(x))
    with torch.no_grad():
        lin.B["global"].fill_(1.0)
    expected = lin.base(x) + x @ lin.A["global"] @ torch.ones(2, 4) * 2.0
    assert torch.allclose(lin(x, "global"), expected) and torch.equal(lin(x, "local"), lin.base(x))


def test_edge_band_and_loss_by_hand():
    mask = torch.zeros(1, 1, 7, 7)
    mask[..., 2:5, 2:5] = 1  # a 3 × 3 square
    band = edge_band(mask, 3)
    # cross dilation: the square and 4 arms of 3 (21 px); erosion: its centre (1 px); the band is the difference
    assert band.sum() == 20 and band[0, 0, 3, 3] == 0 and band[0, 0, 1, 3] == 1 and band[0, 0, 1, 1] == 0
    logits = torch.zeros(1, 1, 7, 7)  # BCE = log 2 at every pixel
    loss = relay_loss([logits], [mask], edge_lambda=20.0, edge_width=3)
    assert loss.item() == pytest.approx(math.log(2) * (1 + 20 * 20 / 49))


def test_forgeries_are_seeded_split_by_source_and_differ_from_their_host():
    a, b = data.forgery(["chelsea", "coffee"], 80, 120, seed=3), data.forgery(["chelsea", "coffee"], 80, 120, seed=3)
    assert np.array_equal(a.frames, b.frames) and np.array_equal(a.mask, b.mask)
    # noise trace: the region's high-pass energy stands apart from the host's, either way
    f = data.forgery(["astronaut"], 160, 160, seed=1, kind="splice", trace="noise")
    hp = np.abs(np.diff(f.frames[0].mean(-1), axis=1))[:, :-1]
    region = np.median(hp[f.mask[0][:, 1:-1][:, : hp.shape[1]]])
    host = np.median(hp[~f.mask[0][:, 1:-1][:, : hp.shape[1]]])
    assert f.region["noise"] / f.host["noise"] > 2.9 or f.host["noise"] / f.region["noise"] > 2.9
    assert (region > host) == (f.region["noise"] > f.host["noise"])
    clip = data.forgery(["rocket"], 64, 96, seed=2, frames=8)
    assert clip.frames.shape == (8, 64, 96, 3) and all(m.any() for m in clip.mask)  # the region stays in view
    assert not np.array_equal(clip.frames[0], clip.frames[-1])  # the window pans
    with pytest.raises(AgentkitError, match="unknown natural image 'lena'"):
        data.natural_image("lena")
