"""Config of the extras.spiking.diffpc recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.data import split_problems
from agentkit.extras.sweep import SweepConfig


@dataclass
class DiffPCConfig(SweepConfig):
    """DiffPC against float predictive coding and backprop: MLPs on Fashion-MNIST and scikit-learn digits; the
    epoch is picked on validation."""

    datasets: Annotated[list[Literal["fmnist", "digits"]], at.MinLen(1)] = option(
        ["fmnist", "digits"],
        "fmnist (pixels in [0, 1]) and digits (1797 8×8 images in [0, 1], split 60/15/25 stratified)",
    )
    methods: Annotated[list[Literal["diffpc", "pc", "bp"]], at.MinLen(1)] = option(
        ["diffpc", "pc", "bp"],
        "diffpc (PC with ternary change spikes), pc (PC with 32-bit float messages) and bp (backprop, cross-entropy)",
    )
    train_size: PosInt = option(12000, "fmnist: training images (val_size of them held out)")
    val_size: PosInt = option(2000, "fmnist: held-out training images that pick the epoch")
    test_size: PosInt = option(10000, "fmnist: test images")
    hidden: Annotated[list[PosInt], at.MinLen(1)] = option([400], "widths of the ReLU hidden layers")
    epochs: PosInt = option(5, "fmnist: training epochs")
    digits_epochs: PosInt = option(30, "digits: training epochs")
    batch_size: PosInt = option(100, "samples per step")
    lr: PosFloat = option(1e-3, "AdamW's learning rate")
    weight_decay: NonNegFloat = option(1e-4, "AdamW's weight decay")
    steps: PosInt = option(24, "PC relaxation steps with the label clamped")
    gamma: Fraction = option(0.1, "PC relaxation rate")
    m: Annotated[int, at.Interval(ge=-16, le=16)] = option(2, "DiffPC's threshold scale: T_θ(t) = 2^m / 2^(t mod n)")
    n: PosInt = option(8, "DiffPC's threshold period n")
    cycles: PosInt = option(1, "DiffPC: cycles of n steps per layer in the feed-forward sweep")

    def problems(self) -> list[str]:
        return split_problems(self.train_size, self.val_size)
