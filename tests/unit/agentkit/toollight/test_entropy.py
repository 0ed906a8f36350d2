"""agentkit.toollight.entropy: boundary profile and chain entropy against hand-computed values."""

import pytest


def _traj(parts):
    """A trajectory from (kind, entropies) parts; token ids are placeholders of the right length."""
    from agentkit.agent.trajectory import Segment, Trajectory

    segs = [Segment(kind, "", [0] * len(h), entropies=h if kind == "model" else None) for kind, h in parts]
    return Trajectory("t", [], [], segs)


def test_entropy_profile_and_chain_entropy_by_hand():
    from agentkit.toollight.entropy import boundary_profile, entropy_by_tool_calls, step_score, window_means

    a = _traj([("model", [1.0, 2.0, 3.0]), ("tool", [0, 0]), ("model", [5.0, 4.0])])
    b = _traj([("model", [1.0]), ("tool", [0]), ("model", [3.0, 2.0, 1.0]), ("tool", [0]), ("model", [7.0])])
    c = _traj([("model", [0.5, 0.5])])
    prof = boundary_profile([a, b, c], k=2)
    # before: position -2 has a's 2.0 and b's second turn 2.0; -1 has 3.0, 1.0 and 1.0
    assert prof["before"] == pytest.approx([2.0, 5 / 3]) and prof["before_count"] == [2, 3]
    # after: +1 has 5.0, 3.0, 7.0; +2 has 4.0, 2.0
    assert prof["after"] == pytest.approx([5.0, 3.0]) and prof["after_count"] == [3, 2]
    w = window_means(prof, (1, 2))
    assert w["before_1"] == pytest.approx(5 / 3) and w["after_2"] == pytest.approx((15 + 6) / 5)
    groups = entropy_by_tool_calls([a, b, c])
    assert groups[0]["mean"] == 0.5 and groups[1]["mean"] == pytest.approx(3.0) and groups[2]["n"] == 1
    assert step_score([]) == (float("-inf"), 0) and step_score([2.0, 0.0]) == (1.0, 2)
