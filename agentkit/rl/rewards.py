"""Outcome reward of a search agent's trajectory (Search-R1 / TIPS ``search_r1_like_qa_em``).

    R = format + EM      (metric="em")        or      format + F1      (metric="f1")

``format`` (0.4 officially) is given when the trajectory ends with an answer in the answer tag; EM and F1 are the
best over the gold answers after SQuAD normalisation. Without an answer R = 0. Like the official code, a
trajectory that writes the answer tag more than ``spam_tags`` times has its EM/F1 divided by 4.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agentkit.agent.trajectory import Trajectory
from agentkit.config import NonNegFloat, PosInt, option
from agentkit.eval.metrics import exact_match, token_f1


@dataclass
class OutcomeReward:
    """The outcome reward of a search-agent trajectory: format credit plus EM or F1 against the gold answers."""

    format_score: NonNegFloat = option(0.4, "credit for a well-formed final answer (official 0.4)")
    metric: Literal["em", "f1"] = option("em", "em or f1, added to the format credit")
    spam_tags: PosInt = option(10, "more answer tags than this quarters EM/F1 (official 10)")

    def __call__(self, traj: Trajectory, golds: Sequence[str]) -> dict[str, float]:
        """``{"score", "format", "em", "f1"}`` of one trajectory.

        >>> from agentkit.agent.trajectory import Segment
        >>> t = Trajectory("q", [], [], [Segment("model", "<answer>the Kaldoria</answer>", [])], answer="the Kaldoria")
        >>> OutcomeReward()(t, ["Kaldoria", "Republic of Kaldoria"])
        {'score': 1.4, 'format': 0.4, 'em': 1.0, 'f1': 1.0}
        """
        if traj.answer is None:
            return {"score": 0.0, "format": 0.0, "em": 0.0, "f1": 0.0}
        em = max(exact_match(traj.answer, g) for g in golds)
        f1 = max(token_f1(traj.answer, g) for g in golds)
        if traj.text.count("<answer>") > self.spam_tags:
            em, f1 = em / 4, f1 / 4
        return {
            "score": self.format_score + (em if self.metric == "em" else f1),
            "format": self.format_score,
            "em": em,
            "f1": f1,
        }

    def score_row(self, traj: Trajectory, row: dict) -> dict[str, float]:
        """The trainer's entry point: the reward of ``traj`` for its dataset row (gold answers in ``answers``)."""
        return self(traj, row["answers"])
