"""extras.spiking.bep: the binary backward step of a 2-layer net by hand, and integers only, op by op."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode


def _net(p_r: float = 0.0):
    from agentkit.extras.spiking.bep.model import BinaryMLP

    net = BinaryMLP([3, 4, 4], classes=2, group=2, r=0.5, nu=0.25, p_r=p_r)
    net.H = [
        torch.tensor([[3, 1, -2], [-1, 2, 1], [2, -3, 1], [1, 1, 1]], dtype=torch.int16),
        torch.tensor([[1, -1, 1, 1], [2, 2, -1, 1], [-1, 1, 1, -2], [1, 1, 1, 1]], dtype=torch.int16),
    ]
    net.P = torch.tensor([[1, 1, -1, -1], [-1, 1, 1, 1]], dtype=torch.int8)
    return net


def test_binary_backward_step_of_a_two_layer_net_by_hand():
    net = _net()
    a0, y = torch.tensor([[1, -1, 1]], dtype=torch.int8), torch.tensor([0])
    zs, acts = net.forward(a0)
    assert zs[0].tolist() == [[-1, -1, 3, 1]] and acts[1].tolist() == [[-1, -1, 1, 1]]
    assert zs[1].tolist() == [[2, -2, 0, 0]] and acts[2].tolist() == [[1, -1, 1, 1]]  # sign(0) = +1
    assert net.scores(a0).tolist() == [[-2, 0]]  # margin −2 − 0 < r·K_L = 2: triggered
    want = net.targets(zs, acts, y, torch.tensor([True]))
    assert want[1].tolist() == [[1, 1, -1, -1]]  # a*_2 = P_0
    # gate |z_2| ≤ ⌊0.25·4⌋ = 1 passes neurons 2 and 3; W_2ᵀ(0, 0, −1, −1) = (0, −2, −2, 0): zeros keep a_1
    assert want[0].tolist() == [[-1, -1, -1, 1]]
    out = net.step(a0, y)
    # forward: 3·4 + 4·4 + 2·4 synapses; backward: W_2 (4·4); update: 2 neurons of 4 inputs, 1 of 3
    assert out == {"triggered": 1, "updated_neurons": 3, "update_ops": 11, "bit_ops": 36 + 16 + 11}
    # layer 2: wrong neurons 1, 2, 3; groups (0, 1) → 1, (2, 3) → 2 (tie |z| = 0: the first); H += 2 a*_j a_1
    assert net.H[1].tolist() == [[1, -1, 1, 1], [0, 0, 1, 3], [1, 3, -1, -4], [1, 1, 1, 1]]
    # layer 1: only neuron 2 is wrong (a*_1 = −1): H row 2 += 2·(−1)·a_0
    assert net.H[0].tolist() == [[3, 1, -2], [-1, 2, 1], [0, -1, -1], [1, 1, 1]]


def test_random_feedback_replaces_the_transpose():
    from agentkit.extras.spiking.bep.model import BinaryMLP

    net = _net()
    local = BinaryMLP([3, 4, 4], classes=2, group=2, r=0.5, nu=0.25, p_r=0.0, feedback="random")
    local.H, local.P = [h.clone() for h in net.H], net.P.clone()
    local.B = [local.B[0], torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [-1, 1, -1, 1]], dtype=torch.int8)]
    a0, y = torch.tensor([[1, -1, 1]], dtype=torch.int8), torch.tensor([0])
    zs, acts = local.forward(a0)
    # gated a*_2 = (0, 0, −1, −1); B_2ᵀ of it = (0, −2, 0, −2): zeros keep a_1 = (−1, −1, 1, 1)
    assert local.targets(zs, acts, y, torch.tensor([True]))[0].tolist() == [[-1, -1, 1, -1]]
    with pytest.raises(ValueError, match="feedback: 'dfa' is not transpose or random"):
        BinaryMLP([3, 4], classes=2, group=2, feedback="dfa")


def test_untriggered_samples_do_not_update():
    net = _net()
    a0 = torch.tensor([[1, -1, 1]], dtype=torch.int8)
    before = [h.clone() for h in net.H]
    assert net.step(a0, torch.tensor([1])) == {
        "triggered": 0,
        "updated_neurons": 0,
        "update_ops": 0,
        "bit_ops": 36,  # the forward pass only
    }  # class 1 wins by 2 ≥ 2
    assert all(torch.equal(a, b) for a, b in zip(before, net.H))


def test_reinforcement_pushes_right_neurons_away_from_zero():
    net = _net(p_r=100.0)  # probability clipped to 1: every right neuron of a triggered sample
    a0, y = torch.tensor([[1, -1, 1]], dtype=torch.int8), torch.tensor([0])
    net.step(a0, y)
    # layer 2, neuron 0 is right (a = a* = +1): H row 0 += a_1 = (−1, −1, 1, 1)
    assert net.H[1][0].tolist() == [0, -2, 2, 2]
    # layer 1, neurons 0, 1, 3 are right: rows += a*_j · a_0
    assert net.H[0][[0, 1, 3]].tolist() == [[2, 2, -3], [-2, 3, 0], [2, 0, 2]]


class _Dtypes(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.seen.append((str(func), t.dtype))
        return out


def test_forward_and_backward_use_integers_only():
    from agentkit.extras.spiking.bep.model import BinaryMLP, BinaryRNN, binarise, thermometer

    torch.manual_seed(0)
    x = torch.rand(16, 12)
    a0 = binarise(x, x.median(0).values)  # the float input is binarised once, outside the network
    net = BinaryMLP([12, 8, 8], classes=3, group=4, nu=0.5, p_r=0.5)
    rnn = BinaryRNN(6, 8, classes=3, group=4, nu=0.5, p_r=0.5)
    seq = thermometer(x[:, :5], torch.linspace(0.2, 0.8, 6))  # [16, 5 steps, 6 levels]
    with _Dtypes() as mode:
        net.step(a0, torch.randint(0, 3, (16,)))
        net.predict(a0)
        rnn.step(seq, torch.randint(0, 3, (16,)))
        rnn.predict(seq)
    floats = [(f, d) for f, d in mode.seen if d.is_floating_point or d.is_complex]
    assert mode.seen and not floats, floats[:5]
    assert all(h.dtype == torch.int16 and not h.requires_grad for h in [*net.H, rnn.H])


def _rnn():
    from agentkit.extras.spiking.bep.model import BinaryRNN

    net = BinaryRNN(1, 2, classes=2, group=2, r=0.5, nu=0.5, p_r=0.0)  # margin ⌊0.5·2⌋ = 1, gate ⌊0.5·3⌋ = 1
    net.H = torch.tensor([[2, -1, 1], [-1, -2, 3]], dtype=torch.int16)  # W = [[1, −1, 1], [−1, −1, 1]]
    net.P = torch.tensor([[1, 1], [-1, 1]], dtype=torch.int8)
    return net


def test_bep_through_time_on_a_two_step_rnn_by_hand():
    net = _rnn()
    x, y = torch.tensor([[[1], [-1]]], dtype=torch.int8), torch.tensor([0])
    zs, us, h = net.forward(x)
    # u_1 = (1, 1, 1): z_1 = (1, −1), h_1 = (1, −1); u_2 = (−1, 1, −1): z_2 = (−3, −1), h_2 = (−1, −1)
    assert [z.tolist() for z in zs] == [[[1, -1]], [[-3, -1]]] and h[2].tolist() == [[-1, -1]]
    assert net.scores(x).tolist() == [[-2, 0]]  # margin −2 < 1: triggered
    out = net.step(x, y)
    # t = 2: a*_2 = P_0 = (1, 1), both wrong, neuron 1 is less stable (|z| 1 < 3): row 1 += 2·u_2 = (−2, 2, −2).
    # back: gate |z_2| ≤ 1 passes neuron 1 only; W_hᵀ(0, 1) = (−1, 1) = a*_1 against h_1 = (1, −1): both wrong,
    # tie |z_1| = 1: neuron 0, row 0 += 2·(−1)·u_1 = (−2, −2, −2)
    assert net.H.tolist() == [[0, -3, -1], [-3, 0, 1]]
    # forward 2·6 + 4 synapses, backward one step through W_h (4), update 2 neurons × 3 inputs
    assert out == {"triggered": 1, "updated_neurons": 2, "update_ops": 6, "bit_ops": 16 + 4 + 6}


def test_truncated_depth_stops_the_error_in_time():
    net = _rnn()
    out = net.step(torch.tensor([[[1], [-1]]], dtype=torch.int8), torch.tensor([0]), depth=1)
    assert net.H.tolist() == [[2, -1, 1], [-3, 0, 1]]  # only t = 2's update
    assert out == {"triggered": 1, "updated_neurons": 1, "update_ops": 3, "bit_ops": 16 + 3}


def test_learns_a_separable_task():
    from agentkit.extras.spiking.bep.model import BinaryMLP

    g = torch.Generator().manual_seed(0)
    proto = torch.randint(0, 2, (4, 64), generator=g) * 2 - 1
    y = torch.randint(0, 4, (512,), generator=g)
    flip = torch.rand(512, 64, generator=g) < 0.15
    a0 = torch.where(flip, -proto[y], proto[y]).to(torch.int8)  # noisy copies of 4 binary patterns
    net = BinaryMLP([64, 64, 32], classes=4, group=4, seed=1)
    start = (net.predict(a0) == y).float().mean().item()
    for _ in range(10):
        for b in torch.randperm(512, generator=g).split(32):
            net.step(a0[b], y[b])
    assert (net.predict(a0) == y).float().mean().item() > max(0.9, start + 0.3)


def test_bad_group_is_rejected():
    from agentkit.extras.spiking.bep.model import BinaryMLP

    with pytest.raises(ValueError, match="group: 4 does not divide the layer width 6"):
        BinaryMLP([3, 6], classes=2)
