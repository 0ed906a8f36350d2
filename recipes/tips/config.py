"""Config of the tips recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.agent.loop import TIR_TOKENS_PER_TURN
from agentkit.config import ExistingPath, Fraction, ModelName, NonNegFloat, NonNegInt, PosFloat, PosInt
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.rl.advantages import ESTIMATORS
from agentkit.rl.rewards import OutcomeReward
from agentkit.tips.shaping import ShapingConfig
from agentkit.toollight.sft import SFTSettings


@dataclass
class RLSettings:
    """steps: optimizer steps per run. questions_per_step × group_size trajectories per step (G = group_size; over
    all processes under accelerate), trained in micro-batches of micro_batch per process. learning_rate, warmup_ratio, max_grad_norm: the optimizer. beta: KL
    to the reference (0: no reference model). epsilon: the ratio clip. loss_type: TRL's aggregation (dapo:
    token mean over the batch, grpo: sequence mean, dr_grpo, bnpo). temperature, top_p: sampling.
    max_turns, max_tokens_per_turn, max_total_tokens: the agent's limits. save_steps: checkpoint interval
    (resume point). lora_r > 0: train LoRA adapters instead of all weights."""

    steps: PosInt = 30
    questions_per_step: PosInt = 4
    group_size: Annotated[int, at.Ge(2)] = 4
    micro_batch: PosInt = 8
    learning_rate: PosFloat = 1e-5
    warmup_ratio: Fraction = 0.0
    max_grad_norm: PosFloat = 1.0
    beta: NonNegFloat = 0.0
    epsilon: PosFloat = 0.2
    loss_type: Literal["dapo", "grpo", "dr_grpo", "bnpo"] = "dapo"
    temperature: PosFloat = 1.0
    top_p: Annotated[float, at.Interval(gt=0, le=1)] = 1.0
    max_turns: PosInt = 4
    max_tokens_per_turn: PosInt = TIR_TOKENS_PER_TURN
    max_total_tokens: PosInt = 768
    save_steps: PosInt = 5
    lora_r: NonNegInt = 0

    def problems(self) -> list[str]:
        per_step = self.questions_per_step * self.group_size
        if per_step % self.micro_batch:
            return [f"micro_batch: {self.micro_batch} does not divide questions_per_step × group_size = {per_step}"]
        return []


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
