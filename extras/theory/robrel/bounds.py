"""The range of a reward functional over the rewards that feedback leaves feasible, exactly (LP) and from samples.

Feedback leaves a feasible set of rewards r ∈ [0, 1]^{H×S×A}:

- a demonstration by π_E with slack t: :math:`\\max_\\pi J^\\pi(r) - \\langle d^{\\pi_E}, r \\rangle \\le t`;
- comparisons (trajectory τ₁ ≻ τ₂, or policy π₁ ≻ π₂): :math:`\\langle g, r \\rangle \\ge 0` with g = φ(τ₁) − φ(τ₂)
  (visit counts) or d^{π₁} − d^{π₂}.

For a target functional :math:`\\langle c, r \\rangle` (Rob-ReL: c = d^{π₁} − d^{π₂}, how much better π₁ is), m and M
are its minimum and maximum over that set. Rob-ReL answers x = (M + m)/2 with the certificate I = (M − m)/2: no
feasible reward is further than I from x, while a single feasible reward (what IRL returns) can be up to 2I off.

**Exact.** The demonstration constraint is linear in (r, V) once the optimal value is written as an LP: V is any
upper bound of the optimal values, :math:`V_h(s) \\ge r_h(s, a) + P_h(\\cdot \\mid s, a)^\\top V_{h+1}`, and
:math:`\\mu^\\top V_1 - \\langle d^{\\pi_E}, r \\rangle \\le t` then holds for some V exactly when it holds for V*.
``exact_bounds`` solves the two LPs with ``scipy.optimize.linprog`` (HiGHS).

**From samples** (the paper's estimator [unverified]: a primal–dual projected subgradient method with dynamic
programming inside). With P̂ and d̂^{π_E} estimated from trajectories, ``primal_dual_bound`` runs projected
subgradient ascent on r and descent on the multipliers λ ≥ 0 of

.. math::
    L(r, \\lambda) = \\pm\\langle c, r \\rangle - \\lambda_0\\,(V^*_{\\hat P}(r) - \\langle \\hat d^{\\pi_E}, r \\rangle - t)
    + \\sum_k \\lambda_k \\langle g_k, r \\rangle,

where the subgradient of the convex :math:`V^*(r)` is the occupancy of a greedy optimal policy (``mdp.optimal``).
Steps shrink as η/√k and the answer is the target at the averaged iterate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agentkit.extras.theory.robrel.mdp import MDP, optimal


@dataclass
class Feedback:
    """What constrains the reward: a demonstration's occupancy ``demo`` with slack ``t`` (None: no demonstration),
    and comparison vectors ``comparisons`` (each g with ⟨g, r⟩ ≥ 0)."""

    demo: np.ndarray | None = None
    t: float = 0.0
    comparisons: list[np.ndarray] = field(default_factory=list)


def feasible_reward(mdp: MDP, feedback: Feedback, cost: np.ndarray) -> np.ndarray:
    """The feasible reward that minimises ⟨cost, r⟩ (an LP vertex), by ``scipy.optimize.linprog`` (HiGHS).

    Args:
        mdp: the MDP whose transitions enter the Bellman inequalities.
        feedback: the demonstration and comparisons.
        cost: the objective, shaped like a reward.

    Returns:
        The reward ``r[h, s, a]``.

    Raises:
        ValueError: the feedback leaves no feasible reward.
    """
    from scipy.optimize import linprog

    H, S, A = mdp.shape
    nr, nv = H * S * A, H * S
    rows, rhs = [], []
    if feedback.demo is not None:
        for h in range(H):  # r_h(s,a) + P_h(s,a,·)·V_{h+1} − V_h(s) ≤ 0
            for s in range(S):
                for a in range(A):
                    row = np.zeros(nr + nv)
                    row[(h * S + s) * A + a] = 1.0
                    row[nr + h * S + s] = -1.0
                    if h + 1 < H:
                        row[nr + (h + 1) * S : nr + (h + 2) * S] = mdp.P[h, s, a]
                    rows.append(row)
                    rhs.append(0.0)
        row = np.zeros(nr + nv)  # μ·V_1 − ⟨d_E, r⟩ ≤ t
        row[nr : nr + S] = mdp.mu
        row[:nr] = -feedback.demo.ravel()
        rows.append(row)
        rhs.append(feedback.t)
    for g in feedback.comparisons:  # −⟨g, r⟩ ≤ 0
        rows.append(np.concatenate([-g.ravel(), np.zeros(nv)]))
        rhs.append(0.0)
    bounds = [(0.0, 1.0)] * nr + [(None, None)] * nv
    objective = np.concatenate([cost.ravel(), np.zeros(nv)])
    res = linprog(objective, A_ub=np.array(rows) if rows else None, b_ub=rhs or None, bounds=bounds, method="highs")
    if res.status != 0:
        raise ValueError(f"the feedback leaves no feasible reward ({res.message})")
    return res.x[:nr].reshape(H, S, A)


def exact_bounds(mdp: MDP, feedback: Feedback, c: np.ndarray) -> tuple[float, float]:
    """(m, M): the minimum and maximum of ⟨c, r⟩ over the feasible rewards, by linear programming
    (``feasible_reward`` with the costs c and −c).

    Raises:
        ValueError: the feedback leaves no feasible reward.
    """
    lo, hi = feasible_reward(mdp, feedback, c), feasible_reward(mdp, feedback, -c)
    return float((c * lo).sum()), float((c * hi).sum())


def primal_dual_bound(
    mdp: MDP,
    feedback: Feedback,
    c: np.ndarray,
    maximize: bool,
    steps: int = 3000,
    lr: float = 0.5,
) -> float:
    """The minimum (``maximize=False``) or maximum of ⟨c, r⟩ over the feasible rewards of ``mdp`` (an estimated
    one, from samples), by the primal–dual subgradient method of the module docstring.

    Args:
        mdp: the MDP the optimal values are computed in (P̂, μ̂ from samples).
        feedback: the demonstration (its estimated occupancy) and comparisons.
        c: the target functional.
        maximize: which bound.
        steps: iterations.
        lr: the initial step η (steps η/√k).

    Returns:
        The target at the averaged reward.
    """
    sign = 1.0 if maximize else -1.0
    r = np.full(c.shape, 0.5)
    lam_demo, lam = 0.0, np.zeros(len(feedback.comparisons))
    avg = np.zeros_like(r)
    for k in range(1, steps + 1):
        eta = lr / np.sqrt(k)
        grad = sign * c + sum((lk * g for lk, g in zip(lam, feedback.comparisons)), np.zeros_like(r))
        if feedback.demo is not None:
            value, d_star = optimal(mdp, r)
            grad = grad - lam_demo * (d_star - feedback.demo)
            lam_demo = max(0.0, lam_demo + eta * (value - float((feedback.demo * r).sum()) - feedback.t))
        lam = np.maximum(0.0, lam - eta * np.array([float((g * r).sum()) for g in feedback.comparisons]))
        r = np.clip(r + eta * grad, 0.0, 1.0)
        avg += (r - avg) / k
    return float((c * avg).sum())
