"""Config of the toollight_sft recipe."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentkit.toollight.sft import SFTSettings


@dataclass
class ToolLightSFTConfig:
    """Tool-Light's SFT stage: teach the embedded model the tag-style tool format on correct trajectories, then
    compare the agent before and after on held-out questions (no few-shot examples in either).

    model: a catalog name, directory or hub id. train_*: SFT examples per source (suite (a) large-number kinds
    with a python call, suite (a) small-number kinds answered directly, suite (b) with one search per hop),
    drawn with train_seed. test_*: held-out questions (test_seed; suite (b) uses the same knowledge base
    kb_seed, other questions). search_top_k: passages per search, in training data and at evaluation (one keeps
    sequences short enough to train on CPU). max_turns / max_tokens_per_turn: agent limits at evaluation. sft: training
    settings (epochs, learning_rate, batch_size, max_length, lora_r, …).
    """

    model: str = "smollm2-135m"
    train_arithmetic: int = 96
    train_easy: int = 24
    train_multihop: int = 24
    train_seed: int = 100
    test_arithmetic: int = 32
    test_multihop: int = 32
    test_seed: int = 7
    kb_seed: int = 0
    search_top_k: int = 1
    max_turns: int = 4
    max_tokens_per_turn: int = 64
    sft: SFTSettings = field(default_factory=SFTSettings)
