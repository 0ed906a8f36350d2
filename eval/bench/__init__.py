"""Benchmarks (`agentkit bench ...`): each compares against a baseline run in the same process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(out: str | None, result: dict[str, Any]) -> None:
    """Write a benchmark's result as JSON (atomically) when ``--out`` was given."""
    if out:
        from agentkit.recipe import atomic_write

        atomic_write(Path(out), json.dumps(result, indent=2))
