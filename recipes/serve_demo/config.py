"""Config of the serve_demo recipe."""

from __future__ import annotations

from dataclasses import dataclass

from agentkit.config import ModelName, PosFloat, PosInt, option
from agentkit.models.catalog import DEFAULT_CHAT_MODEL


@dataclass
class ServeDemoConfig:
    """Start `agentkit serve` on the embedded model, send suite (a) through the official openai client without
    tools and with the python tool (the `agentkit/tir` agent), compare, and stop the server."""

    model: ModelName = option(DEFAULT_CHAT_MODEL, "the served model: a catalog name, directory or hub id")
    num_problems: PosInt = option(32, "suite (a) problems sent, each without tools and to the agent")
    seed: int = option(0, "the problems' seed")
    max_tokens: PosInt = option(160, "tokens per answer (per turn for the agent)")
    max_turns: PosInt = option(3, "the agent's model turns per problem")
    concurrency: PosInt = option(8, "client threads sending requests at once")
    few_shot: bool = option(
        True,
        "send two worked examples as earlier chat turns (solved in words, and with a <python> call for the agent); SmolLM2 writes no call without them",
    )
    system_prompt: str = option(
        "Solve the problem step by step. End with: The answer is <number>.", "the system message of every request"
    )
    startup_timeout_s: PosFloat = option(300.0, "seconds the server may take to start")
    time_limit_s: PosFloat = option(
        1800.0,
        "seconds for the whole run (start-up and every request); past it the run stops with an error naming server.log",
    )
