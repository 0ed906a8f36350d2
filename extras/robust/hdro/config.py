"""Config of the extras.robust.hdro recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class HDROConfig(SweepConfig):
    """ERM, Group DRO and Hierarchical Group DRO on coloured Fashion-MNIST (groups: label × colour)."""

    methods: Annotated[list[Literal["erm", "group_dro", "hdro"]], at.MinLen(1)] = option(
        ["erm", "group_dro", "hdro"], "erm, group_dro and hdro"
    )
    train_size: PosInt = option(
        20000, "coloured Fashion-MNIST training images (val_size of them pick the epoch by worst-group accuracy)"
    )
    val_size: PosInt = option(4000, "held-out training images (same distribution)")
    test_size: PosInt = option(10000, "test images")
    train_agree: Fraction = option(
        0.8, "probability the colour equals the label y (class ≥ 5) in training and validation"
    )
    test_agree: Fraction = option(0.1, "the same in test")
    shift_group: Annotated[int, at.Interval(ge=0, le=3)] = option(
        1, "the group (y, colour) rotated in the shifted test sets"
    )
    shift_degs: list[Annotated[float, at.Interval(ge=-360, le=360)]] = option(
        [30.0, 90.0], "rotation angles of the shifted test sets (rotN)"
    )
    hidden: PosInt = option(64, "units of the penultimate layer z")
    epochs: PosInt = option(8, "training epochs")
    lr: PosFloat = option(0.01, "SGD's learning rate (momentum 0.9)")
    weight_decay: NonNegFloat = option(0.01, "SGD's weight decay")
    batch_size: PosInt = option(128, "images per step")
    eta: PosFloat = option(0.01, "Group DRO and HDRO: the group weights' step η")
    adjust: NonNegFloat = option(1.0, "Group DRO and HDRO: the generalisation adjustment C")
    eps: Annotated[list[PosFloat], at.MinLen(1)] = option(
        [0.02, 0.05], "HDRO: one run per FGSM radius on z (shrunk per group by n_g^-½; ε ≥ 0.1 collapsed training here)"
    )
