"""Config of the tips recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.agent.loop import TIR_TOKENS_PER_TURN
from agentkit.config import ExistingPath, ModelName, NonNegInt, PosInt
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.rl.advantages import ESTIMATORS
from agentkit.rl.config import RLSettings
from agentkit.rl.rewards import OutcomeReward
from agentkit.tips.shaping import ShapingConfig
from agentkit.toollight.sft import SFTSettings


@dataclass
class TipsConfig:
    """TIPS end to end on multi-hop questions over the generated knowledge base, with the search tool: warm start
    (Tool-Light's SFT stage on ideal search trajectories, or init_model), then GRPO runs for each method × seed,
    each evaluated greedily on held-out questions (EM, F1, tool calls).

    model: catalog name, directory or hub id of the base model. init_model: a tool-tuned model to start from
    instead of running SFT (e.g. the toollight recipe's models/sft). sft, sft_questions, sft_seed: the SFT stage.

    methods: grpo (outcome reward only, the grpo estimator) and/or tips (TIPS shaping, the tips_segment
    estimator). estimator: override the estimator of every method (dr_grpo, …). seeds: one run per method and
    seed (sampling and data order). rl: the GRPO settings. outcome: the outcome reward (format + EM or F1).
    shaping: TIPS' potentials and α. teacher: lagged (a frozen copy of the policy, refreshed every
    teacher_refresh steps; 0 never) or a catalog name / directory (a fixed teacher, e.g. gemma3-270m).
    engine: hf (rollouts by the policy itself, in process) or vllm (rollouts by vLLM, weights reloaded each step;
    make setup-vllm). teacher_engine: the same choice for the teacher.

    Questions: train_questions (train_seed) feed RL, test_questions (test_seed) are held out, all over the world
    kb_seed, searched search_top_k deep. eval_max_turns, eval_max_tokens_per_turn: the greedy evaluation agent.
    """

    model: ModelName = DEFAULT_CHAT_MODEL
    init_model: ExistingPath = None
    sft: SFTSettings = field(default_factory=lambda: SFTSettings(epochs=2.0, learning_rate=5e-5))
    sft_questions: PosInt = 96
    sft_seed: int = 300
    methods: Annotated[list[Literal["grpo", "tips"]], at.MinLen(1)] = field(default_factory=lambda: ["grpo", "tips"])
    estimator: str | None = None
    seeds: Annotated[list[int], at.MinLen(1)] = field(default_factory=lambda: [0])
    rl: RLSettings = field(default_factory=RLSettings)
    outcome: OutcomeReward = field(default_factory=OutcomeReward)
    shaping: ShapingConfig = field(default_factory=ShapingConfig)
    teacher: str = "lagged"
    teacher_refresh: NonNegInt = 200
    engine: Literal["hf", "vllm"] = "hf"
    teacher_engine: Literal["hf", "vllm"] = "hf"
    train_questions: PosInt = 400
    train_seed: int = 100
    test_questions: PosInt = 64
    test_seed: int = 7
    kb_seed: int = 0
    search_top_k: PosInt = 1
    eval_max_turns: PosInt = 4
    eval_max_tokens_per_turn: PosInt = TIR_TOKENS_PER_TURN

    def problems(self) -> list[str]:
        if self.estimator is not None and self.estimator not in ESTIMATORS:
            return [f"estimator: {self.estimator!r} is not one of {', '.join(ESTIMATORS.names())}"]
        return []
