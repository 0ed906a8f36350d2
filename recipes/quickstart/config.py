"""Config of the quickstart recipe."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentkit.engines import EngineConfig


@dataclass
class QuickstartConfig:
    """The embedded model answers seeded arithmetic problems (suite a), without tools.

    num_problems: how many problems (the i-th depends only on seed and i).
    kinds: problem kinds of suite (a): mul, chain, word, linear.
    batch_size: problems per engine call; finished batches are kept, so --resume redoes at most one.
    max_tokens / temperature: generation limits (temperature 0 = greedy).
    """

    engine: EngineConfig = field(default_factory=EngineConfig)
    num_problems: int = 64
    seed: int = 0
    kinds: list[str] = field(default_factory=lambda: ["mul", "chain", "word", "linear"])
    batch_size: int = 32
    max_tokens: int = 160
    temperature: float = 0.0
    system_prompt: str = "Solve the problem step by step. End with: The answer is <number>."
    examples_in_report: int = 6
