"""ATOM's pieces by hand: T-RoPE sees only time differences, the MMFF94 forces are the energy's gradient, NVE
dynamics conserves energy, the e3nn lift is equivariant while the whole model is only quasi-equivariant (and the
graph baselines exactly), and EGNO's Fourier convolution over frames is what it says."""

import numpy as np
import pytest
import torch

pytest.importorskip("rdkit")
pytest.importorskip("ase")
pytest.importorskip("e3nn")

from agentkit.extras.physics.atom import md  # noqa: E402
from agentkit.extras.physics.atom.model import (  # noqa: E402
    ATOM,
    EGNN,
    EGNO,
    TimeConv,
    constant_velocity,
    random_rotations,
    trope,
)


def _rot(r, a):
    return torch.einsum("bij,b...j->b...i", r, a)


def test_trope_scores_depend_only_on_the_time_between_frames():
    """θ = ω (t_p − t_0) / τ: shifting every time by the same amount leaves every query-key score unchanged, and
    a different gap changes it."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    omega = 1000.0 ** (-2 * torch.arange(4) / 8)
    tq, tk = torch.tensor([1.0, 2, 3, 4, 8]), torch.zeros(5)

    def scores(tq, tk):
        return trope(q, tq, omega) @ trope(k, tk, omega).transpose(-1, -2)

    base = scores(tq, tk)
    for shift in (0.5, 7.0, -3.0):
        torch.testing.assert_close(scores(tq + shift, tk + shift), base, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(scores(tq + 1.0, tk), base, atol=1e-3)
    # at zero gap the rotation cancels: the plain dot product
    torch.testing.assert_close(scores(torch.full((5,), 4.0), torch.full((5,), 4.0)), q @ k.transpose(-1, -2))


def test_mmff_forces_equal_the_finite_difference_gradient_of_the_energy():
    mol = md.molecule("ethanol", seed=0)
    atoms = md.atoms_of(mol)
    rng = np.random.default_rng(0)
    atoms.positions = atoms.positions + 0.05 * rng.standard_normal(atoms.positions.shape)  # off the minimum
    forces = atoms.get_forces()
    h, fd = 1e-4, np.zeros_like(forces)
    for i in range(len(atoms)):
        for d in range(3):
            p = atoms.positions.copy()
            p[i, d] += h
            atoms.positions = p
            e_plus = atoms.get_potential_energy()
            p[i, d] -= 2 * h
            atoms.positions = p
            e_minus = atoms.get_potential_energy()
            p[i, d] += h
            atoms.positions = p
            fd[i, d] = -(e_plus - e_minus) / (2 * h)
    assert np.abs(forces).max() > 0.1  # eV/Å: a real test, not zeros
    np.testing.assert_allclose(forces, fd, atol=2e-4)


def test_nve_energy_drift_over_1000_steps_stays_small():
    """Velocity Verlet at 0.5 fs on MMFF94 toluene at 400 K: the total energy drifts by less than 10 meV over
    1,000 steps (measured: about 2 meV; kT is 34 meV) and fluctuates by less than 5 meV."""
    traj = md.simulate("toluene", frames=11, every=100, temperature=400.0, equilibrate=200, seed=1)
    e = traj["energy"]
    assert abs(e[-1] - e[0]) < 0.010
    assert e.std() < 0.005
    v = traj["velocities"]  # Å/fs, thermal: ~0.01-0.1
    assert 0.005 < np.abs(v).mean() < 0.1


def test_atoms_lift_is_equivariant_but_the_model_only_quasi_equivariant():
    """The e3nn lift commutes with rotations (vector channels rotate, scalars stay); the whole ATOM does not
    (LayerNorms and MLPs mix irrep components) and its error is measured; EGNO and the EGNN are exact."""
    torch.manual_seed(0)
    b, n = 3, 6
    x, v, z = torch.randn(b, n, 3), 0.05 * torch.randn(b, n, 3), torch.tensor([6, 6, 8, 1, 1, 1])
    r = random_rotations(b, torch.Generator().manual_seed(1))
    net = ATOM(dim=24, blocks=2, heads=2)
    vec = 24 // 3  # 8x1o, no scalars
    for a, ar in zip(net.lift(x, v, z), net.lift(_rot(r, x), _rot(r, v), z)):
        va, var = a[..., : 3 * vec].reshape(b, n, vec, 3), ar[..., : 3 * vec].reshape(b, n, vec, 3)
        torch.testing.assert_close(var, torch.einsum("bij,bnkj->bnki", r, va), atol=1e-5, rtol=1e-4)
    times = torch.arange(1.0, 5.0)
    err = (net(_rot(r, x), _rot(r, v), z, times) - _rot(r, net(x, v, z, times))).pow(2).mean()
    assert err > 1e-6  # quasi-equivariant: measured, not zero
    bonds = torch.zeros(n, n)
    egno = EGNO(hidden=8, layers=2, frames=4)
    e_egno = (egno(_rot(r, x), _rot(r, v), z, times, bonds) - _rot(r, egno(x, v, z, times, bonds))).abs().max()
    egnn = EGNN(hidden=8, layers=2)
    y, yr = egnn.rollout(x, v, z, 1.0, 4, bonds), egnn.rollout(_rot(r, x), _rot(r, v), z, 1.0, 4, bonds)
    assert e_egno < 1e-4 and (yr - _rot(r, y)).abs().max() < 1e-4
    shift = torch.tensor([1.0, -2.0, 0.5])  # and translations: EGNO moves with the molecule
    torch.testing.assert_close(
        egno(x + shift, v, z, times, bonds), egno(x, v, z, times, bonds) + shift, atol=1e-4, rtol=0
    )


def test_atom_decodes_every_frame_in_one_pass_and_its_output_moves_with_the_molecule():
    torch.manual_seed(0)
    x, v, z = torch.randn(2, 5, 3), 0.05 * torch.randn(2, 5, 3), torch.tensor([6, 6, 8, 1, 1])
    net = ATOM(dim=24, blocks=1, heads=2)
    out = net(x, v, z, torch.arange(1.0, 9.0))
    assert out.shape == (2, 8, 5, 3)
    shift = torch.tensor([3.0, 0.0, -1.0])  # centred inside: a translated input translates the output
    torch.testing.assert_close(net(x + shift, v, z, torch.arange(1.0, 9.0)), out + shift, atol=1e-4, rtol=0)
    assert not torch.allclose(out[:, 0], out[:, -1])  # the frames differ (T-RoPE tells them apart)


def test_time_conv_keeps_the_lowest_modes_and_is_linear_in_time():
    """Over P frames, a TimeConv with identity weights on its modes is a low-pass filter: a constant signal
    passes unchanged, the highest frequency is removed."""
    conv = TimeConv(channels=1, modes=2)
    with torch.no_grad():
        conv.w.copy_(torch.ones(2, 1, 1, dtype=torch.cfloat))
    const = torch.ones(1, 8, 1)
    torch.testing.assert_close(conv(const), const)
    alternating = torch.tensor([1.0, -1] * 4).view(1, 8, 1)
    torch.testing.assert_close(conv(alternating), torch.zeros(1, 8, 1), atol=1e-6, rtol=0)


def test_constant_velocity_extrapolates_linearly():
    x, v = torch.zeros(1, 2, 3), torch.tensor([[[0.1, 0.0, 0.0], [0.0, -0.2, 0.0]]])
    out = constant_velocity(x, v, torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(out[0, 1], torch.tensor([[0.2, 0.0, 0.0], [0.0, -0.4, 0.0]]))


def test_random_rotations_are_proper_rotations():
    r = random_rotations(16, torch.Generator().manual_seed(0))
    torch.testing.assert_close(r @ r.transpose(1, 2), torch.eye(3).expand(16, 3, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.det(r), torch.ones(16), atol=1e-5, rtol=0)
