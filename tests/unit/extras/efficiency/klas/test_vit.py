"""The stitched ViT family: a stitch of a model into itself by the identity is the model; FLOPs add up."""

import torch

from agentkit.extras.efficiency.klas.vit import Stitched, ViT, fit_probe, flops, probe_probs


def test_identity_stitch_into_itself_is_the_model():
    torch.manual_seed(0)
    f = ViT(32, depth=3).eval()
    x = torch.rand(4, 28, 28)
    for i in range(3):
        s = Stitched(f, f, i, i, torch.eye(32), torch.zeros(32)).eval()
        with torch.no_grad():
            assert torch.allclose(s(x), f(x), atol=1e-5)


def test_stitched_flops_lie_between_the_anchors_and_add_up():
    """FLOPs(stitch (i, j)) = f's embedding and blocks 0…i + the stitch layer + g's blocks j+1… and head, so the
    earliest stitch into the wider model costs about as much as that model, the latest about as much as f."""
    torch.manual_seed(0)
    f, g = ViT(16, depth=4), ViT(32, depth=4)
    x = torch.rand(2, 28, 28)
    ff, fg = flops(f, x), flops(g, x)
    assert 0 < ff < fg
    early, late = flops(Stitched(f, g, 0, 0), x), flops(Stitched(f, g, 3, 2), x)
    assert ff < late < early < fg + 2 * 17 * 16 * 32 + 1
    block_f = flops(Stitched(f, g, 1, 0), x) - early  # one more block of f
    assert block_f > 0


def test_probe_reads_linearly_separable_features():
    torch.manual_seed(0)
    z = torch.randn(400, 8)
    y = (z[:, 0] + z[:, 1] > 0).long()
    probe = fit_probe(z * 10 + 3, y, classes=2, steps=200)
    p = probe_probs(probe, z * 10 + 3)
    assert torch.allclose(p.sum(1), torch.ones(400)) and (p.argmax(1) == y).float().mean() > 0.95
