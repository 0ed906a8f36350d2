"""TIPS' segment estimator, registered in ``agentkit.rl.advantages.ESTIMATORS`` as ``tips_segment`` (entry-point
group ``agentkit.advantages``, the way a third party adds one).

A_ik = c_final · z_g(R_i) + c_mid · z_{g,k}(s_ik) for turns k < T_i, and c_final · z_g(R_i) on the last turn, where
R_i is the outcome, s_ik turn k's shaping reward (``agentkit.tips.shaping``), z_g z-scores among the group and
z_{g,k} among the group's trajectories that reached turn k (population std; 0 when the std is under ε or one
trajectory is left).

Official variant: ``sgrpo`` z-scores a segment's mean token reward (its turn reward over its length); here the turn
reward itself is z-scored, so a long turn's credit is not diluted by its length.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from agentkit.rl.advantages import TurnRewards, by_group, check_batch, zscores


def tips_segment(
    batch: Sequence[TurnRewards],
    groups: Sequence[Hashable],
    final_coeff: float = 1.0,
    mid_coeff: float = 1.0,
    eps: float = 1e-6,
) -> list[list[float]]:
    """TIPS' segment estimator: the group z-score of the outcome on every turn, plus, on each turn that ended in a
    tool call, the z-score of its shaping reward among the group's trajectories at the same turn index.

    Args:
        batch: each trajectory's outcome and per-turn shaping rewards.
        groups: each trajectory's group (its question).
        final_coeff: c_final, the outcome term's weight.
        mid_coeff: c_mid, the shaping term's weight.
        eps: z-scores are 0 where the std is under it.

    Returns:
        Each trajectory's advantage per turn.

    Examples:
        >>> a = tips_segment([TurnRewards(1.0, [0.3, -0.1]), TurnRewards(0.0, [0.1, 0.0])], ["q", "q"])
        >>> [[round(x, 4) for x in row] for row in a]
        [[2.0, 1.0], [-2.0, -1.0]]
    """
    check_batch(batch, groups)
    out: list[list[float]] = [[] for _ in batch]
    for rows in by_group(groups).values():
        final = zscores({i: batch[i].outcome for i in rows}, eps)
        depth = max(len(batch[i].shaping) for i in rows)
        mid = [
            zscores({i: batch[i].shaping[k] for i in rows if k < len(batch[i].shaping) - 1}, eps)
            for k in range(depth - 1)
        ]
        for i in rows:
            n = len(batch[i].shaping)
            out[i] = [final_coeff * final[i] + (mid_coeff * mid[k][i] if k < n - 1 else 0.0) for k in range(n)]
    return out
