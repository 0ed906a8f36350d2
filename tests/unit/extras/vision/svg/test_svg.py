"""SVG's pieces where the answer is known: the alignment's statistics and gradient, the flow-matching path and its
Euler sampler, the mask token, the SiT's zero start and the Fréchet distance."""

import pytest
import torch

from agentkit.extras.nets import euler_sample, flow_pair
from agentkit.extras.vision.svg.model import ResidualEncoder, SiT, align, frechet_distance


def test_alignment_gives_the_ssl_features_mean_and_std():
    """The aligned residual's channel means average to the SSL features' μ_D and its channel stds to σ_D (each the
    average over channels of per-channel statistics over batch and tokens, as ``match_distribution``)."""
    g = torch.Generator().manual_seed(0)
    f_d = torch.randn(16, 12, 64, generator=g) * torch.linspace(0.5, 3, 12)[None, :, None] + 1.7
    f_r = torch.randn(16, 8, 64, generator=g) * 0.05 - 4.0
    a = align(f_r, f_d)
    assert a.mean(dim=(0, 2)).mean().item() == pytest.approx(f_d.mean(dim=(0, 2)).mean().item(), abs=1e-4)
    assert a.std(dim=(0, 2)).mean().item() == pytest.approx(f_d.std(dim=(0, 2)).mean().item(), rel=1e-4)


def test_alignment_statistics_are_detached():
    """Only the residual gets a gradient, and it is the constant scale σ_D / σ_R (the statistics are constants)."""
    f_d = torch.randn(4, 6, 10).mul(2).requires_grad_()
    f_r = torch.randn(4, 3, 10).mul(0.1).requires_grad_()
    align(f_r, f_d).sum().backward()
    scale = f_d.std(dim=(0, 2)).mean() / f_r.std(dim=(0, 2)).mean()
    assert f_d.grad is None or f_d.grad.abs().max().item() == 0
    assert torch.allclose(f_r.grad, scale.detach().expand_as(f_r), rtol=1e-4)


def test_flow_targets_are_the_velocity_of_the_linear_path():
    """x_t = (1 − t) x0 + t ε runs from the data (t = 0) to the noise (t = 1), and v* = ε − x0 is its derivative
    (checked by a finite difference)."""
    x0, eps = torch.randn(3, 2, 4, 4), torch.randn(3, 2, 4, 4)
    t = torch.tensor([0.0, 0.3, 1.0])
    xt, v = flow_pair(x0, eps, t)
    assert torch.allclose(xt[0], x0[0]) and torch.allclose(xt[2], eps[2])
    h = 1e-3
    ahead, _ = flow_pair(x0, eps, t + h)
    assert torch.allclose((ahead - xt) / h, v, atol=1e-3)
    assert torch.allclose(v, eps - x0)


def test_euler_on_the_exact_velocity_returns_the_data():
    """With the true velocity of one pair, v(x, t) = ε − x0 (constant), Euler from ε at t = 1 lands on x0 at any
    step count."""
    x0, eps = torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4)
    for steps in (1, 5, 25):
        out = euler_sample(lambda x, t: eps - x0, eps, steps)
        assert torch.allclose(out, x0, atol=1e-5)


def test_the_mask_token_replaces_the_residual_only_in_training():
    enc = ResidualEncoder(16, 4, dim=8, depth=1, heads=2, channels=3, mask_ratio=1.0)
    x = torch.rand(5, 1, 16, 16)
    masked = enc(x)
    assert torch.allclose(masked, enc.mask_token.expand(5, 3, 16))
    enc.eval()
    assert not torch.allclose(enc(x), enc.mask_token.expand(5, 3, 16))


def test_sit_starts_at_zero_velocity_and_normalises_queries_and_keys():
    sit = SiT(5, 4, dim=16, depth=2, heads=2)
    assert sit(torch.randn(3, 5, 4, 4), torch.rand(3)).abs().max().item() == 0  # adaLN-Zero and a zero head
    assert all(isinstance(b.attn.q_norm, torch.nn.LayerNorm) for b in sit.blocks)


def test_frechet_distance_is_zero_for_one_set_and_grows_with_a_shift():
    x = torch.randn(2000, 4, generator=torch.Generator().manual_seed(1))
    assert frechet_distance(x, x) == pytest.approx(0, abs=1e-8)
    assert frechet_distance(x, x + 2.0) == pytest.approx(16.0, rel=1e-6)
