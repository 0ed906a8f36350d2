"""Advantage estimators, hand-computed; GRPO equals TRL's group normalisation (TIPS' own estimator:
tests/unit/agentkit/tips/test_advantages.py)."""

import pytest
import torch

from agentkit.errors import AgentkitError
from agentkit.rl.advantages import ESTIMATORS, TurnRewards, dr_grpo, estimate, gae, grpo, rloo


def test_registered():
    assert {"grpo", "dr_grpo", "rloo"} <= set(ESTIMATORS.names())
    with pytest.raises(AgentkitError, match="did you mean 'grpo'"):
        estimate("gpro", [TurnRewards(1.0)], ["q"])


def test_grpo_equals_trl_group_normalisation():
    from trl.trainer.utils import nanstd

    rewards = torch.tensor([1.4, 0.4, 0.0, 1.4, 0.0, 0.4, 0.4, 0.4])
    groups = [0, 0, 0, 0, 1, 1, 1, 1]
    got = grpo([TurnRewards(float(x), [0.0, 0.0]) for x in rewards], groups)
    grouped = rewards.view(-1, 4)
    want = (grouped - grouped.mean(1, keepdim=True)) / (nanstd(grouped, dim=1, keepdim=True) + 1e-4)
    assert [a[0] for a in got] == pytest.approx(want.flatten().tolist(), abs=1e-6)
    assert all(len(a) == 2 and a[0] == a[1] for a in got)
    assert all(abs(a[0]) < 1e-9 for a in grpo([TurnRewards(0.4)] * 3, ["q"] * 3))  # equal rewards: no signal


def test_dr_grpo_centres_only():
    got = dr_grpo([TurnRewards(1.0), TurnRewards(0.0), TurnRewards(0.5), TurnRewards(2.0)], ["a", "a", "a", "b"])
    assert got == [[0.5], [-0.5], [0.0], [0.0]]


def test_mismatched_lengths():
    with pytest.raises(ValueError, match="group ids"):
        grpo([TurnRewards(1.0)], [])


def test_rloo_leave_one_out_baseline():
    """Group a: returns 1, 0, 0.5, so the others' means are 0.25, 0.75 and 0.5; group b has one trajectory and no
    baseline to compare with (0). Equal to k/(k−1)·(G − mean) with k = 3 and mean 0.5."""
    batch = [TurnRewards(1.0), TurnRewards(0.0), TurnRewards(0.5, [0.0, 0.0]), TurnRewards(2.0)]
    got = rloo(batch, ["a", "a", "a", "b"])
    assert got == [[0.75], [-0.75], [0.0, 0.0], [0.0]]
    assert [a[0] for a in got[:3]] == pytest.approx([1.5 * (g - 0.5) for g in (1.0, 0.0, 0.5)])
    assert estimate("rloo", batch, ["a", "a", "a", "b"]) == got


def test_gae_on_a_three_turn_trajectory_by_hand():
    """Tokens: turn 1 (model, model), tool result (2 tokens), turn 2 (model), tool result, turn 3 (model, model);
    turn rewards 0.1, 0.2, 1.0 on each turn's last token; the critic's values on the tool tokens (5.0) must not be
    read. γ = 0.9, λ = 0.8, over the model tokens 0, 1, 4, 6, 7 only:

    t=7: δ = 1.0 − 0.8 = 0.2,                 A = 0.2
    t=6: δ = 0.9·0.8 − 0.7 = 0.02,            A = 0.02 + 0.72·0.2 = 0.164
    t=4: δ = 0.2 + 0.9·0.7 − 0.6 = 0.23,      A = 0.23 + 0.72·0.164 = 0.34808
    t=1: δ = 0.1 + 0.9·0.6 − 0.5 = 0.14,      A = 0.14 + 0.72·0.34808 = 0.3906176
    t=0: δ = 0.9·0.5 − 0.4 = 0.05,            A = 0.05 + 0.72·0.3906176 = 0.33124467…

    and the value targets A + V."""
    model = [True, True, False, False, True, False, True, True]
    rewards = [0.0, 0.1, 0.0, 0.0, 0.2, 0.0, 0.0, 1.0]
    values = [0.4, 0.5, 5.0, 5.0, 0.6, 5.0, 0.7, 0.8]
    adv, ret = gae(rewards, values, model, gamma=0.9, lam=0.8)
    want = [0.33124467, 0.3906176, 0.0, 0.0, 0.34808, 0.0, 0.164, 0.2]
    assert adv == pytest.approx(want, abs=1e-8)
    assert ret == pytest.approx([a + v if m else 0.0 for a, v, m in zip(want, values, model)], abs=1e-8)
    # λ = γ = 1: the advantage is the return to go minus the value, whatever the tool tokens hold
    adv1, _ = gae(rewards, values, model, gamma=1.0, lam=1.0)
    togo = [sum(r for r, m in zip(rewards[t:], model[t:]) if m) for t in range(len(rewards))]
    assert adv1 == pytest.approx([g - v if m else 0.0 for g, v, m in zip(togo, values, model)])
    with pytest.raises(ValueError, match="differ in length"):
        gae([0.0], [0.0, 1.0], [True])
