"""The Cartan-decomposition losses on so(3), where the answer is known."""

import pytest
import torch

from agentkit.extras.theory.symspace.lie import antisymmetric, basis_loss, bracket, cartan_residual, so3, span_residual


def test_so3_brackets():
    lx, ly, lz = so3()
    assert torch.equal(bracket(lx, ly), lz) and torch.equal(bracket(ly, lz), lx) and torch.equal(bracket(lz, lx), ly)
    assert torch.equal(lx, -lx.T)


def test_cartan_residual_is_zero_for_the_sphere_and_positive_for_a_random_basis():
    """𝔨 = ⟨L_z⟩, 𝔭 = ⟨L_x, L_y⟩ is S²'s Cartan decomposition: [L_z, L_x] = L_y, [L_z, L_y] = −L_x, [L_x, L_y] = L_z.
    The swapped split (𝔨 = ⟨L_x, L_y⟩) is not one, nor is a random split."""
    lx, ly, lz = so3()
    assert cartan_residual(lz[None], torch.stack([lx, ly])).item() == pytest.approx(0.0, abs=1e-10)
    # swapped: [L_x, L_y] = L_z ∉ 𝔨, [L_x, L_z] = −L_y and [L_y, L_z] = L_x ∉ 𝔭: 3 residuals of ‖L‖² = 2
    assert cartan_residual(torch.stack([lx, ly]), lz[None]).item() == pytest.approx(6.0, rel=1e-5)
    torch.manual_seed(0)
    k, p = antisymmetric(torch.randn(1, 3, 3)), antisymmetric(torch.randn(2, 3, 3))
    assert cartan_residual(k, p).item() > 1e-3


def test_span_residual_by_hand():
    """diag(1, 2) off span{diag(1, 0)} leaves diag(0, 2): residual 4."""
    m = torch.diag(torch.tensor([1.0, 2.0]))[None]
    basis = torch.diag(torch.tensor([1.0, 0.0]))[None]
    assert span_residual(m, basis).item() == pytest.approx(4.0)
    assert span_residual(m, basis[:0]).item() == pytest.approx(5.0)


def test_basis_loss_and_gradients():
    lx, ly, lz = so3()
    assert basis_loss(lz[None], torch.stack([lx, ly])).item() == pytest.approx(3 * 0.5)  # each ‖L‖₁ = 2
    raw = torch.randn(3, 3, 3, requires_grad=True)
    basis = antisymmetric(raw)
    (cartan_residual(basis[:1], basis[1:]) + 1e-3 * basis_loss(basis[:1], basis[1:])).backward()
    assert raw.grad is not None and torch.isfinite(raw.grad).all() and raw.grad.abs().sum() > 0
