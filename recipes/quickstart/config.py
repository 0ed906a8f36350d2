"""Config of the quickstart recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegFloat, NonNegInt, PosInt
from agentkit.engines import EngineConfig

Kind = Literal["mul", "chain", "word", "linear", "add", "sub", "small_mul", "steps"]


@dataclass
class QuickstartConfig:
    """The embedded model answers seeded arithmetic problems (suite a), without tools.

    num_problems: how many problems (the i-th depends only on seed and i).
    kinds: problem kinds of suite (a): mul, chain, word, linear (the default), add, sub, small_mul, steps.
    batch_size: problems per engine call; finished batches are kept, so --resume redoes at most one.
    max_tokens / temperature: generation limits (temperature 0 = greedy).
    system_prompt: the system message of every problem. examples_in_report: solved and failed examples shown.
    """

    engine: EngineConfig = field(default_factory=EngineConfig)
    num_problems: PosInt = 64
    seed: int = 0
    kinds: Annotated[list[Kind], at.MinLen(1)] = field(default_factory=lambda: ["mul", "chain", "word", "linear"])
    batch_size: PosInt = 32
    max_tokens: PosInt = 160
    temperature: NonNegFloat = 0.0
    system_prompt: str = "Solve the problem step by step. End with: The answer is <number>."
    examples_in_report: NonNegInt = 6
