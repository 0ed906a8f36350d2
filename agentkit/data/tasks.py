"""The Task record shared by every suite, and JSONL helpers that name the file and line of bad input."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentkit.errors import AgentkitError
from agentkit.files import atomic_write


@dataclass
class Task:
    """One problem: ``question`` for the model, the gold ``answer`` (a string), and how to score it.

    ``metric`` is ``"numeric"`` (numbers compared after normalisation), ``"em_f1"`` (exact match / token F1) or
    ``"exact"`` (the answer string as written, spacing aside).
    """

    id: str
    question: str
    answer: str
    kind: str
    metric: str = "numeric"
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gold_answers(task_id: str, answers: str | Sequence[str] | None) -> list[str]:
    """A task's gold answers as a non-empty list of non-empty strings; else an error naming the task (rewards and
    TIPS' potentials score against them).

    >>> gold_answers("t", [" 4 ", "", "four"])
    ['4', 'four']
    """
    listed = [answers] if isinstance(answers, str) else list(answers or [])
    listed = [a.strip() for a in listed if isinstance(a, str) and a.strip()]
    if not listed:
        raise AgentkitError(
            f"task {task_id!r} has no gold answer",
            "rewards and TIPS' potentials score against the gold answers: give every question an answer",
        )
    return listed


def split_held_out(train: list[Task], test: list[Task]) -> tuple[list[Task], list[Task]]:
    """(train without any question of the test set, the test set without repeats): seeded suites draw questions
    from a finite world, so two seeds can ask the same question.

    >>> a, b, c = (Task(i, q, "x") for i, q in (("1", "p?"), ("2", "q?"), ("3", "q?")))
    >>> [[t.id for t in part] for part in split_held_out([a, b], [c, c])]
    [['1'], ['3']]
    """
    seen: dict[str, Task] = {}
    for t in test:
        seen.setdefault(t.question, t)
    return [t for t in train if t.question not in seen], list(seen.values())


def write_jsonl(path: str | Path, rows: list[dict[str, Any]]) -> None:
    atomic_write(Path(path), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_parquet(path: str | Path):
    """A ``pyarrow.parquet.ParquetFile``; a corrupt or non-Parquet file is one error naming it."""
    import pyarrow
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except (pyarrow.ArrowException, OSError) as e:
        raise AgentkitError(
            f"{path}: not a readable Parquet file ({' '.join(str(e).split())})",
            "pass a .jsonl, .parquet or a saved dataset directory",
        ) from None


def read_jsonl(path: str | Path, required: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Read a JSONL file; a malformed line or a missing field is an error naming the file and line."""
    return list(iter_jsonl(path, required))


def iter_jsonl(path: str | Path, required: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    """``read_jsonl`` one row at a time (for files larger than memory); the same errors, raised on reaching the line."""
    path = Path(path)
    if not path.is_file():
        raise AgentkitError(f"{path} does not exist", "check the path")
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise AgentkitError(
                    f"{path}:{n}: not valid JSON ({e.msg})", "each line must be one JSON object"
                ) from None
            if not isinstance(row, dict):
                raise AgentkitError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
            missing = [k for k in required if k not in row]
            if missing:
                raise AgentkitError(f"{path}:{n}: missing field(s) {', '.join(missing)}")
            yield row


def load_task_file(path: str | Path) -> list[Task]:
    """Questions a user brings: a JSONL file, a Parquet file or a saved HF dataset directory, one row per question
    with ``id``, ``question`` and ``answer`` (optional ``kind``, ``metric`` — ``numeric``, ``em_f1`` (the
    default) or ``exact``, and ``meta``). A bad row is an error naming the file and row."""
    path = Path(path)
    if path.is_dir() or path.suffix == ".parquet":
        import datasets

        if not path.exists():
            raise AgentkitError(f"{path} does not exist", "check the path")
        if path.is_dir():
            ds = datasets.load_from_disk(str(path))
        else:
            ds = datasets.Dataset(read_parquet(path).read())
        rows, where = list(ds), "row"
    else:
        rows, where = read_jsonl(path), "line"
    tasks = []
    for n, r in enumerate(rows, 1):
        missing = [k for k in ("id", "question", "answer") if r.get(k) in (None, "")]
        if missing:
            raise AgentkitError(f"{path}:{where} {n}: missing field(s) {', '.join(missing)}")
        metric = r.get("metric") or "em_f1"
        if metric not in ("numeric", "em_f1", "exact"):
            raise AgentkitError(f"{path}:{where} {n}: field 'metric': {metric!r} is not numeric, em_f1 or exact")
        # Arrow gives every row every meta key of the file, None where a row had none: drop those
        meta = {k: v for k, v in (r.get("meta") or {}).items() if v is not None}
        tasks.append(Task(str(r["id"]), str(r["question"]), str(r["answer"]), str(r.get("kind") or ""), metric, meta))
    if len({t.id for t in tasks}) != len(tasks):
        raise AgentkitError(f"{path}: question ids repeat", "give every row its own id")
    return tasks
