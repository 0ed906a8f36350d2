"""Benchmarks (`agentkit bench ...`): each compares against a baseline run in the same process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def percentile(xs: list[float], q: float) -> float:
    """The q-quantile (0 ≤ q ≤ 1) of ``xs``, linearly interpolated (numpy's default): the p50/p95 of every
    latency the benchmarks and recipes report."""
    import numpy as np

    return float(np.percentile(np.asarray(xs, dtype=float), 100 * q))


def write_json(out: str | None, result: dict[str, Any]) -> None:
    """Write a benchmark's result as JSON (atomically) when ``--out`` was given."""
    if out:
        from agentkit.files import atomic_write

        atomic_write(Path(out), json.dumps(result, indent=2))
