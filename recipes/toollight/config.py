"""Config of the toollight recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.agent.loop import TIR_TOKENS_PER_TURN
from agentkit.config import ExistingPath, ModelName, NonNegInt, PosInt
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.toollight.dpo import DPOSettings
from agentkit.toollight.pairs import PairRules
from agentkit.toollight.rounds import SamplingSettings
from agentkit.toollight.sft import SFTSettings


@dataclass
class ToolLightConfig:
    """Tool-Light end to end: base agent → SFT → pre-aligned DPO → self-evolved DPO rounds, with the agent
    evaluated on held-out questions after every stage (accuracy, tool calls, Efficiency, Necessity, tokens).

    model: catalog name, directory or hub id of the starting model. engine: hf (embedded; the policy itself
    samples) or vllm (GPU; reloaded from the saved weights after each stage).

    Questions. Seeded suites by default: train_* questions (train_seed) make the SFT trajectories; pool_*
    questions (pool_seed) are mined for DPO sources; test_* questions (test_seed) are held out; suite (b) is
    asked over the knowledge base kb_seed, searched with top search_top_k passages. Or bring your own:
    questions (JSONL / Parquet / saved HF dataset with id, question, answer[, metric]) replace the pool,
    test_questions the test set (else test_fraction of questions is held out), corpus (JSONL with id, title,
    text) feeds the search tool, tools names the tools they may use, sft_data (trajectories saved by agentkit,
    JSONL or dataset) replaces the generated SFT set; with user questions and no sft_data, SFT is skipped
    (the model is assumed tool-tuned already). sft.epochs = 0 skips SFT too. pairs (a saved pairs dataset,
    or TRL-style prompt / chosen / rejected JSONL) replaces the first DPO round's sampling and selection.

    Stages. pre_aligned: one Criterion-1 DPO round on the SFT model's samples; self_evolved_rounds: Criterion-2
    rounds, each resampling with the latest model (paper: 2). sampling, rules, dpo: see SamplingSettings,
    PairRules, DPOSettings. eval_max_turns / eval_max_tokens_per_turn: the greedy evaluation agent's limits.
    keep_models: save every stage's weights under models/ (else only the latest).
    """

    model: ModelName = DEFAULT_CHAT_MODEL
    engine: Literal["hf", "vllm"] = "hf"
    train_arithmetic: NonNegInt = 96
    train_easy: NonNegInt = 24
    train_multihop: NonNegInt = 24
    train_seed: int = 100
    pool_arithmetic: NonNegInt = 24
    pool_easy: NonNegInt = 8
    pool_multihop: NonNegInt = 32
    pool_seed: int = 200
    test_arithmetic: NonNegInt = 32
    test_multihop: NonNegInt = 32
    test_seed: int = 7
    kb_seed: int = 0
    search_top_k: PosInt = 1
    questions: ExistingPath = None
    test_questions: ExistingPath = None
    test_fraction: Annotated[float, at.Interval(gt=0, lt=1)] = 0.2
    corpus: ExistingPath = None
    tools: Annotated[list[Literal["python", "search"]], at.MinLen(1)] = field(
        default_factory=lambda: ["python", "search"]
    )
    sft_data: ExistingPath = None
    pairs: ExistingPath = None
    sft: SFTSettings = field(default_factory=lambda: SFTSettings(epochs=1.0))
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    rules: PairRules = field(default_factory=PairRules)
    dpo: DPOSettings = field(default_factory=DPOSettings)
    pre_aligned: bool = True
    self_evolved_rounds: NonNegInt = 2
    eval_max_turns: PosInt = 4
    eval_max_tokens_per_turn: PosInt = TIR_TOKENS_PER_TURN
    keep_models: bool = True

    def problems(self) -> list[str]:
        """Your questions with the search tool need your corpus (the seeded suites bring their own)."""
        if self.questions is not None and "search" in self.tools and self.corpus is None:
            return ["corpus: the search tool needs a corpus with your questions (corpus=FILE.jsonl: id, title, text)"]
        return []
