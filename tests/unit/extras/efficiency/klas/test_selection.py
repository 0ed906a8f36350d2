"""KLAS's stitch selection against a hand table, and the least-squares stitch on a known map."""

import numpy as np
import pytest
import torch

from agentkit.extras.efficiency.klas.selection import (
    buckets,
    gamma,
    kl_table,
    klas_select,
    linear_cka,
    lstsq_stitch,
    mean_kl,
    snnet_stitches,
)


def test_gamma_and_buckets_on_a_hand_table():
    """Two 3-block anchors. Θ(P^f_i, P^g_j) and Θ(P^g_j, P^g_{j+1}) by hand; Γ divides the first by the second for
    j < 2. FLOPs of stitch (i, j) = 10(i + 1) + 20(2 − j): buckets of width (80 − 20)/2 = 30."""
    theta_fg = np.array([[0.30, 0.60, 0.90], [0.20, 0.10, 0.50], [0.40, 0.20, 0.05]])
    theta_gg = np.array([0.2, 0.1])
    g = gamma(theta_fg, theta_gg)
    assert g == pytest.approx(np.array([[1.5, 6.0], [1.0, 1.0], [2.0, 2.0]]))
    pairs = [(i, j) for i in range(3) for j in range(2)]
    flops = np.array([10 * (i + 1) + 20 * (2 - j) for i, j in pairs], float)  # 50 30 60 40 70 50
    assert flops.tolist() == [50, 30, 60, 40, 70, 50]
    assert buckets(flops, 2).tolist() == [1, 0, 1, 0, 1, 1]  # lo 30, hi 70: < 50 → 0, ≥ 50 → 1
    keep = klas_select(g.reshape(-1), flops, count=2, slack=1.05)
    # bucket 0: (0,1) Γ 6.0, (1,1) 1.0 → keep Γ ≤ 1.05: (1,1); bucket 1: (0,0) 1.5, (1,0) 1.0, (2,0) 2.0, (2,1) 2.0
    # → (1,0)
    assert [pairs[k] for k in keep] == [(1, 0), (1, 1)]


def test_lstsq_stitch_recovers_a_known_affine_map():
    torch.manual_seed(0)
    h_f = torch.randn(500, 6)
    w, b = torch.randn(6, 4), torch.randn(4)
    w_hat, b_hat = lstsq_stitch(h_f, h_f @ w + b)
    assert torch.allclose(w_hat, w, atol=1e-4) and torch.allclose(b_hat, b, atol=1e-4)


def test_kl_table_and_cka():
    p = [torch.tensor([[0.5, 0.5]]), torch.tensor([[0.9, 0.1]])]
    t = kl_table(p, p)
    assert t[0, 0] == pytest.approx(0.0, abs=1e-9) and t[0, 1] == pytest.approx(mean_kl(p[0], p[1]))
    assert t[0, 1] == pytest.approx(0.5 * np.log(0.5 / 0.9) + 0.5 * np.log(0.5 / 0.1), rel=1e-6)
    torch.manual_seed(0)
    x = torch.randn(300, 5)
    q, _ = torch.linalg.qr(torch.randn(5, 5))
    assert linear_cka(x, 3 * x @ q) == pytest.approx(1.0, abs=1e-9)  # invariant to rotation and scale
    assert linear_cka(x, torch.randn(300, 5)) < 0.2


def test_snnet_rule_pairs_equal_depths():
    assert snnet_stitches(4, 1) == [(0, 0), (1, 1), (2, 2)]
    assert len(snnet_stitches(4, 2)) == 8
