"""Game-RL's outcome reward, by rule: the trajectory's text is verified against its dataset entry.

    R = correct + format_score · [an <answer> tag was written]

``correct`` comes from ``agentkit.gamerl.verifiers`` (a rule, a game checker, or, only where no rule decides and a
judge is given, the judge). The official reward asks a 72B judge for every answer and is binary; ``format_score``
defaults to 0 (binary, as there). The deciding path of every sample is counted (``paths``) for the run's log.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agentkit.agent.trajectory import Trajectory
from agentkit.config import NonNegFloat
from agentkit.gamerl.verifiers import Judge, verify_batch


def entry_of(row: dict[str, Any]) -> dict[str, Any]:
    """The dataset entry a training row carries (as JSON text: rows of many games share one Arrow schema)."""
    e = row["entry"]
    return json.loads(e) if isinstance(e, str) else e


@dataclass
class GameReward:
    """format_score: credit for answering inside ``<answer>…</answer>`` (0: the binary reward of the paper)."""

    format_score: NonNegFloat = 0.0
    judge: Judge | None = field(default=None, repr=False)

    def __post_init__(self):
        self.paths: Counter[str] = Counter()

    def score_row(self, traj: Trajectory, row: dict[str, Any]) -> dict[str, float]:
        """``{"score", "format", "em", "f1"}`` of one trajectory (em = f1 = correct, so the trainer's logs read as
        accuracy).

        >>> from agentkit.agent.trajectory import Segment
        >>> row = {"entry": '{"question": "q", "answer": "7", "metadata": {"verify": {"kind": "int"}}}'}
        >>> t = Trajectory("q", [], [], [Segment("model", "3 + 4 <answer>7</answer>", [])], answer="7")
        >>> GameReward(format_score=0.1).score_row(t, row)
        {'score': 1.1, 'format': 0.1, 'em': 1.0, 'f1': 1.0}
        """
        v = verify_batch([traj.text], [entry_of(row)], self.judge)[0]  # the judge (if any) only where no rule decides
        self.paths[v.path] += 1
        fmt = self.format_score if v.source == "answer_tag" else 0.0
        return {"score": v.score + fmt, "format": fmt, "em": v.score, "f1": v.score}
