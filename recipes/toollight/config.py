"""Config of the toollight recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

import annotated_types as at

from agentkit.agent.loop import TIR_TOKENS_PER_TURN, AgentConfig
from agentkit.config import ExistingPath, ModelName, NonNegInt, PosInt, option
from agentkit.engines import EngineConfig, SamplingParams
from agentkit.engines.config import HFConfig, rollout_engine_problems
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.toollight.dpo import DPOSettings
from agentkit.toollight.pairs import PairRules
from agentkit.toollight.rounds import SamplingSettings
from agentkit.toollight.sft import SFTSettings


@dataclass
class ToolLightConfig:
    """Tool-Light end to end: base agent → SFT → pre-aligned DPO → self-evolved DPO rounds, with the agent
    evaluated on held-out questions after every stage (accuracy, tool calls, Efficiency, Necessity, tokens)."""

    RENAMED: ClassVar[dict[str, str]] = {
        "eval_max_turns": "eval.max_turns",
        "eval_max_tokens_per_turn": "eval.sampling.max_tokens",
    }

    model: ModelName = option(DEFAULT_CHAT_MODEL, "the starting model: a catalog name, directory or hub id")
    engine: EngineConfig = option(
        HFConfig(model=None),
        "the engine that samples and evaluates the policy (model stays unset): hf, the policy itself; vllm, reloaded after each stage",
    )
    train_arithmetic: NonNegInt = option(96, "suite (a) questions whose ideal trajectories make the SFT set")
    train_easy: NonNegInt = option(24, "easy arithmetic questions in the SFT set (answered without tools)")
    train_multihop: NonNegInt = option(24, "suite (b) questions in the SFT set")
    train_seed: int = option(100, "the SFT questions' seed")
    pool_arithmetic: NonNegInt = option(24, "suite (a) questions mined for DPO sources")
    pool_easy: NonNegInt = option(8, "easy arithmetic questions mined for DPO sources")
    pool_multihop: NonNegInt = option(32, "suite (b) questions mined for DPO sources")
    pool_seed: int = option(200, "the pool's seed")
    test_arithmetic: NonNegInt = option(32, "held-out suite (a) questions")
    test_multihop: NonNegInt = option(32, "held-out suite (b) questions")
    test_seed: int = option(7, "the held-out questions' seed")
    kb_seed: int = option(0, "the knowledge base suite (b) is asked over")
    search_top_k: PosInt = option(1, "passages per search")
    questions: ExistingPath = option(
        None,
        "your questions (JSONL / Parquet / saved HF dataset with id, question, answer[, metric]) in place of the pool",
    )
    test_questions: ExistingPath = option(None, "your held-out questions (else test_fraction of questions is held out)")
    test_fraction: Annotated[float, at.Interval(gt=0, lt=1)] = option(
        0.2, "share of your questions held out when test_questions is not given"
    )
    corpus: ExistingPath = option(None, "JSONL of id, title, text for the search tool over your questions")
    tools: Annotated[list[Literal["python", "search"]], at.MinLen(1)] = option(
        ["python", "search"], "the tools your questions may use"
    )
    sft_data: ExistingPath = option(
        None,
        "trajectories saved by agentkit (JSONL or dataset) in place of the generated SFT set; with your questions and none, SFT is skipped",
    )
    pairs: ExistingPath = option(
        None,
        "a saved pairs dataset, or TRL-style prompt / chosen / rejected JSONL, in place of the first DPO round's sampling",
    )
    sft: SFTSettings = option(SFTSettings(epochs=1.0), "the SFT stage (sft.epochs 0 skips it)")
    sampling: SamplingSettings = option(
        SamplingSettings(), "how each round samples: mining, vanilla and entropy-guided rollouts"
    )
    rules: PairRules = option(PairRules(), "the pair rules' thresholds and mixing ratios")
    dpo: DPOSettings = option(DPOSettings(), "each DPO round's settings")
    pre_aligned: bool = option(True, "run the Criterion-1 DPO round on the SFT model's samples")
    self_evolved_rounds: NonNegInt = option(2, "Criterion-2 rounds, each resampling with the latest model (paper: 2)")
    eval: AgentConfig = option(AgentConfig(
            max_turns=4, max_tool_calls=4, max_total_tokens=4 * (TIR_TOKENS_PER_TURN + 256),
            sampling=SamplingParams(temperature=0.0, max_tokens=TIR_TOKENS_PER_TURN, seed=0, entropy=True),
        ), "the greedy evaluation agent run after every stage")  # fmt: skip
    keep_models: bool = option(True, "save every stage's weights under models/ (else only the latest)")

    def problems(self) -> list[str]:
        """Your questions with the search tool need your corpus (the seeded suites bring their own); the engine
        runs the policy and takes each stage's weights."""
        out = rollout_engine_problems(self.engine)
        if self.questions is not None and "search" in self.tools and self.corpus is None:
            out.append(
                "corpus: the search tool needs a corpus with your questions (corpus=FILE.jsonl: id, title, text)"
            )
        return out
