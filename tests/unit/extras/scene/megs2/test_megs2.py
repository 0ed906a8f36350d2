"""MEGS²'s colour and rasteriser by hand: one Gaussian renders its analytic footprint, a folded lobe adds its mean
over the sphere (Monte Carlo), spherical Gaussians and spherical harmonics evaluate as written, and compositing
follows depth."""

import math

import torch

from agentkit.extras.scene.megs2.colour import fold, sg_colour, sh_basis, sh_colour
from agentkit.extras.scene.megs2.render import covariances, look_at, project, render


def test_one_gaussian_renders_its_analytic_footprint():
    """An isotropic Gaussian (σ = 0.1) on the optical axis 4 units away: α(p) = o·exp(−|p − c|² / (2σ'²)) with
    σ'² = (f σ / z)² + 0.3 px² (the projection's scale plus 3DGS's dilation), at every pixel of a 32² image."""
    cam = look_at(torch.tensor([0.0, 0.0, -4.0]), torch.zeros(3), size=32, fov=40.0)
    sigma, o = 0.1, 0.6
    _, alpha = render(
        torch.zeros(1, 3), torch.full((1, 3), math.log(sigma)), torch.tensor([[1.0, 0, 0, 0]]),
        torch.tensor([o]), torch.ones(1, 3), cam,
    )  # fmt: skip
    f = cam.fx
    s2 = (f * sigma / 4.0) ** 2 + 0.3
    ys, xs = torch.meshgrid(torch.arange(32) + 0.5, torch.arange(32) + 0.5, indexing="ij")
    expected = o * torch.exp(-((xs - 16) ** 2 + (ys - 16) ** 2) / (2 * s2))
    expected = expected * (expected >= 1 / 255)
    torch.testing.assert_close(alpha, expected, atol=1e-5, rtol=1e-4)
    assert float(alpha.sum()) > 1.0  # a real footprint over many pixels


def test_anisotropic_covariance_projects_by_the_jacobian():
    """A Gaussian stretched along world x (σ_x = 0.5, σ_y = 0.05) seen head-on: its 2D covariance is
    diag((f σ_x / z)², (f σ_y / z)²) + 0.3 I."""
    cam = look_at(torch.tensor([0.0, 0.0, -5.0]), torch.zeros(3), size=64, fov=50.0)
    cov = covariances(torch.log(torch.tensor([[0.5, 0.05, 0.05]])), torch.tensor([[1.0, 0, 0, 0]]))
    uv, cov2, depth = project(torch.zeros(1, 3), cov, cam)
    f = cam.fx
    torch.testing.assert_close(uv[0], torch.tensor([32.0, 32.0]))
    torch.testing.assert_close(depth, torch.tensor([5.0]))
    expected = torch.diag(torch.tensor([(f * 0.5 / 5) ** 2, (f * 0.05 / 5) ** 2])) + 0.3 * torch.eye(2)
    torch.testing.assert_close(cov2[0], expected, atol=1e-4, rtol=1e-4)


def test_nearer_gaussian_covers_the_farther_one():
    """Two opaque-ish Gaussians on the axis: the pixel takes mostly the nearer one's colour whatever the order
    they are given in (the depth sort), C = c_near α + c_far α (1 − α)."""
    cam = look_at(torch.tensor([0.0, 0.0, -4.0]), torch.zeros(3), size=8, fov=30.0)
    means = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]])  # the second is nearer
    args = torch.full((2, 3), math.log(0.5)), torch.tensor([[1.0, 0, 0, 0]] * 2), torch.tensor([0.9, 0.9])
    red, blue = torch.tensor([1.0, 0, 0]), torch.tensor([0.0, 0, 1.0])
    img, _ = render(means, *args, torch.stack([red, blue]), cam)
    img_swapped, _ = render(means.flip(0), args[0], args[1], args[2], torch.stack([blue, red]), cam)
    torch.testing.assert_close(img, img_swapped)
    centre = img[4, 4]
    assert centre[2] > 0.8 and centre[0] < 0.15  # blue (near) in front of red (far)


def test_fold_equals_a_lobes_mean_over_the_sphere():
    """(1/4π)∫ a e^{s(μ·v − 1)} dv = a (1 − e^{−2s}) / (2s), by Monte Carlo over 400,000 uniform directions."""
    g = torch.Generator().manual_seed(0)
    v = torch.randn(400_000, 3, generator=g, dtype=torch.float64)
    v = v / v.norm(dim=1, keepdim=True)
    mu = torch.tensor([0.3, -0.5, 0.8], dtype=torch.float64)
    mu = mu / mu.norm()
    for s in (0.1, 1.0, 5.0, 20.0):
        mc = torch.exp(s * (v @ mu - 1)).mean()
        analytic = fold(torch.ones(1, 1, dtype=torch.float64), torch.tensor([s], dtype=torch.float64))[0, 0]
        assert abs(float(mc - analytic)) < 4 * float(torch.exp(s * (v @ mu - 1)).std()) / math.sqrt(len(v)) + 1e-12


def test_spherical_gaussian_lobes_evaluate_as_written():
    base = torch.tensor([[0.1, 0.2, 0.3]])
    amp = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]])
    axis = torch.tensor([[[0.0, 0.0, 2.0], [1.0, 0.0, 0.0]]])  # normalised inside
    sharp = torch.tensor([[3.0, 0.5]])
    v = torch.tensor([[0.6, 0.0, 0.8]])
    expected = base + torch.tensor([[math.exp(3 * (0.8 - 1)), 2 * math.exp(0.5 * (0.6 - 1)), 0.0]])
    torch.testing.assert_close(sg_colour(base, amp, axis, sharp, v), expected)


def test_spherical_harmonics_are_orthonormal_on_the_sphere():
    """∫ Y_i Y_j = δ_ij: the 16 degree-≤3 basis functions, by Monte Carlo (3DGS's constants and signs)."""
    g = torch.Generator().manual_seed(1)
    v = torch.randn(400_000, 3, generator=g, dtype=torch.float64)
    v = v / v.norm(dim=1, keepdim=True)
    b = sh_basis(v, 3)
    gram = 4 * math.pi * (b.t() @ b) / len(v)
    torch.testing.assert_close(gram, torch.eye(16, dtype=torch.float64), atol=0.03, rtol=0)
    coeffs = torch.zeros(1, 16, 3)
    coeffs[0, 0] = 1.0
    torch.testing.assert_close(sh_colour(coeffs, torch.tensor([[0.0, 0.0, 1.0]])), torch.full((1, 3), 0.5 + 0.28209479))


def test_budget_projection_keeps_the_cost_within_kappa():
    """For random opacities and lobe amplitudes and budgets from one primitive to all of them, the kept set costs
    ≤ κ, never keeps a lobe without its primitive, and spends the budget (what is left is less than one more
    primitive or lobe could use)."""
    from agentkit.extras.scene.megs2.prune import C_LOBE, C_PRIM, budget_cost, project_budget

    g = torch.Generator().manual_seed(0)
    prim, lobe = torch.rand(50, generator=g), torch.rand(50, 3, generator=g)
    full = 50 * C_PRIM + 150 * C_LOBE
    for kappa in (11, 18, 100, 400, 1000, full, full + 5):
        keep_p, keep_l = project_budget(prim, lobe, kappa)
        cost = budget_cost(keep_p, keep_l)
        assert cost <= kappa
        assert not (keep_l & ~keep_p[:, None]).any()
        assert kappa - cost < C_PRIM or bool(keep_p.all() and keep_l.all())
    assert budget_cost(*project_budget(prim, lobe, full)) == full


def test_admm_drives_the_iterate_onto_the_budget():
    """Minimising ‖x − target‖² under the budget by ADMM (gradient steps on the augmented loss, projection, dual
    update) ends with the pruned entries near 0 and the kept ones near their targets."""
    from agentkit.extras.scene.megs2.prune import BudgetADMM, budget_cost

    g = torch.Generator().manual_seed(0)
    to, ta = torch.rand(20, generator=g), torch.rand(20, 2, 3, generator=g)
    o, a = to.clone().requires_grad_(True), ta.clone().requires_grad_(True)
    admm = BudgetADMM(kappa=150, rho=5.0)
    opt = torch.optim.SGD([o, a], lr=0.05)
    for step in range(600):
        if step % 10 == 0:
            admm.update(o.detach(), a.detach())
        loss = (o - to).pow(2).sum() + (a - ta).pow(2).sum() + admm.penalty(o, a)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert budget_cost(admm.keep_prim, admm.keep_lobe) <= 150
    assert float(o.detach()[~admm.keep_prim].abs().max()) < 0.01
    torch.testing.assert_close(o.detach()[admm.keep_prim], to[admm.keep_prim], atol=0.01, rtol=0)


def test_blinn_phong_highlight_moves_with_the_viewer():
    """At a point lit head-on, seen head-on, c = ρ (k_a + k_d) + k_s; seen from 60° off, the specular term falls
    to k_s cos(30°)^n (the half vector is 30° off the normal)."""
    from agentkit.extras.scene.megs2.scenes import shade

    p, n = torch.zeros(1, 3), torch.tensor([[0.0, 0.0, 1.0]])
    rho = torch.tensor([[0.5, 0.2, 0.1]])

    def albedo(q):
        return rho.expand(len(q), 3)

    head_on = shade(albedo, p, n, n, n, ambient=0.2, diffuse=0.4, specular=0.3, shininess=10.0)
    torch.testing.assert_close(head_on, rho * 0.6 + 0.3)
    off = torch.tensor([[math.sin(math.radians(60)), 0.0, math.cos(math.radians(60))]])
    oblique = shade(albedo, p, n, off, n, ambient=0.2, diffuse=0.4, specular=0.3, shininess=10.0)
    torch.testing.assert_close(oblique, rho * 0.6 + 0.3 * math.cos(math.radians(30)) ** 10)


def test_folding_a_pruned_lobe_keeps_the_colour_averaged_over_views():
    """Dropping lobes moves their mean into c0: the colour averaged over all view directions is unchanged (Monte
    Carlo over 200,000 directions), the view-dependent part is gone, and each lobe's 7 floats are freed."""
    from agentkit.extras.scene.megs2.colour import sg_colour
    from agentkit.extras.scene.megs2.model import GaussianModel

    torch.manual_seed(0)
    m = GaussianModel(torch.zeros(2, 3), torch.full((2, 3), 0.3), kind="sg", lobes=3)
    with torch.no_grad():
        m.amp.copy_(torch.rand(2, 3, 3) * 0.5)
        m.sharp_raw.copy_(torch.tensor([[0.5, 2.0, 6.0], [1.0, 3.0, 0.2]]))
    v = torch.randn(200_000, 3, generator=torch.Generator().manual_seed(1))
    v = v / v.norm(dim=1, keepdim=True)

    def mean_colour():
        cols = [sg_colour(m.base[i : i + 1].expand(len(v), 3), (m.amp * m.alive[..., None])[i : i + 1].expand(len(v), 3, 3),
                          m.axis[i : i + 1].expand(len(v), 3, 3), m.sharp[i : i + 1].expand(len(v), 3), v).mean(0)
                for i in range(2)]  # fmt: skip
        return torch.stack(cols)

    before, floats = mean_colour(), m.static_floats()
    m.drop_lobes(torch.tensor([[True, True, False], [True, True, True]]))
    torch.testing.assert_close(mean_colour(), before, atol=3e-3, rtol=0)
    assert m.static_floats() == floats - 5 * 7 and int(m.alive.sum()) == 1


def test_sh_degree_cut_frees_the_higher_bands():
    from agentkit.extras.scene.megs2.model import GaussianModel

    m = GaussianModel(torch.zeros(4, 3), torch.full((4, 3), 0.5), kind="sh")
    assert m.static_floats() == 4 * (11 + 48)
    m.cut_degree(1)
    assert m.static_floats() == 4 * (11 + 12) and float(m.sh.detach()[:, 4:].abs().sum()) == 0
    m.keep(torch.tensor([True, False, True, False]))
    assert len(m.means) == 2 and m.static_floats() == 2 * (11 + 12)
