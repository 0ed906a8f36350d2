"""Config of the extras.spiking.diffpc recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, PosFloat, PosInt
from agentkit.extras.data import split_problems


@dataclass
class DiffPCConfig:
    """DiffPC against float predictive coding and backprop: MLPs on Fashion-MNIST and scikit-learn digits.

    Data: fmnist (train_size training images, val_size of them held out, test_size test images; pixels in
    [0, 1]) and digits (1797 8×8 images scaled to [0, 1], split 60/15/25 stratified). Network: inputs-hidden…-10,
    ReLU. Methods: diffpc (PC whose messages are ternary change spikes: T_θ(t) = 2^m / 2^{t mod n}, `cycles` of n
    steps per layer for the feed-forward sweep), pc (the same PC with 32-bit float messages) and bp (backprop,
    cross-entropy). PC clamps the one-hot label on the output and relaxes `steps` steps at rate gamma; all
    methods train with AdamW at lr (weight_decay) for epochs of batch_size; the epoch is picked on validation.
    """

    datasets: Annotated[list[Literal["fmnist", "digits"]], at.MinLen(1)] = field(
        default_factory=lambda: ["fmnist", "digits"]
    )
    methods: Annotated[list[Literal["diffpc", "pc", "bp"]], at.MinLen(1)] = field(
        default_factory=lambda: ["diffpc", "pc", "bp"]
    )
    train_size: PosInt = 12000
    val_size: PosInt = 2000
    test_size: PosInt = 10000
    hidden: Annotated[list[PosInt], at.MinLen(1)] = field(default_factory=lambda: [400])
    epochs: PosInt = 5
    digits_epochs: PosInt = 30
    batch_size: PosInt = 100
    lr: PosFloat = 1e-3
    weight_decay: float = 1e-4
    steps: PosInt = 24
    gamma: Fraction = 0.1
    m: int = 2
    n: PosInt = 8
    cycles: PosInt = 1
    seeds: PosInt = 3

    def problems(self) -> list[str]:
        return split_problems(self.train_size, self.val_size)
