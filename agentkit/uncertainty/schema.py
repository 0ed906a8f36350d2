"""Saved generations: the schema, streaming readers (JSONL, Parquet, HF dataset) and their validation.

One row per question::

    {"id": "arith-0-3", "question": "What is 47 + 38?", "reference": "85",
     "task": "add", "metric": "numeric",                         # optional: per-task breakdown, labelling
     "samples": {"smollm2-135m": ["85", "The answer is 85."],     # model -> K sampled texts (K >= 2 for AU)
                 "gemma3-270m": ["75", "85"]},
     "greedy": {"smollm2-135m": "85"},                            # optional: the answer that is judged
     "meta": {...}}                                              # optional, kept as is

Readers stream: a file of any size is read row by row. A malformed row raises ``BadRow`` naming the file, the
line (row number for Parquet and datasets) and the field; with ``skip_bad`` it is counted in ``Skipped`` instead.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentkit.data.tasks import read_parquet
from agentkit.errors import AgentkitError


@dataclass
class GenerationRow:
    id: str
    question: str
    samples: dict[str, list[str]]
    reference: str | None = None
    task: str = ""
    metric: str = ""
    greedy: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class BadRow(AgentkitError):
    def __init__(self, where: str, field_name: str, problem: str):
        super().__init__(
            f"{where}: field {field_name!r}: {problem}",
            "fix or remove the row, or pass --skip-bad to skip such rows and count them",
        )
        self.where, self.field, self.problem = where, field_name, problem


@dataclass
class Skipped:
    """Rows left out, by reason; every skip is also kept with its location for the report."""

    count: int = 0
    reasons: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def add(self, err: BadRow) -> None:
        self.count += 1
        self.reasons[f"{err.field}: {err.problem}"] += 1
        if len(self.examples) < 20:
            self.examples.append(err.message)


def validate(raw: Any, where: str) -> GenerationRow:
    """A ``GenerationRow`` from one decoded row, or ``BadRow`` naming the first problem."""
    if not isinstance(raw, dict):
        raise BadRow(where, "<row>", f"expected an object, got {type(raw).__name__}")
    for key in ("id", "question"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise BadRow(where, key, "missing or not a non-empty string")
    samples = raw.get("samples")
    if not isinstance(samples, dict) or not samples:
        raise BadRow(where, "samples", "missing or not an object of model -> list of texts")
    for model, texts in samples.items():
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise BadRow(where, f"samples.{model}", "not a list of strings")
    ref = raw.get("reference")
    if ref is not None and not isinstance(ref, str | int | float):
        raise BadRow(where, "reference", f"expected a string, got {type(ref).__name__}")
    greedy = raw.get("greedy") or {}
    if not isinstance(greedy, dict) or not all(isinstance(v, str) for v in greedy.values()):
        raise BadRow(where, "greedy", "not an object of model -> text")
    meta = raw.get("meta") or {}
    if not isinstance(meta, dict):
        raise BadRow(where, "meta", "not an object")
    return GenerationRow(
        raw["id"],
        raw["question"],
        {m: list(t) for m, t in samples.items()},
        None if ref is None else str(ref),
        str(raw.get("task") or ""),
        str(raw.get("metric") or ""),
        dict(greedy),
        dict(meta),
    )


def _raw_rows(path: Path) -> Iterator[tuple[str, Any]]:
    """(location, decoded row or a BadRow to raise) for every row of a JSONL file, Parquet file or dataset dir."""
    if path.is_dir():
        import datasets

        try:
            ds = datasets.load_from_disk(str(path))
        except Exception as e:  # not a saved dataset: say so instead of a datasets traceback
            raise AgentkitError(
                f"{path}: not a saved HF dataset ({e})",
                "pass a .jsonl, .parquet or a directory written by Dataset.save_to_disk",
            ) from None
        if isinstance(ds, datasets.DatasetDict):
            ds = ds[next(iter(ds))]
        for i, row in enumerate(ds, 1):
            yield f"{path}:row {i}", _unflatten(row)
    elif path.suffix == ".parquet":
        i = 0
        for batch in read_parquet(path).iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                i += 1
                yield f"{path}:row {i}", _unflatten(row)
    else:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield f"{path}:{n}", json.loads(line)
                except json.JSONDecodeError as e:
                    yield f"{path}:{n}", BadRow(f"{path}:{n}", "<line>", f"not valid JSON ({e.msg})")


def _unflatten(row: dict[str, Any]) -> dict[str, Any]:
    """Arrow stores a model -> texts map as a struct (all models as keys, null where absent): drop the nulls."""
    for key in ("samples", "greedy", "meta"):
        if isinstance(row.get(key), dict):
            row[key] = {k: v for k, v in row[key].items() if v is not None}
    return row


def iter_generations(
    path: str | Path, skip_bad: bool = False, skipped: Skipped | None = None
) -> Iterator[tuple[str, GenerationRow]]:
    """Stream (location, row) from saved generations; bad rows raise, or are counted in ``skipped``."""
    path = Path(path)
    if not path.exists():
        raise AgentkitError(f"{path} does not exist", "check the path")
    skipped = skipped if skipped is not None else Skipped()
    seen: set[str] = set()
    for where, raw in _raw_rows(path):
        try:
            if isinstance(raw, BadRow):
                raise raw
            row = validate(raw, where)
            if row.id in seen:
                raise BadRow(where, "id", f"duplicate id {row.id!r}")
            seen.add(row.id)
        except BadRow as e:
            if not skip_bad:
                raise
            skipped.add(e)
            continue
        yield where, row


def write_generations(path: str | Path, rows: list[GenerationRow]) -> None:
    """Write rows as JSONL (atomically), Parquet (``.parquet``) or an HF dataset (a path without suffix)."""
    path = Path(path)
    dicts = [r.to_dict() for r in rows]
    if path.suffix == ".jsonl":
        from agentkit.data.tasks import write_jsonl

        write_jsonl(path, dicts)
        return
    import datasets

    for d in dicts:  # Arrow cannot store a struct without fields: an empty map is stored as null
        for key in ("greedy", "meta"):
            d[key] = d[key] or None
    ds = datasets.Dataset.from_list(dicts)
    if path.suffix == ".parquet":
        ds.to_parquet(str(path))
    else:
        ds.save_to_disk(str(path))
