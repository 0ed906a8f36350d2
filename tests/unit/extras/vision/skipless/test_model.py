"""extras.vision.skipless: the skipless initialisation against hand-computed values."""

import pytest
import torch


def test_skipless_init_by_hand():
    from agentkit.extras.vision.skipless.model import Block, ViT, attention_jacobian_condition, skipless_init

    torch.manual_seed(0)
    blk = Block(8, 2, skip=False)
    skipless_init(blk, alpha=0.0, beta=0.6, c=3.0)
    wv, wo = blk.attn.v.weight.T, blk.attn.o.weight.T  # the x·W matrices
    assert torch.linalg.svdvals(wv @ wo).tolist() == pytest.approx([9.0] * 8, rel=1e-4)  # c²·orthogonal
    wq, wk = blk.attn.q.weight.T, blk.attn.k.weight.T
    for h in range(2):  # α = 0: W_Q^h W_K^hᵀ is the rank-4 truncation of 0.6·I, i.e. 0.6 × a projection
        m = wq[:, 4 * h : 4 * h + 4] @ wk[:, 4 * h : 4 * h + 4].T
        assert torch.allclose(m, m.T, atol=1e-5)
        assert sorted(torch.linalg.eigvalsh(m).tolist()) == pytest.approx([0] * 4 + [0.6] * 4, abs=1e-5)
    skip = Block(8, 2, skip=True)
    torch.nn.init.zeros_(skip.attn.o.weight)  # x + MHSA(x) with a zero output map: the identity, κ = 1
    assert attention_jacobian_condition(skip, torch.randn(3, 8)) == pytest.approx(1.0)
    vit = ViT("skipless-init", depth=2, d=16, heads=2)
    assert vit(torch.rand(2, 1, 28, 28)).shape == (2, 10) and not vit.blocks[0].skip
    with pytest.raises(ValueError):
        ViT("resnet")
