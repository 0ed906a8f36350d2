"""Config of the quickstart recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

import annotated_types as at

from agentkit.config import NonNegInt, PosInt, option
from agentkit.engines import EngineConfig, SamplingParams
from agentkit.engines.config import HFConfig

Kind = Literal["mul", "chain", "word", "linear", "add", "sub", "small_mul", "steps"]


@dataclass
class QuickstartConfig:
    """The embedded model answers seeded arithmetic problems (suite a), without tools."""

    RENAMED: ClassVar[dict[str, str]] = {"max_tokens": "sampling.max_tokens", "temperature": "sampling.temperature"}

    engine: EngineConfig = option(HFConfig(), "the engine that answers (kind, model and the kind's options)")
    num_problems: PosInt = option(64, "how many problems; the i-th depends only on seed and i")
    seed: int = option(0, "the problems' seed")
    kinds: Annotated[list[Kind], at.MinLen(1)] = option(
        ["mul", "chain", "word", "linear"],
        "problem kinds of suite (a): mul, chain, word, linear, add, sub, small_mul, steps",
    )
    batch_size: PosInt = option(
        32, "problems per engine call; finished batches are kept, so --resume redoes at most one"
    )
    sampling: SamplingParams = option(
        SamplingParams(max_tokens=160, temperature=0.0, seed=0, entropy=True),
        "how answers are generated (temperature 0: greedy); entropies are reported",
    )
    system_prompt: str = option(
        "Solve the problem step by step. End with: The answer is <number>.", "the system message of every problem"
    )
    examples_in_report: NonNegInt = option(6, "solved and failed examples shown in the report")
