"""Config of the extras.efficiency.dequant recipe."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig

SETTING = re.compile(r"^(?:fp|A(\d)W(\d)(?::(\d)of(\d))?)$")


def is_setting(s: str) -> bool:
    """fp, A<a>W<w> or A<a>W<w>:<n>of<m>"""
    return SETTING.match(s) is not None


Setting = Annotated[str, at.Predicate(is_setting)]


@dataclass
class DequantConfig(SweepConfig):
    """Ridge dequantisation against the straight-through estimator, on an MLP and a tiny character GPT. A run
    diverges when its loss becomes non-finite or its last 10 % of training losses average no lower than its first
    10 %."""

    settings: Annotated[list[Setting], at.MinLen(1)] = option(
        ["fp", "A4W4", "A1W1", "A4W4:2of4"],
        "MLP settings: fp (full precision) or A<a>W<w> (a-bit activations, w-bit weights), optionally :<n>of<m> weight sparsity (A4W4:2of4)",
    )
    dequants: Annotated[list[Literal["ste", "ridge"]], at.MinLen(1)] = option(
        ["ste", "ridge"], "dequantisers every non-fp setting runs with: ridge, ste"
    )
    block: PosInt = option(128, "quantisation block size")
    lam: NonNegFloat = option(0.01, "the ridge regularisation λ")
    train_size: PosInt = option(20000, "Fashion-MNIST training images (val_size of them held out to pick the epoch)")
    val_size: PosInt = option(2000, "held-out training images that pick the epoch")
    test_size: PosInt = option(10000, "test images")
    hidden: PosInt = option(256, "the MLP's hidden units")
    mlp_lr: PosFloat = option(1e-3, "the MLP's Adam learning rate")
    mlp_epochs: PosInt = option(5, "the MLP's epochs")
    mlp_seeds: PosInt = option(5, "repetitions of every MLP run")
    seeds: PosInt = option(3, "repetitions of every GPT run")
    batch_size: PosInt = option(128, "the MLP's images per step")
    gpt: bool = option(True, "also run the character GPT part (on CPython's pydoc topics, 90 % / 10 % split)")
    gpt_settings: Annotated[list[Setting], at.MinLen(1)] = option(
        ["fp", "A4W4", "A1W1"], "the GPT's settings, as settings"
    )
    gpt_d: PosInt = option(64, "the GPT's width")
    gpt_layers: PosInt = option(2, "the GPT's layers")
    gpt_heads: PosInt = option(4, "the GPT's attention heads")
    gpt_ctx: PosInt = option(64, "the GPT's context in characters")
    gpt_lr: PosFloat = option(3e-3, "the GPT's AdamW learning rate")
    gpt_steps: PosInt = option(800, "the GPT's training steps")
    gpt_batch: PosInt = option(32, "the GPT's windows per step")
    gpt_eval_windows: PosInt = option(256, "validation windows its bits per character are measured on")
