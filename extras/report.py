"""Shared reporting for extras demos: results over seeds as mean ± std tables and error-bar plots.

``results[method][metric]`` is the list of per-seed values; every demo reports through these so the tables and
plots of all 32 methods read the same way.
"""

from __future__ import annotations

import math
from typing import Any

Results = dict[str, dict[str, list[float]]]


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value).

    >>> mean_std([1.0, 2.0, 3.0])
    (2.0, 1.0)
    """
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, 0.0
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def fmt(values: list[float], digits: int = 3) -> str:
    """``mean ± std``; a count that is the same for every seed (e.g. parameters) prints as that integer.

    >>> fmt([0.5, 0.7]), fmt([650.0, 650.0])
    ('0.600 ± 0.141', '650')
    """
    m, s = mean_std(values)
    if s == 0 and all(float(v).is_integer() for v in values) and abs(m) >= 10:
        return f"{int(m)}"
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def table(results: Results, metrics: list[str], digits: int = 3, label: str = "method") -> str:
    """A markdown table: one row per method, one ``mean ± std (n seeds)`` cell per metric."""
    head = f"| {label} | " + " | ".join(metrics) + " |"
    rows = [head, "|" + "---|" * (len(metrics) + 1)]
    for method, per in results.items():
        cells = [f"{fmt(per[m], digits)} (n={len(per[m])})" if per.get(m) else "–" for m in metrics]
        rows.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def add(results: Results, method: str, metrics: dict[str, Any]) -> None:
    """Append one seed's metrics for ``method``."""
    for k, v in metrics.items():
        results.setdefault(method, {}).setdefault(k, []).append(float(v))


def bars(ax, results: Results, metric: str, title: str | None = None) -> None:
    """Mean ± std bars of ``metric`` per method, each seed's value as a dot."""
    names = [m for m in results if results[m].get(metric)]
    for i, m in enumerate(names):
        vals = results[m][metric]
        mu, sd = mean_std(vals)
        ax.bar(i, mu, yerr=sd, capsize=4, alpha=0.7)
        ax.scatter([i] * len(vals), vals, color="k", s=8, zorder=3)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20, ha="right")
    ax.set_ylabel(metric)
    if title:
        ax.set_title(title)


def thin(values: list[float], points: int = 200) -> list[float]:
    """At most ~``points`` means of consecutive chunks: a training curve small enough to record per run.

    >>> thin([1.0, 3.0, 5.0, 7.0, 9.0], points=2)
    [2.0, 6.0, 9.0]
    """
    k = max(1, len(values) // points)
    return [sum(values[i : i + k]) / len(values[i : i + k]) for i in range(0, len(values), k)]
