"""The flow-matching model with symmetric-space latents: its group elements, its geodesic symmetry, its losses."""

import pytest
import torch

from agentkit.extras.nets import kl_std_normal
from agentkit.extras.theory.symspace.lie import so3
from agentkit.extras.theory.symspace.model import VAE, SymSpace, chamfer, recall


def test_condition_is_a_rotation_and_minus_p_is_its_inverse():
    """exp(P) of an antisymmetric P lies in SO(n), and exp(−P) = exp(P)⁻¹ = exp(P)ᵀ: the geodesic symmetry."""
    torch.manual_seed(0)
    m = SymSpace(dim=3, n=4, k_dim=2, p_dim=2, hidden=8)
    c = torch.randn(5, 2)
    g, g_inv = m.condition(c).view(5, 4, 4), m.condition(-c).view(5, 4, 4)
    eye = torch.eye(4).expand(5, 4, 4)
    assert torch.allclose(g @ g.transpose(1, 2), eye, atol=1e-5)
    assert torch.allclose(torch.linalg.det(g), torch.ones(5), atol=1e-5)
    assert torch.allclose(g @ g_inv, eye, atol=1e-5)


def test_sphere_bases_reach_the_reflected_point():
    """With 𝔭 = ⟨L_x, L_y⟩ and o the north pole, exp(P)·o and exp(−P)·o are the same polar angle at opposite
    azimuths: (x, y, z) ↦ (−x, −y, z)."""
    m = SymSpace(dim=3, n=3, k_dim=1, p_dim=2, hidden=8)
    lx, ly, lz = so3()
    with torch.no_grad():
        m.raw_p.copy_(torch.stack([lx, ly]))
        m.raw_k.copy_(lz[None])
    o = torch.tensor([0.0, 0.0, 1.0])
    c = torch.tensor([[0.4, -0.9], [1.2, 0.3]])
    a, b = m.condition(c).view(2, 3, 3) @ o, m.condition(-c).view(2, 3, 3) @ o
    assert torch.allclose(b, a * torch.tensor([-1.0, -1.0, 1.0]), atol=1e-6)
    assert cartan_zero(m)


def cartan_zero(m: SymSpace) -> bool:
    return float(m.loss(torch.randn(4, 3))["cartan"].detach()) < 1e-10


def test_weights_switch_terms_off():
    """The CFM baseline (Cartan and GSC weights 0) totals L_CFM + 0.01 L_KL + 10⁻³ L_basis."""
    torch.manual_seed(0)
    m = SymSpace(dim=3, hidden=8, weights={"cartan": 0.0, "gsc": 0.0})
    parts = m.loss(torch.randn(16, 3))
    assert parts["gsc"] > 0 and parts["cartan"] > 0
    expected = parts["cfm"] + 0.01 * parts["kl"] + 1e-3 * parts["basis"]
    assert m.total(parts).item() == pytest.approx(expected.item(), rel=1e-6)
    full = SymSpace(dim=3, hidden=8).total(parts)
    assert full.item() == pytest.approx((expected + parts["cartan"] + parts["gsc"]).item(), rel=1e-6)


def test_kl_and_distances_by_hand():
    # KL(N(1, e⁰) ‖ N(0, 1)) = ½(1 + 1 − 1 − 0) = 0.5 per coordinate
    assert kl_std_normal(torch.ones(2, 3), torch.zeros(2, 3)).tolist() == pytest.approx([1.5, 1.5])
    a, b = torch.tensor([[0.0, 0.0], [3.0, 0.0]]), torch.tensor([[1.0, 0.0]])
    assert recall(a, b) == pytest.approx((1 + 4) / 2)
    assert chamfer(a, b) == pytest.approx((1 + 4) / 2 + 1)
    assert chamfer(a, a) == 0.0


def test_flow_learns_a_point_mass_and_vae_reconstructs():
    """Trained on one point, the flow's samples (any condition) and the VAE's decodings land near it (untrained,
    about 1.6 away)."""
    torch.manual_seed(0)
    target = torch.tensor([[0.6, -0.8, 0.0]])
    for model in (SymSpace(dim=3, hidden=32), VAE(3, 2, 32)):
        before = (model.sample(64, steps=16) - target).norm(dim=1).mean()
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        for _ in range(400):
            loss = model.total(model.loss(target.expand(32, 3)))
            opt.zero_grad()
            loss.backward()
            opt.step()
        after = (model.sample(64, steps=16) - target).norm(dim=1).mean()
        assert before > 1.0 and after < 0.4, (type(model).__name__, before, after)
