"""Turn-level potential-based reward shaping (TIPS, arXiv 2603.22293).

With the potentials Φ_0..Φ_{T-1} of a trajectory's states (``agentkit.tips.potentials``) and Φ_T = 0 after its
last turn (the terminal state), turn k gets

    r_k = α (γ Φ_k − Φ_{k-1})        k = 1..T,   plus the outcome R on turn T

on its last model token. The last turn's term is −αΦ_{T-1}: the terminal token gets R − αΦ_final. The
discounted return telescopes, Σ_k γ^{k-1} r_k = γ^{T-1} R − αΦ_0, so shaping changes a trajectory's return
only by a constant of its question (Φ_0 is the prompt's potential): the optimal policy is unchanged (Ng et al.
1999), while each turn is credited with how much it raised the teacher's belief in the gold answer.

α is fixed (``alpha``) or set per batch by the official controller (``adaptive``): α = target / mean |γΦ_k −
Φ_{k-1}| over the batch's tool turns, so the mean |turn reward| is ``target`` (official: the midpoint 0.11 of
[0.02, 0.2]). Or, the paper's variance-optimal mode (``variance_optimal``): the tool turns' shaping adds α·X to
a trajectory's return, X = γ^{T−1}Φ_{T−1} − Φ_0 (Φ_final − Φ_0 at γ = 1), and

    α = Cov(R, X) / Var(X)

over the batch is the control-variate coefficient that minimises Var(R − αX); it is smoothed across batches by an
EMA (α ← ema·α + (1 − ema)·α_batch, the first batch's taken as it is), and a batch whose X does not vary keeps
the last α. It is not clipped: a negative covariance gives a negative α, as the formula says. ``start_step`` / ``warmup_steps`` ramp α in linearly (the terminal term −αΦ_final uses the same
α, so the return keeps telescoping during warm-up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import annotated_types as at

from agentkit.agent.trajectory import Trajectory
from agentkit.config import NonNegFloat, NonNegInt, PosFloat, option
from agentkit.rl.advantages import TurnRewards
from agentkit.tips.potentials import ANSWER_TEMPLATE, Normalize, PotentialScorer


@dataclass
class ShapingConfig:
    """TIPS' potential-based shaping: Φ after each turn from the teacher, α and the schedule."""

    alpha: NonNegFloat = option(
        0.02, "the fixed scale α of the shaped rewards (release script: 0.02), used when adaptive is off"
    )
    adaptive: bool = option(
        True, "the official per-batch controller: α = target / mean |ΔΦ| over the batch's tool turns"
    )
    target: PosFloat = option(0.11, "the mean |α ΔΦ| the adaptive controller aims at")
    variance_optimal: bool = option(
        False,
        "the paper's variance-optimal α = Cov(R, Φ_final − Φ_0) / Var(Φ_final − Φ_0), EMA-smoothed (overrides adaptive)",
    )
    ema: Annotated[float, at.Interval(ge=0, lt=1)] = option(
        0.9, "the variance-optimal mode's EMA: the weight kept on the previous α"
    )
    gamma: Annotated[float, at.Interval(gt=0, le=1)] = option(1.0, "γ in γΦ_k − Φ_{k−1} (1 in the official code)")
    start_step: NonNegInt = option(0, "no shaping before this optimizer step")
    warmup_steps: NonNegInt = option(0, "after start_step, α ramps up linearly over this many steps")
    normalize: Normalize = option(
        "mean", "how the gold answer's token logprobs make Φ: mean (official) or sum (the paper's log Σ p)"
    )
    answer_template: str = option(
        ANSWER_TEMPLATE, "how a gold answer is written after a state ({answer}: the policy's answer tag)"
    )


def warmup_weight(step: int, start: int, warmup: int) -> float:
    """0 before ``start``, rising linearly to 1 over ``warmup`` steps.

    Examples:
        >>> [warmup_weight(s, 2, 4) for s in (0, 2, 3, 6, 9)]
        [0.0, 0.0, 0.25, 1.0, 1.0]
    """
    if step < start:
        return 0.0
    return 1.0 if warmup <= 0 else min(1.0, (step - start) / warmup)


def shaped_turns(potentials: Sequence[float], alpha: float, gamma: float) -> list[float]:
    """Potential-based turn rewards α(γΦ_k − Φ_{k-1}) for k = 1..T, with Φ_T = 0.

    Args:
        potentials: ``[Φ_0, …, Φ_{T-1}]``, the potential before each model turn.
        alpha: the shaping weight α.
        gamma: the discount γ.

    Returns:
        The T turn rewards.

    Examples:
        >>> shaped_turns([-4.0, -1.0], alpha=0.1, gamma=1.0)
        [0.30000000000000004, 0.1]
    """
    phis = [*potentials, 0.0]
    return [alpha * (gamma * phis[k] - phis[k - 1]) for k in range(1, len(phis))]


def discounted_return(turns: Sequence[float], gamma: float) -> float:
    """Σ_k γ^(k-1) r_k."""
    return sum(r * gamma**k for k, r in enumerate(turns))


def variance_optimal_alpha(
    potentials: Sequence[Sequence[float]], outcomes: Sequence[float], gamma: float = 1.0
) -> float | None:
    """Cov(R, X) / Var(X) over a batch, X = γ^{T−1}Φ_{T−1} − Φ_0 what the tool turns' shaping adds to the return
    per unit α; None when X does not vary (no tool turn, or every trajectory moved Φ alike).

    Args:
        potentials: each trajectory's ``[Φ_0, …, Φ_{T-1}]``.
        outcomes: each trajectory's outcome R.
        gamma: the discount γ.

    Returns:
        The batch's α, or None.

    Examples:
        >>> round(variance_optimal_alpha([[-4.0, -1.0], [-3.0, -3.0], [-2.0, 0.0]], [1.0, 0.0, 1.0]), 6)  # 5/14
        0.357143
    """
    xs = [gamma ** (len(p) - 1) * p[-1] - p[0] for p in potentials]
    n = len(xs)
    if n < 2:
        return None
    mx, mr = sum(xs) / n, sum(outcomes) / n
    var = sum((x - mx) ** 2 for x in xs) / n
    if var < 1e-12:
        return None
    return sum((x - mx) * (r - mr) for x, r in zip(xs, outcomes)) / n / var


class InfoPotentialShaper:
    """Per-turn TIPS rewards for a batch of trajectories: the teacher's potentials, α, and ``TurnRewards``.

    Args:
        teacher: any Engine (a lagged copy of the policy, or a fixed model).
        config: γ, α (fixed or adaptive), the warm-up, the answer template (default: ``ShapingConfig()``).
        policy_tokens: the policy engine, to tell whether the trajectories' ids can go to the teacher as they are.
    """

    def __init__(self, teacher, config: ShapingConfig | None = None, policy_tokens=None):
        self.config = config or ShapingConfig()
        self.scorer = PotentialScorer(
            teacher, self.config.normalize, self.config.answer_template, policy_tokens=policy_tokens
        )
        self.alpha_ema: float | None = None  # the variance-optimal mode's running α

    def alpha(self, potentials: Sequence[Sequence[float]], outcomes: Sequence[float] | None = None) -> float:
        """α for this batch (before the warm-up weight); the variance-optimal mode needs the ``outcomes`` R and
        updates its EMA."""
        c = self.config
        if c.variance_optimal:
            if outcomes is None:
                raise ValueError("variance_optimal: α needs the batch's outcomes")
            batch = variance_optimal_alpha(potentials, outcomes, c.gamma)
            if batch is not None:
                self.alpha_ema = batch if self.alpha_ema is None else c.ema * self.alpha_ema + (1 - c.ema) * batch
            return c.alpha if self.alpha_ema is None else self.alpha_ema
        if not c.adaptive:
            return c.alpha
        deltas = [abs(c.gamma * p[k] - p[k - 1]) for p in potentials for k in range(1, len(p))]
        deltas = [d for d in deltas if d > 1e-8]
        if not deltas:  # no tool turn in the batch: nothing to scale; keep the fixed α for the terminal term
            return c.alpha
        return c.target / (sum(deltas) / len(deltas))

    def potentials(self, trajectories: Sequence[Trajectory], answers: Sequence[Sequence[str]]) -> list[list[float]]:
        """Φ of each trajectory's states (``PotentialScorer.potentials``)."""
        return self.scorer.potentials(trajectories, answers)

    def shape(
        self, potentials: Sequence[Sequence[float]], outcomes: Sequence[float], step: int = 0
    ) -> tuple[list[TurnRewards], dict[str, float]]:
        """(rewards per trajectory, batch statistics: alpha, mean |ΔΦ| of tool turns, mean Φ_0, mean Φ_final,
        mean shaped return). Under data parallelism each process scores its own trajectories and this runs on
        the gathered potentials, so α is the whole batch's."""
        c = self.config
        weight = warmup_weight(step, c.start_step, c.warmup_steps)
        alpha = self.alpha(potentials, outcomes) * weight
        rewards = [TurnRewards(r, shaped_turns(p, alpha, c.gamma)) for p, r in zip(potentials, outcomes)]
        deltas = [abs(c.gamma * p[k] - p[k - 1]) for p in potentials for k in range(1, len(p))]
        n = max(1, len(potentials))
        stats = {
            "alpha": alpha,
            "delta_phi_abs": sum(deltas) / len(deltas) if deltas else 0.0,
            "phi_0": sum(p[0] for p in potentials) / n,
            "phi_final": sum(p[-1] for p in potentials) / n,
            "shaped_return": sum(discounted_return(r.turns, c.gamma) for r in rewards) / n,
        }
        return rewards, stats

    def __call__(
        self,
        trajectories: Sequence[Trajectory],
        answers: Sequence[Sequence[str]],
        outcomes: Sequence[float],
        step: int = 0,
    ) -> tuple[list[TurnRewards], dict[str, float]]:
        """``shape(potentials(trajectories, answers), outcomes, step)``."""
        return self.shape(self.potentials(trajectories, answers), outcomes, step)
