"""OrderDP: unbiased random-then-top-q data pruning (official code: ``shengze-xu/OrderDP``).

Each epoch draws a pool of s = ρ_s·n samples uniformly without replacement and trains on the q = ρ_q·s of them
with the highest stored scores (the latest loss of each sample; 3.0 before a sample is first seen), with the
plain mean loss. The kept fraction is exactly ρ_s·ρ_q. Unlike plain top-q over all n samples, which trains on the
same hard (often mislabelled) samples every epoch, the random pool gives every rank a known chance: the sample of
rank j (1 = highest score) is selected with probability

    γ_j = Σ_{l = max(1, s − n + j)}^{min(q, j)} C(j − 1, l − 1) · C(n − j, s − l) / C(n, s)

(it is the l-th best of the pool when l − 1 higher-ranked and s − l lower-ranked samples were drawn with it, and it
is kept when l ≤ q), so the expected update is that of the surrogate loss L_q = (1/q) Σ_j γ_j L_(j), a smooth
re-weighting that favours high losses without discarding any sample for good.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln


def _log_comb(n, k):
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def selection_probability(n: int, s: int, q: int) -> np.ndarray:
    """γ_j for ranks j = 1..n ([n], sums to q).

    >>> np.round(selection_probability(4, 2, 1), 4)   # pool of 2 from 4, keep the better one
    array([0.5   , 0.3333, 0.1667, 0.    ])
    """
    if not 0 < q <= s <= n:
        raise ValueError(f"need 0 < q <= s <= n, got n={n}, s={s}, q={q}")
    out = np.zeros(n)
    for j in range(1, n + 1):
        ls = np.arange(max(1, s - n + j), min(q, j) + 1)
        if len(ls):
            out[j - 1] = np.exp(_log_comb(j - 1, ls - 1) + _log_comb(n - j, s - ls) - _log_comb(n, s)).sum()
    return out


class OrderDPSelector:
    """Per-epoch indices: a uniform pool of round(ρ_s n), then its round(ρ_q s) highest ``scores``.

    ``scores`` [n] are the caller's (the latest per-sample losses); ``update(idx, losses)`` refreshes them.
    ``rho_s = 1`` gives plain (biased) top-q; ``rho_q = 1`` gives random pruning.
    """

    def __init__(self, n: int, rho_s: float, rho_q: float, seed: int = 0, initial_score: float = 3.0):
        if not (0 < rho_s <= 1 and 0 < rho_q <= 1):
            raise ValueError(f"rho_s and rho_q must be in (0, 1], got {rho_s}, {rho_q}")
        self.n, self.s = n, max(1, round(rho_s * n))
        self.q = max(1, round(rho_q * self.s))
        self.rng = np.random.default_rng(seed)
        self.scores = np.full(n, initial_score, dtype=np.float64)

    def select(self) -> np.ndarray:
        pool = self.rng.choice(self.n, self.s, replace=False)
        if self.q == self.s:
            return np.sort(pool)
        # ties (e.g. unseen samples at the initial score) broken at random, not by index
        key = self.scores[pool] + 1e-9 * self.rng.random(self.s)
        return np.sort(pool[np.argpartition(-key, self.q - 1)[: self.q]])

    def update(self, idx: np.ndarray, losses: np.ndarray) -> None:
        self.scores[idx] = losses
