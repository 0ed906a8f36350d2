"""Config of the toollight_analyze recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

import annotated_types as at

from agentkit.agent.loop import TIR_TOKENS_PER_TURN, AgentConfig
from agentkit.config import PosInt, option
from agentkit.engines import EngineConfig, SamplingParams
from agentkit.engines.config import HFConfig


@dataclass
class ToolLightAnalyzeConfig:
    """Tool-Light's entropy analysis for any model and suite: sample tool-integrated trajectories, then plot the
    token entropy aligned at tool-result boundaries and the chain entropy against the number of tool calls."""

    RENAMED: ClassVar[dict[str, str]] = {
        "model": "engine.model",
        "samples": "agent.sampling.n",
        "temperature": "agent.sampling.temperature",
        "top_p": "agent.sampling.top_p",
        "max_turns": "agent.max_turns",
        "max_tokens_per_turn": "agent.sampling.max_tokens",
    }

    engine: EngineConfig = option(
        HFConfig(),
        "the engine and model sampled (e.g. model RUN/models/sft from toollight); hf gives exact entropies, the "
        "others estimate them from the top logprobs",
    )
    suites: Annotated[list[Literal["arithmetic", "arithmetic-easy", "steps", "multihop"]], at.MinLen(1)] = option(
        ["arithmetic", "multihop"],
        "built-in suites with their tool: arithmetic, arithmetic-easy and steps with python, multihop with search",
    )
    num_tasks: PosInt = option(32, "questions per suite")
    seed: int = option(3, "the questions' seed")
    few_shot: bool = option(True, "show each suite's worked examples (a model never tuned for tools needs them)")
    search_top_k: PosInt = option(3, "multihop: passages per search")
    agent: AgentConfig = option(
        AgentConfig(
            max_turns=4,
            max_tool_calls=4,
            max_total_tokens=4 * (TIR_TOKENS_PER_TURN + 256),
            sampling=SamplingParams(n=2, temperature=0.7, max_tokens=TIR_TOKENS_PER_TURN, seed=3, entropy=True),
        ),
        "the sampling agent: sampling.n trajectories per question; entropies are always recorded",
    )
    boundary_k: PosInt = option(20, "tokens on each side of a tool result in the entropy profile")
