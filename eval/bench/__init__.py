"""Benchmarks (`agentkit bench ...`): each compares against a baseline run in the same process."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentkit.registry import Registry

# `agentkit bench NAME`: a module with HELP (one line), add_arguments(parser) and main(**options) -> exit code, whose
# parameters are its options' names; third parties add theirs under the entry-point group agentkit.benches.
BENCHES: Registry[Any] = Registry("benchmark", group="agentkit.benches")
for _name in ("engine", "agent", "serve", "structured", "toollight-sampling", "uncertainty", "tips-potentials",
              "rl-step", "ace", "revela", "gamerl-verify", "sandbox", "weight-sync"):  # fmt: skip
    BENCHES.register(_name, "agentkit.eval.bench." + _name.replace("-", "_"))


def percentile(xs: list[float], q: float) -> float:
    """The q-quantile (0 ≤ q ≤ 1) of ``xs``, linearly interpolated (numpy's default): the p50/p95 of every
    latency the benchmarks and recipes report."""
    import numpy as np

    return float(np.percentile(np.asarray(xs, dtype=float), 100 * q))


def _commit() -> str | None:
    """The checkout's commit, with ``+dirty`` when tracked files had changes; None outside a git checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "") if head.returncode == 0 else None


def _cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` says."""
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.exists() else []
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), platform.processor())


def provenance() -> dict[str, Any]:
    """Where a measurement came from (stored with every benchmark's JSON): the command, the commit, the machine
    (CPU model and cores, memory, GPU, torch and its threads) and the time."""
    import torch

    cpu = _cpu_model()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30 if hasattr(os, "sysconf") else None
    return {
        "command": "agentkit " + " ".join(sys.argv[1:])
        if Path(sys.argv[0]).name in ("agentkit", "__main__.py")
        else " ".join(sys.argv),
        "commit": _commit(),
        "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": {
            "cpu": cpu,
            "cores": os.cpu_count(),
            "memory_gib": round(mem, 1) if mem else None,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
        },
    }


def write_json(out: str | None, result: dict[str, Any]) -> None:
    """Write a benchmark's result as JSON (atomically) when ``--out`` was given, with its ``provenance``."""
    if out:
        from agentkit.files import atomic_write

        atomic_write(Path(out), json.dumps({**result, "provenance": provenance()}, indent=2))
