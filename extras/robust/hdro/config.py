"""Config of the extras.robust.hdro recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegFloat, PosFloat, PosInt


@dataclass
class HDROConfig:
    """ERM, Group DRO and Hierarchical Group DRO on coloured Fashion-MNIST.

    Data (``agentkit.extras.data.coloured_fashion_mnist``): label y = class ≥ 5, colour = y with probability
    train_agree in training and validation, test_agree in test; groups (y, colour). train_size training
    images, of which val_size are held out (same distribution) to pick the epoch by worst-group accuracy;
    test_size test images, scored as they are (standard) and with group shift_group rotated by each angle in
    shift_degs (rotN).
    Model: SmallCNN (hidden units in the penultimate layer z), SGD with momentum 0.9 (lr, weight_decay) for
    epochs. Group DRO and HDRO: η = eta, C = adjust; HDRO: one run per FGSM radius in eps (on z, shrunk per group by n_g^-½); z is a ReLU layer
    of magnitude ~0.1–1 here, and ε ≥ 0.1 collapsed training to a constant prediction (seed 0).
    """

    methods: Annotated[list[Literal["erm", "group_dro", "hdro"]], at.MinLen(1)] = field(
        default_factory=lambda: ["erm", "group_dro", "hdro"]
    )
    train_size: PosInt = 20000
    val_size: PosInt = 4000
    test_size: PosInt = 10000
    train_agree: Fraction = 0.8
    test_agree: Fraction = 0.1
    shift_group: Annotated[int, at.Interval(ge=0, le=3)] = 1
    shift_degs: list[float] = field(default_factory=lambda: [30.0, 90.0])
    hidden: PosInt = 64
    epochs: PosInt = 8
    lr: PosFloat = 0.01
    weight_decay: NonNegFloat = 0.01
    batch_size: PosInt = 128
    eta: PosFloat = 0.01
    adjust: NonNegFloat = 1.0
    eps: Annotated[list[PosFloat], at.MinLen(1)] = field(default_factory=lambda: [0.02, 0.05])
    seeds: PosInt = 3
