"""Config of the extras.spiking.lrfdyn recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegInt, PosFloat, PosInt, option
from agentkit.extras.data import split_problems
from agentkit.extras.sweep import SweepConfig


@dataclass
class LRFDynConfig(SweepConfig):
    """SSA, LRF-SSA and LRF-Dyn in a tiny spiking transformer on Fashion-MNIST: accuracy and inference state memory."""

    methods: Annotated[list[Literal["ssa", "lrf", "dyn"]], at.MinLen(1)] = option(
        ["ssa", "lrf", "dyn"], "ssa (Spikformer's attention), lrf (LRF-SSA) and dyn (LRF-Dyn)"
    )
    train_size: PosInt = option(4000, "Fashion-MNIST training images (val_size of them pick the epoch)")
    val_size: PosInt = option(500, "held-out training images")
    test_size: PosInt = option(5000, "test images")
    d: PosInt = option(32, "width of the conv stem and blocks")
    heads: PosInt = option(4, "attention heads")
    blocks: PosInt = option(2, "transformer blocks (attention, MLP ×4, spike residuals)")
    steps: PosInt = option(2, "LIF time steps (snntorch)")
    patch: Literal[2, 4, 7] = option(4, "conv stem patch: (28/patch)² tokens")
    dilations: Annotated[list[PosInt], at.MinLen(1)] = option(
        [1, 2], "LRF: dilations of the 3×3 depthwise-separable convs of V (the paper's 3 and 5 are for 14×14 grids)"
    )
    epochs: PosInt = option(3, "training epochs")
    batch_size: PosInt = option(64, "images per step")
    lr: PosFloat = option(2e-3, "AdamW's learning rate")
    recurrent_check: NonNegInt = option(
        200, "test images LRF-Dyn classifies again token by token, to check its inference form agrees (0: none)"
    )

    def problems(self) -> list[str]:
        out = []
        if self.d % self.heads:
            out.append(f"heads: {self.heads} does not divide d = {self.d}")
        grid = 28 // self.patch
        if max(self.dilations) >= grid:
            out.append(f"dilations: {max(self.dilations)} reaches past the {grid}×{grid} token grid")
        return out + split_problems(self.train_size, self.val_size)
