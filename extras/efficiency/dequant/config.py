"""Config of the extras.efficiency.dequant recipe."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegFloat, PosFloat, PosInt

SETTING = re.compile(r"^(?:fp|A(\d)W(\d)(?::(\d)of(\d))?)$")


def is_setting(s: str) -> bool:
    """fp, A<a>W<w> or A<a>W<w>:<n>of<m>"""
    return SETTING.match(s) is not None


Setting = Annotated[str, at.Predicate(is_setting)]


@dataclass
class DequantConfig:
    """Ridge dequantisation against the straight-through estimator, on an MLP and a tiny character GPT.

    settings: "fp" (full precision) or "A<a>W<w>" (a-bit activations, w-bit weights), optionally with
    ":<n>of<m>" weight sparsity (e.g. "A4W4:2of4"); every setting except fp runs with each dequantiser in
    dequants (ridge, ste). block: quantisation block; lam: ridge λ.
    MLP: Fashion-MNIST, train_size images (val_size held out to pick the epoch), test_size test images,
    hidden units, Adam (mlp_lr) for mlp_epochs, mlp_seeds seeds. GPT: character LM on CPython's pydoc topics (90 % / 10 %
    split), gpt_layers × gpt_d with gpt_heads, context gpt_ctx, AdamW (gpt_lr) for gpt_steps of gpt_batch
    windows; validation bits per character on gpt_eval_windows windows. gpt: false skips the GPT part.
    A run diverges when its loss becomes non-finite or its last 10 % of training losses average no lower
    than its first 10 %. seeds: repetitions of every GPT run.
    """

    settings: Annotated[list[Setting], at.MinLen(1)] = field(
        default_factory=lambda: ["fp", "A4W4", "A1W1", "A4W4:2of4"]
    )
    dequants: Annotated[list[Literal["ste", "ridge"]], at.MinLen(1)] = field(default_factory=lambda: ["ste", "ridge"])
    block: PosInt = 128
    lam: NonNegFloat = 0.01
    train_size: PosInt = 20000
    val_size: PosInt = 2000
    test_size: PosInt = 10000
    hidden: PosInt = 256
    mlp_lr: PosFloat = 1e-3
    mlp_epochs: PosInt = 5
    mlp_seeds: PosInt = 5
    batch_size: PosInt = 128
    gpt: bool = True
    gpt_settings: Annotated[list[Setting], at.MinLen(1)] = field(default_factory=lambda: ["fp", "A4W4", "A1W1"])
    gpt_d: PosInt = 64
    gpt_layers: PosInt = 2
    gpt_heads: PosInt = 4
    gpt_ctx: PosInt = 64
    gpt_lr: PosFloat = 3e-3
    gpt_steps: PosInt = 800
    gpt_batch: PosInt = 32
    gpt_eval_windows: PosInt = 256
    seeds: PosInt = 3
