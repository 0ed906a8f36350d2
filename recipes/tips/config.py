"""Config of the tips recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

import annotated_types as at

from agentkit.agent.loop import TIR_TOKENS_PER_TURN, AgentConfig
from agentkit.config import ExistingPath, ModelName, NonNegInt, PosInt, option
from agentkit.engines import EngineConfig, SamplingParams
from agentkit.engines.config import HFConfig, rollout_engine_problems
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.rl.advantages import ESTIMATORS
from agentkit.rl.config import RLSettings
from agentkit.rl.ppo import PPOSettings
from agentkit.rl.rewards import OutcomeReward
from agentkit.tips.shaping import ShapingConfig
from agentkit.toollight.sft import SFTSettings


@dataclass
class TipsConfig:
    """TIPS end to end on multi-hop questions over the generated knowledge base, with the search tool: warm start
    (Tool-Light's SFT stage on ideal search trajectories, or init_model), then GRPO runs for each method × seed,
    each evaluated greedily on held-out questions (EM, F1, tool calls)."""

    RENAMED: ClassVar[dict[str, str]] = {
        "eval_max_turns": "eval.max_turns",
        "eval_max_tokens_per_turn": "eval.sampling.max_tokens",
    }

    model: ModelName = option(DEFAULT_CHAT_MODEL, "the base model: a catalog name, directory or hub id")
    init_model: ExistingPath = option(
        None, "a tool-tuned model to start from instead of running SFT (e.g. the toollight recipe's models/sft)"
    )
    sft: SFTSettings = option(
        SFTSettings(epochs=2.0, learning_rate=5e-5),
        "the SFT warm start on ideal search trajectories (Tool-Light's stage)",
    )
    sft_questions: PosInt = option(96, "questions whose ideal trajectories make the SFT set")
    sft_seed: int = option(300, "the SFT questions' seed")
    methods: Annotated[list[Literal["grpo", "tips", "ppo", "tips_ppo"]], at.MinLen(1)] = option(
        ["grpo", "tips"],
        "grpo (outcome reward, the grpo estimator), tips (TIPS shaping, the tips_segment estimator), ppo (outcome "
        "reward, a critic and GAE), tips_ppo (TIPS' shaped turn rewards into PPO's GAE)",
    )
    estimator: str | None = option(
        None, "override the GRPO methods' advantage estimator (dr_grpo, rloo, turn_rloo, …; None: each method's own)"
    )
    seeds: Annotated[list[int], at.MinLen(1)] = option(
        [0], "one GRPO run per method and seed (sampling and data order)"
    )
    rl: RLSettings = option(RLSettings(), "the RL settings (GRPO's and PPO's) and the rollout agent")
    ppo: PPOSettings = option(PPOSettings(), "the PPO methods' critic and GAE (rl.beta: their KL coefficient)")
    outcome: OutcomeReward = option(OutcomeReward(), "the outcome reward (format + EM or F1)")
    shaping: ShapingConfig = option(ShapingConfig(), "TIPS' turn potentials and their weight α")
    teacher: str = option(
        "lagged",
        "lagged (a frozen copy of the policy, refreshed every teacher_refresh steps) or a catalog name / directory (a fixed teacher, e.g. gemma3-270m)",
    )
    teacher_refresh: NonNegInt = option(200, "steps between lagged-teacher refreshes (0: never)")
    engine: EngineConfig = option(
        HFConfig(model=None),
        "the rollout engine (it runs the policy, so model stays unset): hf in process, or vllm reloaded each step",
    )
    teacher_engine: EngineConfig = option(
        HFConfig(model=None), "the teacher's engine (model stays unset: teacher names it)"
    )
    train_questions: PosInt = option(400, "multi-hop questions RL trains on")
    train_seed: int = option(100, "the training questions' seed")
    test_questions: PosInt = option(64, "held-out questions every run is evaluated on")
    test_seed: int = option(7, "the held-out questions' seed")
    kb_seed: int = option(0, "the generated knowledge base (world) every question is asked over")
    search_top_k: PosInt = option(1, "passages per search")
    eval: AgentConfig = option(AgentConfig(
            max_turns=4, max_tool_calls=4, max_total_tokens=4 * (TIR_TOKENS_PER_TURN + 256),
            sampling=SamplingParams(temperature=0.0, max_tokens=TIR_TOKENS_PER_TURN, seed=0),
        ), "the greedy evaluation agent")  # fmt: skip

    def problems(self) -> list[str]:
        out = rollout_engine_problems(self.engine)
        if self.teacher_engine.model is not None:
            out.append("teacher_engine.model: the teacher is named by teacher (lagged, or a model)")
        if self.teacher == "lagged" and not self.teacher_engine.TAKES_WEIGHTS:
            out.append(
                f"teacher_engine.kind: the lagged teacher takes the policy's weights; {self.teacher_engine.kind} cannot"
            )
        if self.estimator is not None and self.estimator not in ESTIMATORS:
            out.append(f"estimator: {self.estimator!r} is not one of {', '.join(ESTIMATORS.names())}")
        return out
