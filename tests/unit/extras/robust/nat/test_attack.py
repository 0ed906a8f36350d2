"""extras.robust.nat: the NAT loss, PGD and entropy against hand-computed values."""

import numpy as np
import pytest
import torch


def test_nat_loss_pgd_and_entropy_by_hand():
    from agentkit.extras.robust.nat.attack import margin_loss, nat_loss, non_true_entropy, pgd

    logits, nat, y = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([0])
    pt = torch.softmax(logits / 4, 1)  # τ = 4
    kl = (0.5 * (np.log(0.5) - pt.log())).sum() / 2  # KL(p_a ‖ p_t), averaged over B·K = 2 entries
    want = np.log(1 + np.exp(-2.0)) - 0.06 * 16 * kl.item()
    assert nat_loss(logits, nat, y, lam=0.06, tau=4.0).item() == pytest.approx(want, rel=1e-5)
    assert margin_loss(torch.tensor([[3.0, 1.0, 2.5]]), torch.tensor([0])).item() == pytest.approx(-0.5)
    assert non_true_entropy(torch.tensor([[9.0, 1.0, 1.0, 1.0]]), torch.tensor([0])).item() == pytest.approx(
        np.log(3), rel=1e-5
    )
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    x, yy = torch.rand(8, 1, 4, 4), torch.randint(0, 3, (8,))
    for loss in ("ce", "margin"):
        adv = pgd(model, x, yy, eps=0.1, alpha=0.05, steps=5, loss=loss)
        assert (adv - x).abs().max() <= 0.1 + 1e-6 and adv.min() >= 0 and adv.max() <= 1
        ce = torch.nn.functional.cross_entropy
        assert ce(model(adv), yy).item() > ce(model(x), yy).item()
    assert all(p.grad is None for p in model.parameters())
