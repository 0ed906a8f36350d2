"""Trajectory: what one agent rollout produced, segment by segment, ready for training and analysis.

Token ids are kept exactly as generated (model segments) or as fed back (tool segments), so a trainer never
re-tokenises text and the loss mask always lines up with the ids: ``mask[i] = 1`` for model tokens, 0 for
prompt and tool-result tokens (tool output is never trained on).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentkit.data.tasks import read_jsonl
from agentkit.files import atomic_write


@dataclass
class Segment:
    """A model turn (``kind="model"``, with logprobs/entropies) or a tool result (``kind="tool"``)."""

    kind: Literal["model", "tool"]
    text: str
    token_ids: list[int]
    logprobs: list[float] | None = None
    entropies: list[float] | None = None
    tool: str | None = None  # tool segments: which tool, its arguments, whether it succeeded
    arguments: dict[str, Any] | None = None
    ok: bool | None = None
    seconds: float = 0.0


@dataclass
class Trajectory:
    task_id: str
    prompt: list[dict[str, Any]]
    prompt_ids: list[int]
    segments: list[Segment] = field(default_factory=list)
    answer: str | None = None
    finish: str = "running"  # answer | no_call | max_turns | max_tool_calls | max_tokens | wall_time
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def tool_calls(self) -> int:
        return sum(s.kind == "tool" for s in self.segments)

    @property
    def completion_ids(self) -> list[int]:
        return [t for s in self.segments for t in s.token_ids]

    @property
    def mask(self) -> list[int]:
        """1 for each model-generated token of ``completion_ids``, 0 for tool-result tokens."""
        return [int(s.kind == "model") for s in self.segments for _ in s.token_ids]

    @property
    def entropies(self) -> list[float | None]:
        """Per completion token: the model's entropy, None on tool tokens."""
        return [
            e
            for s in self.segments
            for e in (s.entropies if s.kind == "model" and s.entropies else [None] * len(s.token_ids))
        ]

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        d = dict(d)
        d["segments"] = [Segment(**s) for s in d.get("segments", [])]
        return cls(**d)


def save_jsonl(trajectories: list[Trajectory], path: str | Path) -> None:
    atomic_write(Path(path), "".join(json.dumps(t.to_dict()) + "\n" for t in trajectories))


def load_jsonl(path: str | Path) -> list[Trajectory]:
    return [Trajectory.from_dict(r) for r in read_jsonl(path, required=("task_id", "prompt", "segments"))]


def to_dataset(trajectories: list[Trajectory]):
    """An HF ``datasets.Dataset`` with one row per trajectory (segments as a JSON string column, plus the flat
    ``completion_ids`` / ``mask`` training columns)."""
    import datasets

    rows = [
        {
            "task_id": t.task_id,
            "prompt": json.dumps(t.prompt),
            "prompt_ids": t.prompt_ids,
            "completion_ids": t.completion_ids,
            "mask": t.mask,
            "answer": t.answer or "",
            "finish": t.finish,
            "tool_calls": t.tool_calls,
            "trajectory": json.dumps(t.to_dict()),
        }
        for t in trajectories
    ]
    return datasets.Dataset.from_list(rows)


def from_dataset(ds) -> list[Trajectory]:
    return [Trajectory.from_dict(json.loads(r["trajectory"])) for r in ds]
