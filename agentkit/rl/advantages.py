"""Advantage estimators for multi-turn agent RL: per-turn rewards of groups of trajectories -> per-turn advantages.

A trajectory's model turns are k = 1..T (turn k: the model's text up to its tool call, or its final answer). Its
rewards (``TurnRewards``) are the outcome R (format + EM/F1 of the final answer) and a shaping term per turn
(TIPS: α(γΦ_k − Φ_{k−1}), with Φ_T = 0 after the last turn; all zeros for outcome-only RL). The reward of turn k
sits on its last model token; R is added to the last turn's. An estimator returns one advantage per turn, which
the trainer gives to every model token of that turn (tool-result tokens carry none). Trajectories of one group
answered the same question.

Registered estimators (``ESTIMATORS``; third parties add theirs under the entry-point group
``agentkit.advantages``), each ``fn(batch, groups, **options) -> list[list[float]]``:

- ``grpo`` (outcome GRPO, DeepSeekMath): A_i = (G_i − mean_g G) / (std_g G + 1e-4) on every turn, G_i the
  trajectory's return Σ_k r_ik; the std is Bessel-corrected and ε = 1e-4, exactly TRL's ``scale_rewards="group"``.
- ``dr_grpo`` (Dr. GRPO, arXiv 2503.20783): A_i = G_i − mean_g G, no division by the std.
- ``rloo`` (REINFORCE leave-one-out, Ahmadian et al. 2024; TRL's ``RLOOTrainer``): A_i = G_i − mean_{j≠i} G_j, the
  baseline of each trajectory the mean return of the others in its group (= k/(k−1)·(G_i − mean_g G) for k members;
  a lone trajectory gets 0).
- ``turn_rloo`` (per turn): A_ik = G_ik − b_ik, G_ik = Σ_{j≥k} γ^{j−k} r_ij the reward to go from turn k, b_ik the
  mean reward to go from turn k of the *other* trajectories of the group that reached turn k (0 where none did).
  The baseline has one term whatever the trajectory's length (see ``turn_rloo``: verl #7244's bias).
- ``tips_segment`` (TIPS' ``sgrpo``), registered by TIPS through the entry-point group: ``agentkit.tips.advantages``.

Under potential-based shaping the return is G_i = R_i − αΦ_0 (``agentkit.tips.shaping``) and Φ_0 is the same
for a group, so ``grpo`` / ``dr_grpo`` on shaped rewards equal them on the outcome alone: shaping reaches the
gradient only through a per-turn estimator such as ``tips_segment``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from agentkit.registry import Registry

Estimator = Callable[..., list[list[float]]]
ESTIMATORS: Registry[Estimator] = Registry("advantage estimator", group="agentkit.advantages")
for _name in ("grpo", "dr_grpo", "rloo", "turn_rloo"):
    ESTIMATORS.register(_name, f"agentkit.rl.advantages:{_name}")


@dataclass
class TurnRewards:
    """One trajectory's rewards: ``outcome`` R and ``shaping[k]`` for each of its T model turns (T ≥ 1)."""

    outcome: float
    shaping: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.shaping:
            self.shaping = [0.0]

    @property
    def turns(self) -> list[float]:
        """The reward on each turn's last token: its shaping term, plus R on the last turn."""
        return [*self.shaping[:-1], self.shaping[-1] + self.outcome]

    @property
    def total(self) -> float:
        return sum(self.turns)


def by_group(groups: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    """Each group's trajectory indices, in order."""
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        members[g].append(i)
    return members


def check_batch(batch: Sequence[TurnRewards], groups: Sequence[Hashable]) -> None:
    """One group id per trajectory (an estimator's first check)."""
    if len(batch) != len(groups):
        raise ValueError(f"{len(batch)} trajectories but {len(groups)} group ids")


def grpo(batch: Sequence[TurnRewards], groups: Sequence[Hashable], eps: float = 1e-4) -> list[list[float]]:
    """Group-normalised return on every turn.

    Args:
        batch: each trajectory's rewards.
        groups: each trajectory's group (its question): normalised among equals.
        eps: added to the group's std (TRL's 1e-4).

    Returns:
        Each trajectory's advantage per turn (the same on each of its turns).

    Examples:
        >>> [round(a[0], 4) for a in grpo([TurnRewards(1.0), TurnRewards(0.0), TurnRewards(0.5)], ["q", "q", "q"])]
        [0.9998, -0.9998, 0.0]
    """
    check_batch(batch, groups)
    out: list[list[float]] = [[] for _ in batch]
    for rows in by_group(groups).values():
        g = [batch[i].total for i in rows]
        mean = sum(g) / len(g)
        std = math.sqrt(sum((x - mean) ** 2 for x in g) / (len(g) - 1)) if len(g) > 1 else 0.0
        for i, x in zip(rows, g):
            out[i] = [(x - mean) / (std + eps)] * len(batch[i].shaping)
    return out


def dr_grpo(batch: Sequence[TurnRewards], groups: Sequence[Hashable]) -> list[list[float]]:
    """Return minus its group mean, on every turn.

    Args:
        batch: each trajectory's rewards.
        groups: each trajectory's group (its question).

    Returns:
        Each trajectory's advantage per turn (the same on each of its turns).

    Examples:
        >>> dr_grpo([TurnRewards(1.0, [0.0, 0.0]), TurnRewards(0.0)], ["q", "q"])
        [[0.5, 0.5], [-0.5]]
    """
    check_batch(batch, groups)
    out: list[list[float]] = [[] for _ in batch]
    for rows in by_group(groups).values():
        mean = sum(batch[i].total for i in rows) / len(rows)
        for i in rows:
            out[i] = [batch[i].total - mean] * len(batch[i].shaping)
    return out


def rloo(batch: Sequence[TurnRewards], groups: Sequence[Hashable]) -> list[list[float]]:
    """Return minus the mean return of the other trajectories of its group, on every turn.

    Args:
        batch: each trajectory's rewards.
        groups: each trajectory's group (its question).

    Returns:
        Each trajectory's advantage per turn (the same on each of its turns; 0 for a group of one).

    Examples:
        >>> rloo([TurnRewards(1.0), TurnRewards(0.0), TurnRewards(0.5, [0.0, 0.0])], ["q", "q", "q"])
        [[0.75], [-0.75], [0.0, 0.0]]
    """
    check_batch(batch, groups)
    out: list[list[float]] = [[] for _ in batch]
    for rows in by_group(groups).values():
        total = sum(batch[i].total for i in rows)
        for i in rows:
            others = (total - batch[i].total) / (len(rows) - 1) if len(rows) > 1 else batch[i].total
            out[i] = [batch[i].total - others] * len(batch[i].shaping)
    return out


def turn_rloo(batch: Sequence[TurnRewards], groups: Sequence[Hashable], gamma: float = 1.0) -> list[list[float]]:
    r"""Per-turn advantages with a leave-one-out baseline per turn index, which stays unbiased when the policy
    decides how many turns it takes.

    .. math::
        A_{ik} = G_{ik} - b_{ik},\qquad G_{ik} = \sum_{j \ge k} \gamma^{j-k} r_{ij},\qquad
        b_{ik} = \operatorname{mean}_{m \ne i,\ T_m \ge k} G_{mk}\quad(0 \text{ if no other reached turn } k)

    The bias this avoids (verl #7244): normalising each turn index's reward among the group and then summing the
    normalised rewards to go, A_ik = Σ_{j≥k} (r_ij − mean_j r), subtracts one group mean per remaining turn, so the
    baseline has T_i − k + 1 terms and depends on the trajectory's own stopping turn: an action-dependent baseline
    that charges every "take another turn" decision the group's mean turn reward. Here a trajectory's own future
    decides G_ik only; b_ik is built from the other trajectories' samples (each already at turn k, as trajectory i
    is), independent of trajectory i's actions from turn k on, so E[∇log π · b] = 0. Trajectories that differ
    only in how many turns they take (same rewards to go) get the same advantage (tested).

    Args:
        batch: each trajectory's rewards (``TurnRewards.turns``: shaping per turn, plus R on the last).
        groups: each trajectory's group (its question).
        gamma: discount per turn.

    Returns:
        Each trajectory's advantage per turn.

    Examples:
        >>> a = turn_rloo([TurnRewards(1.0, [0.5, -0.5]), TurnRewards(0.0), TurnRewards(1.0)], ["q", "q", "q"])
        >>> a  # turn 1: G = 1, 0, 1 against the others' mean; turn 2: only the first got there (baseline 0)
        [[0.5, 0.5], [-1.0], [0.5]]
    """
    check_batch(batch, groups)
    togo = []
    for r in batch:
        g, acc = [0.0] * len(r.turns), 0.0
        for k in reversed(range(len(r.turns))):
            acc = r.turns[k] + gamma * acc
            g[k] = acc
        togo.append(g)
    out: list[list[float]] = [[] for _ in batch]
    for rows in by_group(groups).values():
        for i in rows:
            adv = []
            for k, g in enumerate(togo[i]):
                others = [togo[m][k] for m in rows if m != i and len(togo[m]) > k]
                adv.append(g - (sum(others) / len(others) if others else 0.0))
            out[i] = adv
    return out


def gae(
    rewards: Sequence[float], values: Sequence[float], model: Sequence[bool], gamma: float = 1.0, lam: float = 0.95
) -> tuple[list[float], list[float]]:
    r"""Generalised advantage estimation over the model's tokens of one trajectory only.

    Tool-result (and prompt) tokens are not actions: they get no advantage and no value target, and GAE runs over
    the model tokens as if the others were not there, the value of the next model token bootstrapping the last
    token of a turn (the tool's answer is part of the transition). With t, t' consecutive model tokens,

    .. math::
        \delta_t = r_t + \gamma V_{t'} - V_t,\qquad A_t = \delta_t + \gamma\lambda A_{t'},\qquad
        \hat R_t = A_t + V_t,

    V after the last model token 0, as TRL's PPO (``PPOTrainer``: ``lastgaelam``, ``returns = advantages +
    values``).

    Args:
        rewards: per token (e.g. a turn's reward on its last model token, 0 elsewhere).
        values: the critic's value per token (read only at model tokens).
        model: whether each token is the model's.
        gamma: discount per model token.
        lam: GAE's λ.

    Returns:
        (advantages, value targets) per token, 0.0 at tokens that are not the model's.

    Examples:
        >>> adv, ret = gae([0, 1, 0, 2], [0.5, 0.5, 9.0, 1.0], [True, True, False, True], gamma=1.0, lam=1.0)
        >>> adv, ret  # the tool token (V = 9) is skipped; A is the return to go minus V
        ([2.5, 2.5, 0.0, 1.0], [3.0, 3.0, 0.0, 2.0])
    """
    if not len(rewards) == len(values) == len(model):
        raise ValueError(
            f"rewards, values and model flags differ in length: {len(rewards)}, {len(values)}, {len(model)}"
        )
    adv = [0.0] * len(rewards)
    ret = [0.0] * len(rewards)
    next_value, next_adv = 0.0, 0.0
    for t in reversed(range(len(rewards))):
        if not model[t]:
            continue
        delta = rewards[t] + gamma * next_value - values[t]
        next_adv = delta + gamma * lam * next_adv
        adv[t], ret[t] = next_adv, next_adv + values[t]
        next_value = values[t]
    return adv, ret


def zscores(values: dict[int, float], eps: float) -> dict[int, float]:
    """z-scores with the population std; all 0 with fewer than two values or a std under ``eps``."""
    if len(values) < 2:
        return dict.fromkeys(values, 0.0)
    mean = sum(values.values()) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values.values()) / len(values))
    return {i: 0.0 if std < eps else (v - mean) / (std + eps) for i, v in values.items()}


def estimate(name: str, batch: Sequence[TurnRewards], groups: Sequence[Hashable], **options) -> list[list[float]]:
    """Per-turn advantages by a registered estimator.

    Args:
        name: the estimator (``ESTIMATORS``: grpo, dr_grpo, tips_segment, third parties').
        batch: each trajectory's rewards.
        groups: each trajectory's group (its question).
        **options: the estimator's own options (``eps``, ``final_coeff``…).

    Returns:
        Each trajectory's advantage per turn.

    Raises:
        AgentkitError: an unknown name, with a did-you-mean.
    """
    return ESTIMATORS.get(name)(batch, groups, **options)
