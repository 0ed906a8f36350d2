"""Config of the extras.theory.robrel recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegFloat, NonNegInt, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


def parse_size(text: str) -> tuple[int, int, int] | None:
    """``"SxAxH"`` → (S, A, H), or None when it is not three positive integers.

    >>> parse_size("10x4x10"), parse_size("3x3")
    ((10, 4, 10), None)
    """
    parts = text.split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def is_size(text: str) -> bool:
    """SxAxH (states x actions x horizon, e.g. 3x3x5)"""
    return parse_size(text) is not None


Size = Annotated[str, at.Predicate(is_size)]


@dataclass
class RobReLConfig(SweepConfig):
    """Rob-ReL against a single feasible reward (what IRL returns) on seeded random MDPs: the worst-case error of
    the estimated reward functional over every reward the feedback leaves feasible, as the demonstrations grow."""

    sizes: Annotated[list[Size], at.MinLen(1)] = option(
        ["3x3x5", "10x4x10"], "MDP sizes as SxAxH (states x actions x horizon)"
    )
    samples: Annotated[list[PosInt], at.MinLen(1)] = option(
        [50, 100, 200, 500], "demonstration trajectories of the expert (also what P̂ is estimated from)"
    )
    methods: Annotated[list[Literal["robrel", "irl_margin", "irl_vertex"]], at.MinLen(1)] = option(
        ["robrel", "irl_margin", "irl_vertex"],
        "robrel: the midpoint (M̂ + m̂)/2 of the estimated range; irl_margin: the feasible reward with the largest "
        "expert margin over the uniform policy; irl_vertex: a random vertex of the estimated feasible set",
    )
    slack: NonNegFloat = option(0.1, "t: the expert is optimal up to this much return (the demonstration constraint)")
    comparisons: NonNegInt = option(5, "trajectory comparisons labelled by the true reward, added to the feedback")
    steps: PosInt = option(4000, "primal–dual iterations for each of m̂ and M̂")
    lr: PosFloat = option(0.5, "the primal–dual initial step η (steps η/√k)")
