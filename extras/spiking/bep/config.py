"""Config of the extras.spiking.bep recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegInt, PosFloat, PosInt
from agentkit.extras.data import split_problems


@dataclass
class BEPConfig:
    """BEP against straight-through-estimator QAT and a local rule: a binary MLP on Fashion-MNIST and a binary
    RNN (BEP-TT) on UCR GunPoint.

    Methods: bep (the binary chain rule through Wᵀ), local (fixed random ±1 feedback instead of Wᵀ: binary
    feedback alignment) and ste (float latent weights clipped to [−1, 1], sign with the straight-through
    estimator, Adam, cross-entropy on 4·(prototype scores)/√K_L). BEP and the local rule share group γ₀,
    reinforcement p_r and initial |H| up to h_init; their gate ν and trigger r are picked on validation.

    MLP: train_size Fashion-MNIST training images (val_size of them held out), test_size test images,
    binarised at each pixel's training median; 784-hidden… ±1 layers and 10 fixed ±1 prototypes. Each of bep
    and local picks (ν, r) from nu_grid × r_grid by validation accuracy after select_epochs epochs (seed 0);
    then every method trains epochs of batch_size per seed (STE at lr), the epoch picked on validation.

    RNN (rnn: false skips it): GunPoint's 50 training series (rnn_val of them held out) and 150 test series,
    averaged over windows of rnn_stride points, each point thermometer-coded at rnn_levels training
    quantiles; one recurrent layer of rnn_hidden ±1 units, h_T scored against 2 prototypes. BEP-TT and the
    local rule use ν = rnn_nu, r = rnn_r and pick the truncation depth (steps the error crosses back; 0: all)
    from rnn_depths on validation, per seed; rnn_epochs of rnn_batch_size (STE: BPTT at rnn_lr).
    """

    methods: Annotated[list[Literal["bep", "local", "ste"]], at.MinLen(1)] = field(
        default_factory=lambda: ["bep", "local", "ste"]
    )
    seeds: PosInt = 3
    group: PosInt = 4
    p_r: Fraction = 0.5
    h_init: PosInt = 8
    # MLP on Fashion-MNIST
    train_size: PosInt = 12000
    val_size: PosInt = 2000
    test_size: PosInt = 10000
    hidden: Annotated[list[PosInt], at.MinLen(1)] = field(default_factory=lambda: [1000, 1000])
    epochs: PosInt = 3
    batch_size: PosInt = 100
    nu_grid: Annotated[list[Fraction], at.MinLen(1)] = field(default_factory=lambda: [0.01, 0.05, 0.2])
    r_grid: Annotated[list[Fraction], at.MinLen(1)] = field(default_factory=lambda: [0.5, 1.0])
    select_epochs: PosInt = 1
    lr: PosFloat = 1e-3
    # RNN on GunPoint
    rnn: bool = True
    rnn_val: PosInt = 10
    rnn_stride: PosInt = 15
    rnn_levels: PosInt = 32
    rnn_hidden: PosInt = 32
    rnn_nu: Fraction = 0.2
    rnn_r: Fraction = 1.0
    rnn_depths: Annotated[list[NonNegInt], at.MinLen(1)] = field(default_factory=lambda: [1, 3, 0])
    rnn_epochs: PosInt = 60
    rnn_batch_size: PosInt = 10
    rnn_lr: PosFloat = 1e-2

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
