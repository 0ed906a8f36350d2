"""Config of the extras.spiking.lrfdyn recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegInt, PosFloat, PosInt
from agentkit.extras.data import split_problems


@dataclass
class LRFDynConfig:
    """SSA, LRF-SSA and LRF-Dyn in a tiny spiking transformer on Fashion-MNIST.

    Data: train_size training images (val_size of them held out to pick the epoch), test_size test images.
    Network: a patch×patch conv stem (28/patch squared tokens) of width d, `blocks` × (attention with `heads`
    heads, MLP ×4) with spike residuals, LIF neurons (snntorch) over `steps` time steps, a linear head on the mean
    spike rate. LRF: 3×3 depthwise-separable convs of V at `dilations` (the paper's 3 and 5 are for 14×14 ImageNet
    grids; 1 and 2 keep the fields local on a 7×7 grid). AdamW at lr, epochs of batch_size; seeds. recurrent_check
    test images (0: none) are classified again by LRF-Dyn token by token (the inference form), to check it agrees.
    """

    methods: Annotated[list[Literal["ssa", "lrf", "dyn"]], at.MinLen(1)] = field(
        default_factory=lambda: ["ssa", "lrf", "dyn"]
    )
    train_size: PosInt = 4000
    val_size: PosInt = 500
    test_size: PosInt = 5000
    d: PosInt = 32
    heads: PosInt = 4
    blocks: PosInt = 2
    steps: PosInt = 2
    patch: Literal[2, 4, 7] = 4
    dilations: Annotated[list[PosInt], at.MinLen(1)] = field(default_factory=lambda: [1, 2])
    epochs: PosInt = 3
    batch_size: PosInt = 64
    lr: PosFloat = 2e-3
    recurrent_check: NonNegInt = 200
    seeds: PosInt = 3

    def problems(self) -> list[str]:
        out = []
        if self.d % self.heads:
            out.append(f"heads: {self.heads} does not divide d = {self.d}")
        grid = 28 // self.patch
        if max(self.dilations) >= grid:
            out.append(f"dilations: {max(self.dilations)} reaches past the {grid}×{grid} token grid")
        return out + split_problems(self.train_size, self.val_size)
