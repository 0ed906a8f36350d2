"""LPWM by hand: two glimpses composite in depth order, Chamfer-KL on a case worked out on paper, the causal
transformer keeps the past unchanged when the future changes, the glimpse crop inverts the placement, and the sprite
videos move as generated (occlusion by depth, the agent following its actions)."""

import math

import numpy as np
import torch

from agentkit.extras.world.lpwm.dlp import DLP, chamfer_kl, composite, crop, from_tokens, place, to_tokens
from agentkit.extras.world.lpwm.dynamics import Dynamics
from agentkit.extras.world.lpwm.sprites import DIRECTIONS, sprite_videos


def _two_squares(depth_red: float, depth_blue: float) -> torch.Tensor:
    """An opaque red and an opaque blue glimpse placed 8 px wide on a 32² canvas, overlapping in the middle."""
    red = torch.tensor([1.0, 1.0, 0.0, 0.0])[:, None, None].expand(4, 8, 8)
    blue = torch.tensor([1.0, 0.0, 0.0, 1.0])[:, None, None].expand(4, 8, 8)
    glimpses = torch.stack([red, blue])[None]  # [1, 2, 4, 8, 8]
    centres = torch.tensor([[[-0.1, 0.0], [0.1, 0.0]]])
    placed = place(glimpses, centres, torch.full((1, 2, 2), 0.25), 32)
    return composite(placed, torch.ones(1, 2), torch.tensor([[depth_red, depth_blue]]), torch.zeros(1, 3, 32, 32))


def test_two_glimpses_composite_in_depth_order():
    """Red covers columns 10.4–18.4 and blue 13.6–21.6 of 32: the overlap (column 16) shows the nearer glimpse
    (smaller depth), and swapping the depths swaps it; where only one glimpse lies (columns 12, 20), that one shows
    either way (to 0.4 %: the official normalisation's ε = 1e-5 against σ(−6) = 0.0025 of a far glimpse), and
    beyond both the background (black)."""
    red_front, blue_front = _two_squares(-6.0, 6.0)[0], _two_squares(6.0, -6.0)[0]
    mid, left, right = (16, 16), (16, 12), (16, 20)
    torch.testing.assert_close(red_front[:, mid[0], mid[1]], torch.tensor([1.0, 0.0, 0.0]), atol=5e-3, rtol=0)
    torch.testing.assert_close(blue_front[:, mid[0], mid[1]], torch.tensor([0.0, 0.0, 1.0]), atol=5e-3, rtol=0)
    for img in (red_front, blue_front):
        torch.testing.assert_close(img[:, left[0], left[1]], torch.tensor([1.0, 0.0, 0.0]), atol=5e-3, rtol=0)
        torch.testing.assert_close(img[:, right[0], right[1]], torch.tensor([0.0, 0.0, 1.0]), atol=5e-3, rtol=0)
        assert float(img[:, 2, 2].abs().max()) < 1e-6


def test_chamfer_kl_hand_case():
    """1-d particles q₁ = N(0, 1), q₂ = N(2, 1) and one proposal p = N(0, 4). KL(N(a, 1) ‖ N(0, 4)) =
    log 2 + (1 + a²)/8 − 1/2: 0.3181 for q₁, 0.8181 for q₂. Particles → nearest proposal: both; proposal → nearest
    particle: q₁. Total 3 log 2 + 1/8 + 5/8 + 1/8 − 3/2 = 3 log 2 − 5/8."""
    mu_q, lv_q = torch.tensor([[[0.0], [2.0]]]), torch.zeros(1, 2, 1)
    mu_p, lv_p = torch.zeros(1, 1, 1), torch.full((1, 1, 1), math.log(4.0))
    got = float(chamfer_kl(mu_q, lv_q, mu_p, lv_p)[0])
    assert abs(got - (3 * math.log(2) - 5 / 8)) < 1e-6
    # the loss is symmetric in the roles of the sets only through the min: a second proposal at q₂ lowers it
    mu_p2, lv_p2 = torch.tensor([[[0.0], [2.0]]]), torch.full((1, 2, 1), math.log(4.0))
    assert float(chamfer_kl(mu_q, lv_q, mu_p2, lv_p2)[0]) < got


def test_causal_transformer_keeps_the_past_unchanged():
    """Changing frames after τ (particles, background and given actions) leaves the dynamics' predictions, the
    latent policy and the inverse model up to τ exactly as they were; changing frame τ changes them at τ."""
    torch.manual_seed(0)
    dyn = Dynamics(
        particle_dim=9, bg_dim=3, particles=4, frames=6, dim=16, layers=2, heads=2, context_dim=7, action_dim=2
    ).eval()
    z, bg, act, c = torch.randn(2, 6, 4, 9), torch.randn(2, 6, 3), torch.randn(2, 6, 2), torch.randn(2, 6, 5, 7)
    tau = 2
    z2, bg2, act2, c2 = z.clone(), bg.clone(), act.clone(), c.clone()
    z2[:, tau + 1 :] += 1.0
    bg2[:, tau + 1 :] -= 1.0
    act2[:, tau + 1 :] *= -1
    c2[:, tau + 1 :] += 2.0
    with torch.no_grad():
        before, after = dyn.predict(z, bg, c, act), dyn.predict(z2, bg2, c2, act2)
        for a, b in zip(before, after):
            torch.testing.assert_close(a[:, : tau + 1], b[:, : tau + 1], atol=1e-6, rtol=0)
            assert float((a[:, tau + 1 :] - b[:, tau + 1 :]).abs().max()) > 1e-3
        ctx_before, ctx_after = dyn.latent_actions(z, bg, act), dyn.latent_actions(z2, bg2, act2)
        # the inverse model's c_t reads frame t + 1: unchanged for t + 1 ≤ τ; the policy's π_t for t ≤ τ
        torch.testing.assert_close(ctx_before[0][:, :tau], ctx_after[0][:, :tau], atol=1e-6, rtol=0)
        torch.testing.assert_close(ctx_before[2][:, : tau + 1], ctx_after[2][:, : tau + 1], atol=1e-6, rtol=0)


def test_crop_inverts_place():
    """A glimpse placed at (0.3, −0.2) with scale 0.25 and cropped back at the same spot and extent is the glimpse
    (bilinear resampling at matching grids)."""
    torch.manual_seed(0)
    g = torch.rand(1, 1, 3, 16, 16)
    centre = torch.tensor([[[0.25, -0.25]]])
    canvas = place(g, centre, torch.full((1, 1, 2), 0.25), 64)[:, 0]
    back = crop(canvas, centre, 0.25, 16)[0, 0]
    torch.testing.assert_close(back, g[0, 0], atol=1e-5, rtol=0)


def test_tokens_round_trip_and_decode_shapes():
    """The DLP's posterior turns into dynamics tokens and back to particles the renderer takes, with the same
    means (the transparency through its logit)."""
    torch.manual_seed(0)
    m = DLP(size=32, patch=8, features=4, bg_features=3, particles=5, glimpse=8, width=16).eval()
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        q = m.encode(x)
        mu, lv, bm, bl = to_tokens(q)
        assert mu.shape == (2, 16, 7 + 4) and bm.shape == (2, 3)  # one particle a patch of 8²
        z = from_tokens(mu, bm)
        mean = DLP.sample(q, mean=True)
        torch.testing.assert_close(z["pos"], mean["pos"])
        torch.testing.assert_close(z["obj_on"], mean["obj_on"].clamp(1e-3, 1 - 1e-3), atol=1e-5, rtol=0)
        img, keep = m.decode(z, rendered=True)
        assert img.shape == (2, 3, 32, 32) and keep.shape == (2, 5)  # the 5 of lowest score are drawn
        assert set(keep[0].tolist()) == set(q["score"][0].argsort()[:5].tolist())


def test_sprites_occlude_by_depth_and_the_agent_follows_its_actions():
    v = sprite_videos(6, frames=8, size=64, kind="action", redraw=0.5, seed=3)
    c, a = v["centres"], v["actions"]
    for i in range(6):
        for t in range(7):
            step = c[i, t + 1, 0] - c[i, t, 0]
            free = np.all((c[i, t, 0] > 8) & (c[i, t, 0] < 56))  # away from the walls the move is the action
            if free and np.linalg.norm(step) > 0:
                cos = float(step @ a[i, t] / np.linalg.norm(step))
                assert cos > 0.999
    assert np.abs(a.reshape(-1, 1, 2) - DIRECTIONS[None]).max(-1).min(-1).max() < 1e-6  # each is a compass move
    t = sprite_videos(20, frames=6, seed=1)
    assert t["visible"].sum() < np.isfinite(t["centres"][..., 0]).sum()  # some sprites are hidden behind others
    assert float(np.abs(t["actions"]).max()) == 0.0
