"""The gradient split of future-token features: its parts sum to the gradient, their Adam steps to the real step,
and the switches (detach, myopic, untied) cut exactly the paths they name."""

import copy

import pytest
import torch

from agentkit.extras.theory.futurefeat.gradients import AdamParts, probe_risk, set_grads, split_gradient
from agentkit.extras.theory.futurefeat.model import LM


def tiny(**kw) -> LM:
    torch.manual_seed(0)
    return LM(vocab=4, length=8, d=16, layers=2, heads=2, **kw)


def embedding_grad(lm: LM, tokens: torch.Tensor, loss_at: int) -> torch.Tensor:
    """|∂L_loss_at / ∂(input embedding)| per position ``[T]``."""
    emb = lm.parts[0].transformer.wte
    hook_out = {}

    def keep(module, args, out):
        out.retain_grad()
        hook_out["e"] = out

    h = emb.register_forward_hook(keep)
    lm.loss(tokens)[loss_at].backward()
    h.remove()
    return hook_out["e"].grad.abs().sum((0, 2))


def test_myopic_keeps_values_and_cuts_the_future():
    """Myopic attention gives the same logits; the loss at the last position then sends no gradient to earlier
    positions' embeddings (standard attention does)."""
    tokens = torch.randint(0, 4, (3, 8))
    standard, myopic = tiny(), tiny(myopic=True)
    assert torch.allclose(standard(tokens)[0], myopic(tokens)[0], atol=1e-6)
    g_std, g_myo = embedding_grad(standard, tokens, 6), embedding_grad(myopic, tokens, 6)
    assert (g_std[:6] > 1e-6).all() and g_myo[:6].max() == 0 and g_myo[6] > 0
    with myopic.attention("eager"):  # the switch the probe risk uses
        assert (embedding_grad(myopic, tokens, 6)[:6] > 1e-6).all()


def test_untied_uses_separate_weights_after_the_split():
    """Positions ≥ split read the second GPT-2; changing it leaves the logits before the split unchanged."""
    lm, tokens = tiny(split=4), torch.randint(0, 4, (2, 8))
    before = lm(tokens)[0]
    with torch.no_grad():
        for p in lm.parts[1].parameters():
            p.add_(0.1)
    after = lm(tokens)[0]
    assert torch.equal(before[:, :4], after[:, :4]) and not torch.allclose(before[:, 4:], after[:, 4:])
    assert embedding_grad(lm, tokens, 6)[:4].max() > 0  # the second half still reads the first through the cache


@pytest.mark.parametrize("kw", [{}, {"myopic": True}, {"split": 4}])
def test_parts_sum_to_the_gradient_and_adam_steps_to_the_real_step(kw):
    lm, tokens = tiny(**kw), torch.randint(0, 4, (5, 8))
    params = list(lm.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    tracker = AdamParts(opt)
    for step in range(3):  # a nonzero state from the second step on
        parts = split_gradient(lm, tokens, layer=1, position=3)
        total = parts["shared"] + parts["direct"] + parts["pre_cached"]
        assert torch.allclose(total, parts["full"], atol=1e-7)
        loss = lm.loss(tokens).mean()
        opt.zero_grad()
        loss.backward()
        real = torch.cat([p.grad.flatten() for p in params])
        assert torch.allclose(real, parts["full"], atol=1e-6)
        deltas = tracker.deltas(parts, parts["full"])
        before = torch.cat([p.detach().flatten() for p in params])
        opt.step()
        after = torch.cat([p.detach().flatten() for p in params])
        assert torch.allclose(sum(deltas.values()), after - before, atol=1e-6), step
    if kw.get("myopic"):  # no later position's loss reaches r_3 through attention: nothing is pre-cached
        assert parts["pre_cached"].abs().max() < 1e-7
    else:
        assert parts["pre_cached"].abs().max() > 1e-5 and parts["direct"].abs().max() > 1e-5


def test_detach_at_the_last_layer_leaves_nothing_pre_cached():
    """The last block's output at position i is read only by position i's own head: pre-cached is 0 there."""
    lm, tokens = tiny(), torch.randint(0, 4, (4, 8))
    parts = split_gradient(lm, tokens, layer=2, position=3)
    assert parts["pre_cached"].abs().max() < 1e-7 and parts["direct"].abs().max() > 1e-5


def test_probe_risk_is_zero_at_the_frozen_model_and_set_grads_roundtrips():
    lm, tokens = tiny(myopic=True), torch.randint(0, 4, (4, 8))
    w = torch.randn(3, 16)
    with torch.no_grad():
        target = lm(tokens)[1][1, :, 2] @ w.T
    assert probe_risk(lm, tokens, 1, 2, w, target).item() == pytest.approx(0.0, abs=1e-10)
    moved = copy.deepcopy(lm)
    params = list(moved.parameters())
    flat = torch.ones(sum(p.numel() for p in params))
    set_grads(params, flat)
    assert all(torch.equal(p.grad, torch.ones_like(p)) for p in params)
