"""extras.spiking.lrfdyn: the LRF-Dyn recurrence by hand, equal to causal SSA when A = 1, and to its FFT form."""

import pytest
import torch


def _qkv():
    q = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    k = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    v = torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    return q[None], k[None], v[None]  # one head, N = 3 tokens, k = 2 channels


def test_recurrence_by_hand_and_its_fft_form():
    from agentkit.extras.spiking.lrfdyn.model import dyn_parallel, dyn_recurrent

    q, k, v = _qkv()
    half = torch.full((1, 2, 2), 0.5)
    # X_1 = k_1ᵀv_1 = [[0, 1], [0, 0]]; X_2 = ½X_1 + k_2ᵀv_2 = [[1, ½], [1, 0]]; X_3 = ½X_2 + k_3ᵀv_3 = [[½, ¼], [3/2, 1]]
    want = [[0.0, 1.0], [2.0, 0.5], [0.5, 0.25]]  # q_n X_n
    assert dyn_recurrent(q, k, v, half)[0].tolist() == want
    assert torch.allclose(dyn_parallel(q, k, v, half)[0], torch.tensor(want), atol=1e-6)


def test_with_no_decay_the_recurrence_is_causal_ssa():
    from agentkit.extras.spiking.lrfdyn.model import dyn_recurrent, linear_attention

    q, k, v = _qkv()
    one = torch.ones(1, 2, 2)
    assert dyn_recurrent(q, k, v, one)[0].tolist() == [[0.0, 1.0], [2.0, 1.0], [1.0, 1.0]]
    assert torch.equal(dyn_recurrent(q, k, v, one), linear_attention(q, k, v, causal=True))
    # and the last token sees every token, as (non-causal) SSA does
    assert torch.equal(dyn_recurrent(q, k, v, one)[0, -1], linear_attention(q, k, v)[0, -1])


def test_fft_and_recurrent_forms_agree_on_random_spikes():
    from agentkit.extras.spiking.lrfdyn.model import dyn_parallel, dyn_recurrent

    g = torch.Generator().manual_seed(0)
    q, k, v = ((torch.rand(2, 3, 4, 17, 8, generator=g) < 0.3).float() for _ in range(3))  # [T, B, h, N, k]
    decay = torch.rand(4, 8, 8, generator=g) * 0.5 + 0.5
    assert torch.allclose(dyn_parallel(q, k, v, decay), dyn_recurrent(q, k, v, decay), atol=1e-4)


def test_the_network_gives_the_same_logits_token_by_token():
    from agentkit.extras.spiking.lrfdyn.model import SpikingTransformer

    torch.manual_seed(0)
    net = SpikingTransformer("dyn", d=32, heads=4, blocks=1, steps=2).eval()
    img = torch.rand(3, 1, 28, 28)
    with torch.no_grad():
        assert torch.allclose(net(img), net(img, recurrent=True), atol=1e-4)


def test_state_bytes_and_bad_kind():
    from agentkit.extras.spiking.lrfdyn.model import Attention, SpikingTransformer

    ssa, dyn = SpikingTransformer("ssa"), SpikingTransformer("dyn")  # 7×7 tokens, d = 64, 8 heads, 2 blocks
    assert ssa.state_bytes() == 2 * (2 * 49 * 64 + 4 * 8 * 49 * 49)  # K, V spikes and the h×N×N map
    assert dyn.state_bytes() == 2 * (4 * 64 * 8 + (2 * 2 * 8 + 1) * 64 + 4 * 64)  # X, the V window, a conv row
    with pytest.raises(ValueError, match="kind: 'mamba' is not ssa, lrf or dyn"):
        Attention("mamba", 8, 2, 2, [1])
