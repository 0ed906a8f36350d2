"""Config of the extras.efficiency.orderdp recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class OrderDPConfig(SweepConfig):
    """OrderDP against full data, random pruning and plain top-q, at the same kept fractions: test accuracy at
    the best validation epoch, wall time and samples trained on."""

    keep: Annotated[list[Annotated[float, at.Interval(gt=0, le=1)]], at.MinLen(1)] = option(
        [0.3, 0.5, 0.7], "kept fractions of the data per epoch (1 − pruning ratio); each at most order_q"
    )
    order_q: Annotated[float, at.Interval(gt=0, le=1)] = option(
        0.8, "OrderDP's ρ_q (its pool is ρ_s = keep / ρ_q of the data)"
    )
    methods: Annotated[list[Literal["full", "random", "top-q", "OrderDP"]], at.MinLen(1)] = option(
        ["full", "random", "top-q", "OrderDP"], "full (all data), random pruning, top-q and OrderDP"
    )
    dataset: Literal["fashion_mnist", "digits"] = option(
        "fashion_mnist", "fashion_mnist or digits (scikit-learn's 8×8)"
    )
    train_size: PosInt = option(30000, "Fashion-MNIST training images (the first val_size held out to pick the epoch)")
    val_size: PosInt = option(5000, "held-out training images that pick the epoch")
    test_size: PosInt = option(10000, "Fashion-MNIST test images")
    hidden: PosInt = option(256, "the MLP's hidden units")
    epochs: PosInt = option(10, "training epochs")
    lr: PosFloat = option(1e-3, "Adam's learning rate")
    batch_size: PosInt = option(128, "images per step")
    label_noise: Fraction = option(0.0, "share of training labels flipped (0: clean data)")
