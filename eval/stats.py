"""The statistics every report states: a mean over seeds with its sample spread, and the two intervals a
comparison rests on.

- Over **seeds** (training randomness): the per-seed differences of a method and its baseline, paired by seed (the
  same data draws and initial weights where the method allows), with the 95 % Student-t interval

  .. math::
      \\bar d \\pm t_{0.975,\\,n-1}\\, s_d / \\sqrt n,

  wide at three seeds, and honest about it.
- Over **questions** (which items were drawn): the per-item differences with the 95 % percentile-bootstrap interval
  of their mean (10,000 resamples). Blind to seed-to-seed variation, so the narrower of the two. For right/wrong
  items, also the exact McNemar test: of the items that changed, as many would go either way if the two models
  were equally good.

Spreads are sample standard deviations (``n − 1``) everywhere, and 0 for one value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value).

    >>> mean_std([1.0, 2.0, 3.0])
    (2.0, 1.0)
    >>> mean_std([0.5])
    (0.5, 0.0)
    """
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def t_interval(diffs: Sequence[float]) -> tuple[float, float]:
    """The 95 % Student-t interval of the mean of ``diffs`` (NaN bounds below two values).

    >>> [round(x, 3) for x in t_interval([0.1, 0.2])]  # 0.15 ± 12.706 · 0.0707 / √2
    [-0.485, 0.785]
    """
    if len(diffs) < 2:
        return float("nan"), float("nan")
    from scipy import stats

    m, s = mean_std(diffs)
    half = float(stats.t.ppf(0.975, len(diffs) - 1)) * s / math.sqrt(len(diffs))
    return m - half, m + half


def paired_delta(after: Sequence[float], before: Sequence[float], seed: int = 0) -> tuple[float, float, float]:
    """Mean of after − before over paired items, and its 95 % percentile-bootstrap interval (10,000 resamples).

    >>> d, lo, hi = paired_delta([1.0, 0.5, 1.0, 0.0], [0.5, 0.5, 1.0, 0.0])
    >>> d, lo <= d <= hi
    (0.125, True)
    """
    from scipy.stats import bootstrap

    diff = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    if not diff.any():
        return 0.0, 0.0, 0.0
    ci = bootstrap((diff,), np.mean, n_resamples=10_000, method="percentile", rng=np.random.default_rng(seed))
    return float(diff.mean()), float(ci.confidence_interval.low), float(ci.confidence_interval.high)


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p-value for two models on the same right/wrong items: ``gained`` items right only
    after, ``lost`` right only before. Under equal accuracy each changed item goes either way with probability
    1/2, so the p-value is the two-sided binomial test of ``gained`` in ``gained + lost`` (1 when none changed).

    >>> mcnemar_exact(4, 0)  # 2 · (1/2)^4
    0.125
    >>> mcnemar_exact(3, 3), mcnemar_exact(0, 0)
    (1.0, 1.0)
    """
    if gained + lost == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(gained, gained + lost, 0.5).pvalue)
