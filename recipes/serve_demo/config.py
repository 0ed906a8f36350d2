"""Config of the serve_demo recipe."""

from __future__ import annotations

from dataclasses import dataclass

from agentkit.config import ModelName, PosFloat, PosInt
from agentkit.models.catalog import DEFAULT_CHAT_MODEL


@dataclass
class ServeDemoConfig:
    """Start `agentkit serve` on the embedded model, send suite (a) through the official openai client without
    tools and with the python tool (the `agentkit/tir` agent), compare, and stop the server.

    model: the served model. num_problems / seed: suite (a) problems. max_tokens: per answer (per agent turn).
    max_turns: agent turns. concurrency: client threads sending requests at once.
    time_limit_s: the whole run (server start-up and every request); past it the run stops with an error that
    names the server's log (``server.log`` in the run directory). startup_timeout_s: the server's start-up.
    few_shot: send two worked examples before each question, as earlier chat turns (the same two problems
    for both requests: solved in words without tools, with a <python> call for the agent). SmolLM2 was never
    tuned for tools and writes no call without them.
    """

    model: ModelName = DEFAULT_CHAT_MODEL
    num_problems: PosInt = 32
    seed: int = 0
    max_tokens: PosInt = 160
    max_turns: PosInt = 3
    concurrency: PosInt = 8
    few_shot: bool = True
    system_prompt: str = "Solve the problem step by step. End with: The answer is <number>."
    startup_timeout_s: PosFloat = 300.0
    time_limit_s: PosFloat = 1800.0
