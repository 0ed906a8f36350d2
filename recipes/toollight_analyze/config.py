"""Config of the toollight_analyze recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.agent.loop import TIR_TOKENS_PER_TURN
from agentkit.config import ModelName, NonNegFloat, PosInt, TopP
from agentkit.models.catalog import DEFAULT_CHAT_MODEL


@dataclass
class ToolLightAnalyzeConfig:
    """Tool-Light's entropy analysis for any model and suite: sample tool-integrated trajectories, then plot the
    token entropy aligned at tool-result boundaries and the chain entropy against the number of tool calls.

    model: a catalog name, directory (e.g. RUN/models/sft from toollight) or hub id. suites: built-in
    suites with their tool (``agentkit.agent.suites``: arithmetic, arithmetic-easy and steps with python, multihop
    with search). num_tasks: questions per suite (seed). samples / temperature /
    top_p: trajectories per question. few_shot: show each suite's worked examples (a model never tuned for tools
    needs them). boundary_k: tokens on each side of a tool result in the profile.
    """

    model: ModelName = DEFAULT_CHAT_MODEL
    suites: Annotated[list[Literal["arithmetic", "arithmetic-easy", "steps", "multihop"]], at.MinLen(1)] = field(
        default_factory=lambda: ["arithmetic", "multihop"]
    )
    num_tasks: PosInt = 32
    seed: int = 3
    samples: PosInt = 2
    temperature: NonNegFloat = 0.7
    top_p: TopP = 1.0
    few_shot: bool = True
    search_top_k: PosInt = 3
    max_turns: PosInt = 4
    max_tokens_per_turn: PosInt = TIR_TOKENS_PER_TURN
    boundary_k: PosInt = 20
