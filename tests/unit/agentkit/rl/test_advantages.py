"""Advantage estimators, hand-computed; GRPO equals TRL's group normalisation (TIPS' own estimator:
tests/unit/agentkit/tips/test_advantages.py)."""

import pytest
import torch

from agentkit.errors import AgentkitError
from agentkit.rl.advantages import ESTIMATORS, TurnRewards, dr_grpo, estimate, grpo


def test_registered():
    assert {"grpo", "dr_grpo"} <= set(ESTIMATORS.names())
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
