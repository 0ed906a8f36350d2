"""Advantage estimators, hand-computed; GRPO equals TRL's group normalisation; shaping reaches the gradient
only through the per-turn estimator."""

import pytest
import torch

from agentkit.errors import AgentkitError
from agentkit.rl.advantages import ESTIMATORS, TurnRewards, dr_grpo, estimate, grpo, tips_segment


def test_registered():
    assert {"grpo", "dr_grpo", "tips_segment"} <= set(ESTIMATORS.names())
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


def test_tips_segment_by_hand():
    """Group of three: outcome z-scores on every turn; the first turn's shaping z-scored among the three, the
    second turn's among the two that reached it (the third answered after one call)."""
    batch = [
        TurnRewards(1.0, [0.2, 0.1, -0.3]),
        TurnRewards(0.0, [0.0, -0.1, 0.1]),
        TurnRewards(1.0, [0.1, 0.5]),
    ]
    got = tips_segment(batch, ["q"] * 3, eps=1e-12)
    z_out = [0.7071067811865476, -1.4142135623730951, 0.7071067811865476]  # population std of (1, 0, 1)
    z_turn1 = [1.224744871391589, -1.224744871391589, 0.0]  # (0.2, 0.0, 0.1)
    z_turn2 = [1.0, -1.0]  # (0.1, -0.1)
    want = [
        [z_out[0] + z_turn1[0], z_out[0] + z_turn2[0], z_out[0]],
        [z_out[1] + z_turn1[1], z_out[1] + z_turn2[1], z_out[1]],
        [z_out[2] + z_turn1[2], z_out[2]],
    ]
    for g, w in zip(got, want):
        assert g == pytest.approx(w, abs=1e-9)
    lone = tips_segment([TurnRewards(1.0, [0.3, 0.0])], ["solo"])  # one trajectory: no signal
    assert lone == [[0.0, 0.0]]


def test_potential_shaping_cancels_in_outcome_grpo():
    """With PBRS the return is R − αΦ_0 and Φ_0 is shared by a group: outcome GRPO sees the same advantages."""
    outcomes, alpha, phi0 = [1.4, 0.0, 0.4, 1.4], 0.1, -3.0
    firsts = [[0.05, -0.02], [0.3], [-0.1, 0.0, 0.2], []]
    # each trajectory's last turn closes its return to R − αΦ_0, as potential-based shaping does
    shaped = [TurnRewards(r, [*f, -alpha * phi0 - sum(f)]) for r, f in zip(outcomes, firsts)]
    plain = [TurnRewards(r) for r in outcomes]
    assert [a[0] for a in grpo(shaped, ["q"] * 4)] == pytest.approx([a[0] for a in grpo(plain, ["q"] * 4)])
    assert [a[0] for a in tips_segment(shaped, ["q"] * 4)] != pytest.approx([a[0] for a in grpo(plain, ["q"] * 4)])


def test_mismatched_lengths():
    with pytest.raises(ValueError, match="group ids"):
        grpo([TurnRewards(1.0)], [])
