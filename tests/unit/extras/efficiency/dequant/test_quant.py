"""extras.efficiency.dequant: the ridge dequantiser against a hand-computed solution."""

import pytest
import torch

from agentkit.errors import AgentkitError


def test_ridge_dequantiser_by_hand():
    from agentkit.extras.efficiency.dequant.quant import QuantSpec, quantize, sparsify
    from agentkit.extras.efficiency.dequant.recipe import diverged, parse_setting

    x = torch.tensor([[0.0, 1.0, 3.0, 4.0]], requires_grad=True)
    # 1 bit: b = 0, s = 4, codes [0, 0, 1, 1]; STE maps them back to the grid {0, 4}
    assert quantize(x, QuantSpec(1, "ste", block=4)).tolist() == [[0, 0, 4, 4]]
    # ridge: q̄ = ½, x̄ = 2, Cov = 0.75, Var = 0.25 → slope 0.75 / 0.26, x̂ = 2 ∓ slope/2
    ridge = quantize(x, QuantSpec(1, "ridge", block=4, lam=0.01))
    k = 0.75 / 0.26 / 2
    assert ridge[0].tolist() == pytest.approx([2 - k, 2 - k, 2 + k, 2 + k])
    w = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    (ridge * w).sum().backward()
    g_ridge = x.grad.clone()
    x.grad = None
    (quantize(x, QuantSpec(1, "ste", block=4)) * w).sum().backward()
    assert x.grad.tolist() == [[1, 2, 3, 4]]  # STE: the identity
    assert not torch.allclose(g_ridge, x.grad)  # ridge: gradients also flow through the block statistics
    assert torch.allclose(quantize(x, QuantSpec(8, "ste", block=4)), x, atol=4 / 255)
    s = sparsify(torch.tensor([[0.5, -2.0, 1.0, 0.1, 3.0, 0.0, -1.0, 0.2]]), 2, 4)
    assert s.tolist() == [[0, -2.0, 1.0, 0, 3.0, 0, -1.0, 0]]
    assert quantize(x, QuantSpec(4, "ridge", block=2)).shape == x.shape  # 2 blocks of 2
    assert parse_setting("fp", "ste", 128, 0.01) == (None, None)
    a, wt = parse_setting("A4W1:2of4", "ridge", 64, 0.01)
    assert (a.bits, wt.bits, wt.nm, a.nm, wt.block) == (4, 1, (2, 4), None, 64)
    with pytest.raises(AgentkitError, match="A<bits>W<bits>"):
        parse_setting("W4A4", "ste", 128, 0.01)
    assert diverged([1.0] * 5 + [float("nan")]) and diverged([1.0] * 10 + [2.0] * 10)
    assert not diverged([2.0] * 10 + [1.0] * 10)
