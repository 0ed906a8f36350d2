"""Diverse dictionary learning's pieces against hand-computed values."""

import numpy as np
import pytest
import torch
from torch import nn

from agentkit.extras import data
from agentkit.extras.theory.dictionary.model import VAE, block_r2, jacobian, jacobian_l1, mcc, support_f1


def test_linear_decoder_penalty_is_the_l1_norm_of_its_weights():
    torch.manual_seed(0)
    dec = nn.Linear(3, 5)
    z = torch.randn(7, 3)
    assert jacobian_l1(dec, z).item() == pytest.approx(dec.weight.abs().sum().item(), rel=1e-6)
    assert torch.allclose(jacobian(dec, z), dec.weight.expand(7, 5, 3))


def test_jacobian_of_a_nonlinear_decoder_by_hand():
    """ĝ(z) = (tanh(z₀), z₀·z₁): D ĝ = [[1 − tanh²(z₀), 0], [z₁, z₀]]."""

    class G(nn.Module):
        def forward(self, z):
            return torch.stack([torch.tanh(z[..., 0]), z[..., 0] * z[..., 1]], -1)

    z = torch.tensor([[0.5, -2.0]])
    want = torch.tensor([[[1 - np.tanh(0.5) ** 2, 0.0], [-2.0, 0.5]]], dtype=torch.float32)
    assert torch.allclose(jacobian(G(), z), want, atol=1e-6)
    assert jacobian_l1(G(), z).item() == pytest.approx(want.abs().sum().item(), rel=1e-6)


def test_permuted_and_rescaled_latents_give_mcc_one():
    z = np.random.default_rng(0).standard_normal((2000, 4))
    z_hat = np.stack([3 * z[:, 2], -z[:, 0], z[:, 3] + 1, 0.5 * z[:, 1]], 1)
    score, match = mcc(z, z_hat)
    assert score == pytest.approx(1.0) and match.tolist() == [1, 3, 0, 2]
    score_r2, _ = mcc(z, z_hat + 0.3 * z_hat**3, "r2")  # an invertible map of each: identified up to it
    assert score_r2 > 0.97
    c = np.sqrt(0.5)  # 45° rotations of (z₀, z₁) and (z₂, z₃): each learned latent mixes two, |corr| ½√2
    rot = np.array([[c, c, 0, 0], [-c, c, 0, 0], [0, 0, c, c], [0, 0, -c, c]])
    assert mcc(z, z @ rot)[0] == pytest.approx(c, abs=0.03)


def test_support_f1_by_hand():
    """True support {(0,0), (1,0), (1,1)}; estimate at threshold 0.2 of each row's largest: {(0,0), (1,1)} → tp 2,
    F1 = 2·2 / (2 + 3) = 0.8."""
    sup = np.array([[True, False], [True, True]])
    assert support_f1(sup, np.array([[2.0, 0.3], [0.1, 1.0]])) == pytest.approx(0.8)
    assert support_f1(sup, np.array([[2.0, 0.3], [0.5, 1.0]])) == pytest.approx(1.0)


def test_block_is_identified_as_a_whole_but_not_its_members():
    """z_hat mixes latents 0 and 1 by a 45° rotation and keeps latent 2: the block {0, 1} regresses perfectly on the
    two matched learned latents; each member on its own match does not (R² ½)."""
    z = np.random.default_rng(0).standard_normal((4000, 3))
    c = np.sqrt(0.5)
    z_hat = np.stack([c * (z[:, 0] + z[:, 1]), c * (z[:, 0] - z[:, 1]), z[:, 2]], 1)
    _, match = mcc(z, z_hat)
    assert block_r2(z, z_hat, [0, 1], match) > 0.99
    assert np.mean([block_r2(z, z_hat, [i], match) for i in (0, 1)]) == pytest.approx(0.5, abs=0.05)


def test_sparse_mixing_follows_its_supports():
    """Observed i does not move when a latent outside S_i does (the generator's Jacobian has the stated support)."""
    sup = data.sparse_supports(5, "diverse")
    for s in sup:  # the diversity condition: the supports holding k intersect in {k}
        assert s.sum() == 2
    for k in range(5):
        assert np.flatnonzero(np.logical_and.reduce(sup[sup[:, k]], 0)).tolist() == [k]
    z = np.random.default_rng(0).standard_normal((50, 5))
    base = data.sparse_decode(z, sup, 0.0, 16, seed=3)
    for k in range(5):
        moved = z.copy()
        moved[:, k] += 1.0
        change = np.abs(data.sparse_decode(moved, sup, 0.0, 16, seed=3) - base).max(0)
        assert ((change > 1e-6) == sup[:, k]).all()


def test_vae_loss_is_the_negative_elbo():
    """With a zero-variance encoder at μ = 0 and a decoder that outputs 0, −ELBO = ‖x‖²/2σ² + KL(N(0, e^logvar)‖N(0, 1))."""
    vae = VAE(2, 1, hidden=4, sigma_x=0.5)
    for p in vae.parameters():
        nn.init.zeros_(p)
    x = torch.tensor([[1.0, 2.0]])
    loss, mu, _ = vae.loss(x)
    assert mu.abs().sum() == 0
    assert loss.item() == pytest.approx(5.0 / (2 * 0.25))  # logvar 0: KL 0
