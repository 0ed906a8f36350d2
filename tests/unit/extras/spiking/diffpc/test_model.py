"""extras.spiking.diffpc: a ternary spike update by hand, the threshold schedule, PC's fixed point and local rule."""

import math

import torch


def test_ternary_spikes_and_the_receiver_by_hand():
    from agentkit.extras.spiking.diffpc.model import Channel, threshold

    assert [threshold(t, 0, 3) for t in range(4)] == [1.0, 0.5, 0.25, 1.0]  # 2^m / 2^{t mod n}
    w = torch.tensor([[1.0, 2.0], [-1.0, 0.5]])
    ch = Channel(w, (1, 2))
    target = torch.tensor([[0.7, -0.3]])
    ch.send(target, threshold(0, 0, 3))  # |0.7|, |−0.3| ≤ 1: silent
    assert ch.spikes == 0 and ch.received.tolist() == [[0.0, 0.0]]
    ch.send(target, threshold(1, 0, 3))  # 0.7 > 0.5: +1, x_A = (0.5, 0); x_F += 0.5·W(1, 0) = (0.5, −0.5)
    assert ch.announced.tolist() == [[0.5, 0.0]] and ch.received.tolist() == [[0.5, -0.5]]
    ch.send(target, threshold(2, 0, 3))  # d = (0.2, −0.3): only −0.3 passes 0.25; x_F += 0.25·W(0, −1)
    assert ch.announced.tolist() == [[0.5, -0.25]] and ch.received.tolist() == [[0.0, -0.625]]
    assert ch.spikes == 2
    assert torch.allclose(ch.received, ch.announced @ w.T)  # the receiver knows W x_A, from spikes alone
    assert (target - ch.announced).abs().max() < 2.0 ** (0 + 1 - 3)  # one cycle: error below 2^{m+1−n}


def test_a_cycle_bounds_the_error_of_any_value():
    from agentkit.extras.spiking.diffpc.model import Channel, threshold

    g = torch.Generator().manual_seed(0)
    target = (torch.rand(64, 30, generator=g) * 2 - 1) * 3.9  # |x| < 2^{m+1} with m = 1
    ch = Channel(torch.randn(5, 30, generator=g), (64, 30))
    for t in range(10):
        ch.send(target, threshold(t, 1, 10))
    assert (target - ch.announced).abs().max() <= 2.0 ** (1 + 1 - 10)
    assert ch.spikes <= 64 * 30 * 10


def test_float_pc_relaxes_to_its_fixed_point_and_sets_the_local_rule():
    from agentkit.extras.spiking.diffpc.model import Code, PCNet

    torch.manual_seed(0)
    net = PCNet([4, 6, 3])
    with torch.no_grad():
        net.layers[0].bias.fill_(2.0)  # x_1 stays > 0: F is quadratic in x_1 (no ReLU kink), one fixed point
    x0, target = torch.rand(5, 4), torch.eye(3)[[0, 1, 2, 0, 1]]
    xs, errors, sent, _ = net.relax(x0, target, steps=400, gamma=0.1, code=Code(spiking=False))
    w2 = net.layers[1].weight
    # fixed point of x_1: ε_1 = φ'(x_1) ⊙ W_2ᵀ ε_2
    assert torch.allclose(errors[0], (xs[1] > 0).float() * (errors[1] @ w2), atol=1e-5)
    assert sent == 0  # float messages are not spikes
    # local rule: ∂F/∂W_l = −ε_l φ(x_{l−1})ᵀ / B
    assert torch.allclose(w2.grad, -(errors[1].T @ torch.relu(xs[1])) / 5, atol=1e-6)
    assert torch.allclose(net.layers[0].weight.grad, -(errors[0].T @ x0) / 5, atol=1e-6)
    # the energy only falls from the feed-forward start (where ε_1 = 0)
    f_end = sum(0.5 * (e**2).sum() for e in errors)
    f_start = 0.5 * ((target - net(x0)) ** 2).sum()
    assert f_end < f_start


def test_diffpc_tracks_float_pc_within_the_schedule_error():
    from agentkit.extras.spiking.diffpc.model import Code, PCNet, bits

    torch.manual_seed(0)
    net = PCNet([8, 16, 4])
    x0, target = torch.rand(32, 8), torch.eye(4)[torch.randint(0, 4, (32,))]
    fp = net.relax(x0, target, steps=24, gamma=0.1, code=Code(spiking=False))
    grads = [p.grad.clone() for p in net.parameters()]
    # two whole cycles: the last step sends at the finest threshold
    sp = net.relax(x0, target, steps=24, gamma=0.1, code=Code(spiking=True, m=1, n=12, cycles=1))
    # messages lag within a cycle (a change waits for a fine enough threshold), so the states drift a little
    assert max((a - b).abs().max() for a, b in zip(fp[0][1:], sp[0][1:])) < 0.05
    assert all(torch.allclose(g, p.grad, atol=0.02) for g, p in zip(grads, net.parameters()))
    # the sweep alone already costs spikes; a spike is log₂3 bits
    scores, sent = net.predict(x0, Code(spiking=True, m=1, n=12))
    assert torch.allclose(scores, net(x0), atol=0.02) and sent > 0
    assert math.isclose(bits(sent, 28, 32), sent * math.log2(3) / (28 * 32))
