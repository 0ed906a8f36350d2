"""Shared reporting for extras demos: results over seeds as mean ± std tables and error-bar plots.

``results[method][metric]`` is the list of per-seed values; every demo reports through these so the tables and
plots of all 32 methods read the same way.
"""

from __future__ import annotations

from typing import Any

from agentkit.eval.stats import mean_std, t_interval

Results = dict[str, dict[str, list[float]]]


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


def paired(results: Results, baseline: str, metrics: list[str], digits: int = 3) -> str:
    """A markdown table of each method's paired difference from ``baseline``, seed by seed (method − baseline at
    the same seed: the same data draws and initial weights where the method allows), as ``mean ± std`` with a
    95 % t interval over the seeds. An interval that excludes 0 is a difference the seeds support. Empty when
    the baseline did not run or ran alone.

    >>> print(paired({"A": {"acc": [0.5, 0.6]}, "B": {"acc": [0.6, 0.8]}}, "A", ["acc"]))
    | vs A | acc |
    |---|---|
    | B | +0.150 ± 0.071 [-0.485, +0.785] (n=2) |
    """
    if baseline not in results or len(results) < 2:
        return ""
    rows = [f"| vs {baseline} | " + " | ".join(metrics) + " |", "|" + "---|" * (len(metrics) + 1)]
    for method, per in results.items():
        if method == baseline:
            continue
        cells = []
        for m in metrics:
            a, b = results.get(baseline, {}).get(m, []), per.get(m, [])
            if not a or len(a) != len(b):
                cells.append("–")
                continue
            d = [y - x for x, y in zip(a, b)]
            (mu, sd), (lo, hi) = mean_std(d), t_interval(d)
            cells.append(f"{mu:+.{digits}f} ± {sd:.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}] (n={len(d)})")
        rows.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def means(results: Results, metrics: list[str], prefix: str = "") -> dict[str, float]:
    """``{prefix + method/metric: mean over seeds}``: what a recipe returns as its metrics.

    >>> means({"A": {"acc": [0.5, 0.7]}}, ["acc"], "node/")
    {'node/A/acc': 0.6}
    """
    return {f"{prefix}{m}/{k}": mean_std(per[k])[0] for m, per in results.items() for k in metrics if per.get(k)}


def figure(ctx, results: Results, metrics: list[str], name: str, caption: str, titles: list[str] | None = None):
    """One bar panel per metric (``bars``), saved with ``ctx.save_plot``."""
    from agentkit.plots import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.6), squeeze=False)
    for i, (ax, m) in enumerate(zip(axes[0], metrics)):
        bars(ax, results, m, titles[i] if titles else None)
    fig.tight_layout()
    ctx.save_plot(fig, name, caption)


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


def curve(ax, xs: list[float], values: list[list[float]], label: str, **style) -> None:
    """One method's line: the mean of each x's per-seed ``values`` with ± std error bars (``style``: matplotlib
    keywords such as ``ls``)."""
    stats = [mean_std(v) for v in values]
    ax.errorbar(xs, [a for a, _ in stats], yerr=[b for _, b in stats], marker="o", capsize=3, label=label, **style)


def thin(values: list[float], points: int = 200) -> list[float]:
    """At most ~``points`` means of consecutive chunks: a training curve small enough to record per run.

    >>> thin([1.0, 3.0, 5.0, 7.0, 9.0], points=2)
    [2.0, 6.0, 9.0]
    """
    k = max(1, len(values) // points)
    return [sum(values[i : i + k]) / len(values[i : i + k]) for i in range(0, len(values), k)]
