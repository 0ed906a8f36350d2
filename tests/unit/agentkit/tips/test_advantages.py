"""TIPS' segment estimator: registered through the entry-point group, hand-computed, and the only way shaping
reaches the gradient (outcome GRPO cancels potential-based shaping)."""

import pytest

from agentkit.rl.advantages import ESTIMATORS, TurnRewards, estimate, grpo
from agentkit.tips.advantages import tips_segment


def test_registered_through_the_entry_point_group():
    assert ESTIMATORS.target("tips_segment") == "agentkit.tips.advantages:tips_segment"
    assert ESTIMATORS.get("tips_segment") is tips_segment
    batch = [TurnRewards(1.0, [0.2, 0.0]), TurnRewards(0.0, [0.0, 0.0])]
    assert estimate("tips_segment", batch, ["q", "q"]) == tips_segment(batch, ["q", "q"])


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
