"""extras.graph.h3gnn: the WGCN layer, the high-pass token, hardness masking and the loss against hand-computed values."""

import math

import pytest
import torch

PATH = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # the path 0 – 1 – 2, both directions


def test_wgcn_layer_on_a_three_node_graph_by_hand():
    from agentkit.extras.graph.h3gnn.model import WGCN

    layer = WGCN(1, 1, layers=1, num_edges=4).eval()  # eval: BN is x / √(1 + 1e-5) with fresh running stats
    with torch.no_grad():
        layer.convs[0].lin.weight.fill_(1.0)
        layer.convs[0].bias.zero_()
        layer.w.copy_(torch.tensor([0.0, 0.0, math.log(1 / 3), math.log(1 / 3)]))  # σ = ½, ½, ¼, ¼
    x = torch.tensor([[1.0], [2.0], [4.0]])
    d0, d1, d2 = 1 + 0.5, 1 + 0.5 + 0.25, 1 + 0.25  # degrees of A_w + I
    want = torch.tensor(
        [
            x[0, 0] / d0 + 0.5 / math.sqrt(d0 * d1) * x[1, 0],
            0.5 / math.sqrt(d1 * d0) * x[0, 0] + x[1, 0] / d1 + 0.25 / math.sqrt(d1 * d2) * x[2, 0],
            0.25 / math.sqrt(d2 * d1) * x[1, 0] + x[2, 0] / d2,
        ]
    ) / math.sqrt(1 + 1e-5)
    assert torch.allclose(layer(x, PATH)[:, 0], want, atol=1e-6)


def test_wgcn_edge_weights_take_effect():
    from agentkit.extras.graph.h3gnn.model import WGCN

    torch.manual_seed(0)
    layer = WGCN(2, 3, layers=2, num_edges=4).eval()
    x = torch.randn(3, 2)
    before = layer(x, PATH)
    layer(x, PATH).sum().backward()
    assert layer.w.grad is not None and layer.w.grad.abs().sum() > 0  # the loss reaches the edge weights
    with torch.no_grad():
        layer.w[2:] = -10.0  # σ ≈ 0: node 2 is cut off
    after = layer(x, PATH)
    assert not torch.allclose(before, after)
    alone = WGCN(2, 3, layers=2, num_edges=0).eval()
    alone.load_state_dict({k: v for k, v in layer.state_dict().items() if k != "w"}, strict=False)
    assert torch.allclose(after[2], alone(x[2:], torch.empty(2, 0, dtype=torch.long))[0], atol=1e-3)


def test_high_pass_token_by_hand():
    from agentkit.extras.graph.h3gnn.model import high_pass

    x = torch.tensor([[1.0], [2.0], [4.0]])
    d = torch.tensor([2.0, 3.0, 2.0])  # degrees with self-loops
    a = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=torch.float) / torch.sqrt(d[:, None] * d[None])
    assert torch.allclose(high_pass(x, PATH, 1.0, 1), x - a @ x, atol=1e-6)
    assert torch.allclose(
        high_pass(x, PATH, 0.5, 2), (torch.eye(3) - 0.5 * a) @ (torch.eye(3) - 0.5 * a) @ x, atol=1e-6
    )


def test_hardness_masking_and_loss():
    from agentkit.extras.graph.h3gnn.model import byol_loss, hardness_mask_probs

    p = hardness_mask_probs(torch.tensor([0.0, 1.0, 2.0, 4.0]), rate=0.5, steer=0.4)
    assert p.tolist() == pytest.approx([0.3, 0.35, 0.4, 0.5])  # R(1 − r) + R·r·d/max d
    a = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    assert byol_loss(a, a).item() == pytest.approx(0.0, abs=1e-6)
    assert byol_loss(a, -a).item() == pytest.approx(4.0)
    assert byol_loss(a, torch.tensor([[0.0, 1.0], [0.0, 1.0]])).item() == pytest.approx(1.0)  # (2 + 0) / 2


def test_teacher_student_step_moves_student_and_ema_teacher():
    from agentkit.extras.graph.h3gnn.model import H3Encoder, TeacherStudent

    torch.manual_seed(0)
    model = TeacherStudent(H3Encoder(4, 8, num_edges=4, heads=2), d_in=4, d=8, momentum=0.5)
    x = torch.randn(3, 4)
    t0 = [p.clone() for p in model.teacher.parameters()]
    loss = model.loss(x, PATH, torch.tensor([True, False, False]))
    loss.backward()
    assert model.student.one_hop.w.grad.abs().sum() > 0 and model.mask_token.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.teacher.parameters())
    assert model.hardness.shape == (3,)
    with torch.no_grad():
        for p in model.student.parameters():
            p.add_(1.0)
    model.update_teacher()
    for old, new, s in zip(t0, model.teacher.parameters(), model.student.parameters()):
        assert torch.allclose(new, 0.5 * old + 0.5 * s)
