"""Advantage estimators, hand-computed; GRPO equals TRL's group normalisation (TIPS' own estimator:
tests/unit/agentkit/tips/test_advantages.py)."""

import pytest
import torch

from agentkit.errors import AgentkitError
from agentkit.rl.advantages import ESTIMATORS, TurnRewards, dr_grpo, estimate, gae, grpo, rloo, turn_rloo


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


def naive_per_turn_index(batch, groups):
    """The biased construction verl #7244 describes: each turn index's reward centred among the group's
    trajectories at that index, then summed to go (A_ik = Σ_{j≥k} (r_ij − mean_j r))."""
    out = []
    for r, group in zip(batch, groups):
        peers = [b for b, g in zip(batch, groups) if g == group]
        centred = []
        for j, x in enumerate(r.turns):
            at_j = [p.turns[j] for p in peers if len(p.turns) > j]
            centred.append(x - sum(at_j) / len(at_j))
        out.append([sum(centred[k:]) for k in range(len(centred))])
    return out


def test_turn_rloo_by_hand():
    # q: a 3-turn trajectory (turns 0.2, 0.1, 0.7 → to go 1.0, 0.8, 0.7), a 2-turn (0.3, 0.0 → 0.3, 0.0), a 1-turn (1.0)
    batch = [TurnRewards(1.0, [0.2, 0.1, -0.3]), TurnRewards(0.0, [0.3, 0.0]), TurnRewards(1.0)]
    a = turn_rloo(batch, ["q"] * 3)
    assert a[0] == pytest.approx([1.0 - (0.3 + 1.0) / 2, 0.8 - 0.0, 0.7 - 0.0])
    assert a[1] == pytest.approx([0.3 - (1.0 + 1.0) / 2, 0.0 - 0.8])
    assert a[2] == pytest.approx([1.0 - (1.0 + 0.3) / 2])
    # discounted to go: turn 1 of the first is 0.2 + 0.5·0.1 + 0.25·0.7
    assert turn_rloo(batch, ["q"] * 3, gamma=0.5)[0][0] == pytest.approx(0.425 - (0.3 + 1.0) / 2)
    assert ESTIMATORS.get("turn_rloo") is turn_rloo


def test_turn_count_alone_does_not_move_the_advantage():
    """Two groups with the same outcomes, one answering at once and one after two tool turns whose (potential-
    based) shaping telescopes to the same return: equal mean advantage, turn by turn and per trajectory. Within a
    mixed group, the short and the long trajectories with equal returns get equal advantages too. The naive
    per-turn-index construction fails both: it charges the long ones the group's mean turn reward per extra turn."""
    short = [TurnRewards(1.0), TurnRewards(0.0), TurnRewards(1.0), TurnRewards(0.0)]
    long = [TurnRewards(1.0, [0.3, 0.2, -0.5]), TurnRewards(0.0, [0.1, 0.4, -0.5])]
    long += [TurnRewards(1.0, [0.2, 0.3, -0.5]), TurnRewards(0.0, [0.3, 0.2, -0.5])]
    batch, groups = short + long, ["a"] * 4 + ["b"] * 4
    a = turn_rloo(batch, groups)
    first = [x[0] for x in a]
    assert first[:4] == pytest.approx(first[4:])  # per trajectory: same outcome, same first-turn advantage
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    assert mean([x for row in a[:4] for x in row]) == pytest.approx(0.0)
    assert mean([x for row in a[4:] for x in row]) == pytest.approx(0.0)
    mixed = turn_rloo(short[:2] + long[:2], ["m"] * 4)
    assert mixed[0][0] == pytest.approx(mixed[2][0]) and mixed[1][0] == pytest.approx(mixed[3][0])
    assert mean([m[0] for m in mixed[:2]]) == pytest.approx(mean([m[0] for m in mixed[2:]]))
    naive = naive_per_turn_index(short[:2] + long[:2], ["m"] * 4)
    assert mean([m[0] for m in naive[:2]]) != pytest.approx(mean([m[0] for m in naive[2:]]), abs=0.05)
