"""Finite-horizon tabular MDPs: occupancy measures, optimal values by dynamic programming, and sampled feedback.

A reward is an array ``r[h, s, a]`` in [0, 1] (H × S × A) and a policy ``pi[h, s, a]`` a distribution over actions
per stage and state. The occupancy measure of π,

.. math::
    d^\\pi_1(s, a) = \\mu(s)\\,\\pi_1(a \\mid s), \\qquad
    d^\\pi_{h+1}(s', a') = \\pi_{h+1}(a' \\mid s') \\sum_{s, a} d^\\pi_h(s, a)\\, P_h(s' \\mid s, a),

makes the return linear in the reward, :math:`J^\\pi(r) = \\langle d^\\pi, r \\rangle`. The optimal return is
:math:`\\max_\\pi J^\\pi(r) = \\mu^\\top V^*_1` with :math:`V^*_h(s) = \\max_a r_h(s, a) + P_h(\\cdot \\mid s, a)^\\top V^*_{h+1}`,
:math:`V^*_{H+1} = 0`; as a maximum of linear functions of r it is convex in r, and the occupancy of a greedy
optimal policy is a subgradient of it (what the primal–dual solver of ``bounds`` uses).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MDP:
    """Transitions ``P[h, s, a, s']`` (H × S × A × S) and the initial distribution ``mu[s]``."""

    P: np.ndarray
    mu: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int]:
        """(H, S, A)."""
        H, S, A, _ = self.P.shape
        return H, S, A

    @classmethod
    def random(cls, S: int, A: int, H: int, seed: int = 0) -> MDP:
        """Transitions and initial distribution drawn from a flat Dirichlet, stage by stage.

        >>> MDP.random(3, 2, 4).shape
        (4, 3, 2)
        """
        rng = np.random.default_rng(seed)
        return cls(rng.dirichlet(np.ones(S), size=(H, S, A)), rng.dirichlet(np.ones(S)))


def random_policy(mdp: MDP, seed: int = 0, sharp: float = 1.0) -> np.ndarray:
    """A stochastic policy ``pi[h, s, a]``: Dirichlet(``sharp``) per stage and state (small ``sharp``: nearly
    deterministic)."""
    H, S, A = mdp.shape
    return np.random.default_rng(seed).dirichlet(np.full(A, sharp), size=(H, S))


def occupancy(mdp: MDP, pi: np.ndarray) -> np.ndarray:
    """The occupancy measure ``d[h, s, a]`` of ``pi`` (each stage sums to 1).

    >>> m = MDP.random(3, 2, 4)
    >>> np.allclose(occupancy(m, random_policy(m)).sum(axis=(1, 2)), 1.0)
    True
    """
    H, S, A = mdp.shape
    d = np.zeros((H, S, A))
    state = mdp.mu
    for h in range(H):
        d[h] = state[:, None] * pi[h]
        state = np.einsum("sa,sat->t", d[h], mdp.P[h])
    return d


def greedy(mdp: MDP, r: np.ndarray) -> tuple[float, np.ndarray]:
    """The optimal return ``mu·V*_1`` for reward ``r`` and a deterministic optimal policy ``pi[h, s, a]`` (ties to
    the lowest action), by backward dynamic programming."""
    H, S, A = mdp.shape
    V = np.zeros(S)
    pi = np.zeros((H, S, A))
    for h in reversed(range(H)):
        Q = r[h] + mdp.P[h] @ V
        best = Q.argmax(axis=1)
        pi[h, np.arange(S), best] = 1.0
        V = Q[np.arange(S), best]
    return float(mdp.mu @ V), pi


def optimal(mdp: MDP, r: np.ndarray) -> tuple[float, np.ndarray]:
    """The optimal return for reward ``r`` and the occupancy of the greedy optimal policy (``greedy``)."""
    value, pi = greedy(mdp, r)
    return value, occupancy(mdp, pi)


def sample(mdp: MDP, pi: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """``n`` trajectories of ``pi``: an integer array ``[n, H, 3]`` of (state, action, next state) per stage."""
    rng = np.random.default_rng(seed)
    H, S, A = mdp.shape
    out = np.zeros((n, H, 3), dtype=np.int64)
    s = rng.choice(S, size=n, p=mdp.mu)
    for h in range(H):
        a = np.array([rng.choice(A, p=pi[h, x]) for x in s])
        nxt = np.array([rng.choice(S, p=mdp.P[h, x, y]) for x, y in zip(s, a)])
        out[:, h] = np.stack([s, a, nxt], axis=1)
        s = nxt
    return out


def estimate(trajectories: np.ndarray, S: int, A: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From sampled trajectories: the transition estimate ``P̂`` (unvisited (h, s, a): uniform), the initial
    distribution ``μ̂`` and the empirical occupancy ``d̂[h, s, a]``."""
    n, H, _ = trajectories.shape
    counts = np.zeros((H, S, A, S))
    d = np.zeros((H, S, A))
    for h in range(H):
        s, a, nxt = trajectories[:, h].T
        np.add.at(counts[h], (s, a, nxt), 1.0)
        np.add.at(d[h], (s, a), 1.0 / n)
    seen = counts.sum(-1, keepdims=True)
    P = np.where(seen > 0, counts / np.maximum(seen, 1.0), 1.0 / S)
    mu = np.bincount(trajectories[:, 0, 0], minlength=S) / n
    return P, mu, d
