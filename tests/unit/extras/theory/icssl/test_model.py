"""IC-SSL's pieces against hand-computed values: power iteration finds the Fiedler vector, the spectral kernel does
not depend on the basis, one GD step is the hand-written update."""

import numpy as np
import pytest
import torch

from agentkit.extras import data
from agentkit.extras.theory.icssl.model import (
    ICSSL,
    EigICL,
    GDStage,
    PlainICL,
    exact_eigenmaps,
    labelled_mask,
    power_iteration,
    rbf_attention,
)


def two_clusters(n: int = 20, gap: float = 4.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, 3, generator=g, dtype=torch.float64)
    return torch.cat([a, a[: n // 2] * 0.7 + torch.tensor([gap, 0.0, 0.0], dtype=torch.float64)])[None]


def test_power_iteration_finds_the_fiedler_vector():
    """Subspace iteration's top-2 space of S, rotated by Rayleigh–Ritz, holds the Fiedler vector of L̂ = I − S (the
    second-smallest eigenvector) as eigh gives it; it separates the two clusters."""
    x = two_clusters()
    s = rbf_attention(x, 0.5)
    phi = power_iteration(s, 2, 100, torch.Generator().manual_seed(1))
    _, r = torch.linalg.eigh(phi[0].T @ s[0] @ phi[0])  # Rayleigh–Ritz: ascending Ritz values
    fiedler_pi = phi[0] @ r[:, 0]
    evals, evecs = torch.linalg.eigh(s[0])
    fiedler = evecs[:, -2]  # S's second-largest = L̂'s second-smallest
    cos = torch.dot(fiedler_pi, fiedler).abs() / fiedler_pi.norm() / fiedler.norm()
    assert cos > 0.99
    sign = torch.sign(fiedler)
    assert (sign[:20] == sign[0]).all() and (sign[20:] == -sign[0]).all()  # the cut between the two clusters
    assert evals[-1] == pytest.approx(1.0, abs=1e-9)  # D^-½ A D^-½ has top eigenvalue 1 (eigenvector D^½ 1)


def test_rbf_attention_is_the_normalised_gaussian_kernel():
    x = torch.tensor([[[0.0], [1.0], [3.0]]])
    d2 = torch.tensor([[0.0, 1, 9], [1, 0, 4], [9, 4, 0]])
    h = 0.5 * 4.0  # scale × the median of the off-diagonal squared distances (1, 9, 4)
    a = torch.exp(-d2 / (2 * h))
    deg = a.sum(1)
    assert torch.allclose(rbf_attention(x, 0.5)[0], a / torch.sqrt(deg[:, None] * deg[None, :]), atol=1e-6)


def test_kernel_does_not_depend_on_the_basis():
    """κ = Φ g(ΦᵀSΦ) Φᵀ is the same for any orthonormal basis of the subspace, and equals U g(Λ) Uᵀ on eigenvectors."""
    torch.manual_seed(0)
    s = rbf_attention(torch.randn(1, 30, 4), 0.3)
    gd = GDStage(2, 1)
    with torch.no_grad():
        gd.theta.copy_(torch.tensor([0.5, -1.0, 2.0]))
    u = exact_eigenmaps(s, 5)
    q, _ = torch.linalg.qr(torch.randn(5, 5))
    lam = torch.linalg.eigvalsh(s[0])[-5:]
    g = 0.5 - lam + 2 * lam**2
    with torch.no_grad():
        assert torch.allclose(gd.kernel(u @ q, s), gd.kernel(u, s), atol=1e-5)
        assert torch.allclose(gd.kernel(u, s)[0], u[0] @ torch.diag(g) @ u[0].T, atol=1e-5)


def test_one_gd_step_by_hand():
    """f₁(i) = α Σ_{j≤m} (e_{y_j} − softmax(0)) κ_ij, times the temperature (1 at the start)."""
    gd = GDStage(2, 1)
    with torch.no_grad():
        gd.log_alpha.fill_(np.log(2.0))
    kappa = torch.tensor([[[1.0, 0.5, 0.2], [0.5, 1.0, 0.1], [0.2, 0.1, 1.0]]])
    y = torch.tensor([[0, 1, 1]])
    mask = labelled_mask(2, 1, 3)  # points 0 and 1 labelled
    resid = torch.tensor([[0.5, -0.5], [-0.5, 0.5]])  # e_y − (½, ½)
    want = 2.0 * kappa[0][:, :2] @ resid
    assert torch.allclose(gd(kappa, y, mask)[0], want)


def test_labelled_mask_per_episode():
    assert labelled_mask(torch.tensor([1, 3]), 2, 4).tolist() == [[1, 0, 0, 0], [1, 1, 1, 0]]


@pytest.mark.parametrize("cls", [ICSSL, EigICL])
def test_spectral_learners_solve_separated_clusters_untrained(cls):
    """With one label per cluster, the untrained GD stage in the spectral kernel labels two far blobs correctly,
    and the labels of unlabelled points do not leak into the prediction."""
    x = two_clusters(20, 8.0).float()
    y = torch.cat([torch.zeros(20), torch.ones(10)]).long()[None]
    order = torch.tensor([0, 20] + [i for i in range(30) if i not in (0, 20)])
    x, y = x[:, order], y[:, order]
    model = cls(k=4).eval()
    with torch.no_grad():
        pred = model(x, y, 2).argmax(-1)
        scrambled = model(x, torch.cat([y[:, :2], 1 - y[:, 2:]], 1), 2)
    assert (pred == y).all()
    assert torch.allclose(scrambled, model(x, y, 2))


def test_plain_icl_is_permutation_equivariant_and_pads_inputs():
    torch.manual_seed(0)
    model = PlainICL(d_in=6, width=16, layers=1).eval()
    x, y = torch.randn(1, 7, 4), torch.randint(0, 2, (1, 7))
    mask = labelled_mask(3, 1, 7)
    perm = torch.tensor([2, 0, 1, 6, 5, 4, 3])  # the labelled first three stay first
    with torch.no_grad():
        out = model(x, y, 3)
        assert torch.allclose(model(x[:, perm], y[:, perm], 3), out[:, perm], atol=1e-5)
    assert mask.sum() == 3 and out.shape == (1, 7, 2)


@pytest.mark.parametrize("name", data.MANIFOLDS)
def test_manifolds_are_two_class_rotated_and_seeded(name):
    x, y = data.manifold(name, 200, d=10, noise=0.0, seed=3)
    assert x.shape == (200, 10) and set(y.tolist()) == {0, 1}
    assert np.isclose(((x - x.mean(0)) ** 2).sum(1).mean(), 1.0, atol=1e-5)  # total variance 1
    assert np.linalg.matrix_rank(x - x.mean(0), tol=1e-4) == (2 if name in ("moons", "circles", "spirals") else 3)
    assert np.array_equal(data.manifold(name, 200, d=10, noise=0.0, seed=3)[0], x)
