"""extras.robust.hdro: group-DRO losses against hand-computed values."""

import pytest
import torch


def test_group_dro_losses_by_hand():
    from agentkit.extras.robust.hdro.loss import GroupLoss

    head = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))  # logits = z
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]])
    y, g = torch.tensor([0, 0, 1]), torch.tensor([0, 0, 1])
    ce = torch.nn.functional.cross_entropy(z, y, reduction="none")  # ln(1+e^-1), ln(1+e), ln(1+e^2)
    counts = torch.tensor([100.0, 25.0])
    assert GroupLoss(counts, "erm")(z, y, g, head).item() == pytest.approx(ce.mean().item())
    gd = GroupLoss(counts, "group_dro", eps=1.0, eta=0.5, adjust=1.0)  # eps is ignored by Group DRO
    lg = torch.stack([ce[:2].mean(), ce[2]])
    q = torch.softmax(0.5 * (lg + torch.tensor([0.1, 0.2])), 0)  # uniform · exp(η(ℓ_g + C/√n_g)), normalised
    assert gd(z, y, g, head).item() == pytest.approx((q @ lg).item(), rel=1e-6)
    assert gd.q.tolist() == pytest.approx(q.tolist())
    h = GroupLoss(counts, "hdro", eps=0.4)
    assert h.radii.tolist() == pytest.approx([0.2, 0.4])  # ε·n_g^-½ / max n^-½
    # ∇_z CE = softmax(z) − onehot(y): sign (−, +) for the class-0 rows (radius 0.2), (+, −) for the class-1 row
    zp = h.perturb(z, y, g, head)
    assert torch.allclose(zp, torch.tensor([[0.8, 0.2], [-0.2, 1.2], [2.4, -0.4]]))
    zz = z.clone().requires_grad_(True)
    h(zz, y, g, head).backward()
    assert zz.grad is not None and zz.grad.abs().sum() > 0  # the perturbed loss still trains the features
