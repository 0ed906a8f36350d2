"""Config of the extras.spiking.bep recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegInt, PosFloat, PosInt, option
from agentkit.extras.data import split_problems
from agentkit.extras.sweep import SweepConfig


@dataclass
class BEPConfig(SweepConfig):
    """BEP against straight-through-estimator QAT and a local rule: a binary MLP on Fashion-MNIST and a binary
    RNN (BEP-TT) on UCR GunPoint."""

    methods: Annotated[list[Literal["bep", "local", "ste"]], at.MinLen(1)] = option(
        ["bep", "local", "ste"],
        "bep (the binary chain rule through Wᵀ), local (fixed random ±1 feedback) and ste (float latent weights, straight-through QAT)",
    )
    group: PosInt = option(4, "BEP and local: group size γ₀ of the prototype scores")
    p_r: Fraction = option(0.5, "BEP and local: reinforcement probability p_r")
    h_init: PosInt = option(8, "BEP and local: initial |H| up to this")
    # MLP on Fashion-MNIST
    train_size: PosInt = option(
        12000, "MLP: Fashion-MNIST training images, binarised at each pixel's training median (val_size held out)"
    )
    val_size: PosInt = option(2000, "MLP: held-out training images")
    test_size: PosInt = option(10000, "MLP: test images")
    hidden: Annotated[list[PosInt], at.MinLen(1)] = option(
        [1000, 1000], "MLP: widths of the ±1 hidden layers (10 fixed ±1 prototypes follow)"
    )
    epochs: PosInt = option(3, "MLP: training epochs (the epoch picked on validation)")
    batch_size: PosInt = option(100, "MLP: images per step")
    nu_grid: Annotated[list[Fraction], at.MinLen(1)] = option(
        [0.01, 0.05, 0.2], "MLP: gate ν values bep and local pick from on validation (seed 0)"
    )
    r_grid: Annotated[list[Fraction], at.MinLen(1)] = option([0.5, 1.0], "MLP: trigger r values picked with ν")
    select_epochs: PosInt = option(1, "MLP: epochs of each (ν, r) candidate")
    lr: PosFloat = option(1e-3, "MLP: STE's Adam learning rate")
    # RNN on GunPoint
    rnn: bool = option(True, "also train the binary RNN (BEP-TT) on UCR GunPoint")
    rnn_val: PosInt = option(10, "RNN: of GunPoint's 50 training series, those held out")
    rnn_stride: PosInt = option(15, "RNN: series averaged over windows of this many points")
    rnn_levels: PosInt = option(32, "RNN: thermometer code levels (training quantiles)")
    rnn_hidden: PosInt = option(32, "RNN: ±1 recurrent units")
    rnn_nu: Fraction = option(0.2, "RNN: BEP-TT and local's gate ν")
    rnn_r: Fraction = option(1.0, "RNN: their trigger r")
    rnn_depths: Annotated[list[NonNegInt], at.MinLen(1)] = option(
        [1, 3, 0], "RNN: truncation depths picked from on validation per seed (0: all steps)"
    )
    rnn_epochs: PosInt = option(60, "RNN: training epochs")
    rnn_batch_size: PosInt = option(10, "RNN: series per step")
    rnn_lr: PosFloat = option(1e-2, "RNN: STE's Adam learning rate (BPTT)")

    def problems(self) -> list[str]:
        out = []
        bad = [h for h in [*self.hidden, self.rnn_hidden] if h % self.group]
        if bad:
            out.append(f"group: {self.group} does not divide the hidden widths {bad}")
        if self.rnn and not 2 <= self.rnn_val <= 40:
            out.append(f"rnn_val: {self.rnn_val} must leave both classes in GunPoint's 50 training series (2 … 40)")
        out += split_problems(self.train_size, self.val_size)
        if self.rnn and self.rnn_stride > 75:
            out.append(f"rnn_stride: {self.rnn_stride} leaves fewer than 2 steps of GunPoint's 150")
        return out
