"""extras.spiking.frernn: EP's free and nudged fixed points on a 2-unit network by hand, and the local update."""

import math

import pytest
import torch

# A float32 fixed point checked against float64 arithmetic on its own float32 values: tanh is within an ulp, its
# argument carries an ulp or two from the products, and the iteration may alternate between neighbouring floats;
# the values lie in (-1, 1), so 4 ulps of 1 bound the gap on any CPU's kernels.
FIXED_POINT_TOL = 4 * torch.finfo(torch.float32).eps


def _net(feedback: float):
    from agentkit.extras.spiking.frernn.model import FRERNN

    net = FRERNN([1, 1, 1], classes=2, feedback=feedback)
    with torch.no_grad():
        net.layers[0].weight.fill_(0.5), net.layers[0].bias.fill_(0.1)
        net.layers[1].weight.fill_(-0.8), net.layers[1].bias.fill_(0.2)
        net.readout.weight.copy_(torch.tensor([[1.0], [-1.0]])), net.readout.bias.zero_()
        net.B.copy_(torch.tensor([[0.7], [-0.3]]))
    return net


def test_without_feedback_the_free_phase_is_the_feed_forward_pass():
    net = _net(0.0)
    x = torch.tensor([[1.0]])
    (s1, s2), settled = net.settle(x, 10)
    assert s1.item() == pytest.approx(math.tanh(0.5 + 0.1), abs=1e-6)  # 0.537
    assert s2.item() == pytest.approx(math.tanh(-0.8 * math.tanh(0.6) + 0.2), abs=1e-6)  # −0.226
    assert settled == 3  # step 1 sets s1, step 2 s2, step 3 moves nothing
    assert torch.allclose(net(x), net.readout(s2))


def test_free_and_nudged_fixed_points_and_the_contrastive_update_by_hand():
    net, x, y, beta = _net(0.5), torch.tensor([[1.0]]), torch.tensor([0]), 0.2
    (s1, s2), settled = net.settle(x, 200, tol=1e-9)
    a, b = s1.item(), s2.item()
    assert settled < 200
    assert a == pytest.approx(
        math.tanh(0.5 + 0.1 + 0.5 * -0.8 * b), abs=FIXED_POINT_TOL
    )  # s1 = tanh(w1 x + b1 + α w2 s2)
    assert b == pytest.approx(math.tanh(-0.8 * a + 0.2), abs=FIXED_POINT_TOL)  # s2 = tanh(w2 s1 + b2)

    (n1, n2), _ = net.settle(x, 200, [s1.clone(), s2.clone()], beta, y, tol=1e-9)
    p0 = 1 / (1 + math.exp(-2 * n2.item()))  # softmax(s2, −s2)_0
    e = (1 - p0, -(1 - p0))  # onehot(0) − ŷ
    drive = beta * (e[0] * 0.7 + e[1] * -0.3)  # β e B_f
    assert n2.item() == pytest.approx(math.tanh(-0.8 * n1.item() + 0.2 + drive), abs=FIXED_POINT_TOL)
    assert n1.item() == pytest.approx(math.tanh(0.6 + 0.5 * -0.8 * n2.item()), abs=FIXED_POINT_TOL)
    assert n2.item() > b  # the nudge pushes s2 towards class 0 (positive readout)

    net.ep_step(x, y, steps=400, beta=beta)  # free 400 steps, nudged 200: the same fixed points
    w1, w2 = net.layers[0].weight.grad.item(), net.layers[1].weight.grad.item()
    assert w1 == pytest.approx(-(n1.item() - a) / beta * 1.0, abs=1e-5)  # −ΔW_1 = −(s^β_1 − s⁰_1) x / β
    assert w2 == pytest.approx(-(n2.item() - b) / beta * a, abs=1e-5)  # −ΔW_2 = −(s^β_2 − s⁰_2) s⁰_1 / β
    p_free = 1 / (1 + math.exp(-2 * b))
    assert net.readout.weight.grad[:, 0].tolist() == pytest.approx([-(1 - p_free) * b, (1 - p_free) * b], abs=1e-6)


def test_regulated_feedback_settles_faster():
    from agentkit.extras.spiking.frernn.model import FRERNN

    x = torch.rand(16, 20, generator=torch.Generator().manual_seed(0))
    steps = {}
    for fb in (1.0, 0.01):
        net = FRERNN([20, 32, 32, 32], classes=3, feedback=fb, seed=0)
        steps[fb] = net.settle(x, 300, tol=1e-4)[1]
    assert steps[0.01] < steps[1.0] / 2, steps


def test_residual_needs_equal_widths():
    from agentkit.extras.spiking.frernn.model import FRERNN

    with pytest.raises(ValueError, match="residual: identity skips need equal hidden widths"):
        FRERNN([4, 8, 6], classes=2, residual=1)
