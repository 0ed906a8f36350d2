"""Config of the extras.efficiency.orderdp recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, PosFloat, PosInt


@dataclass
class OrderDPConfig:
    """OrderDP against full data, random pruning and plain top-q, at the same kept fractions.

    keep: kept fractions per epoch (1 − pruning ratio). order_q: OrderDP's ρ_q (its pool is ρ_s = keep / ρ_q of
    the data, so keep must not exceed order_q). dataset: fashion_mnist (train_size training images, the
    first val_size of them held out for picking the epoch, test_size test images) or digits. An MLP (hidden
    units) trains for epochs with Adam (lr, batch_size); label_noise flips that share of training labels (0:
    clean data). seeds: repetitions. Reported: test accuracy at the best validation epoch, wall time and
    samples trained on.
    """

    keep: Annotated[list[Annotated[float, at.Interval(gt=0, le=1)]], at.MinLen(1)] = field(
        default_factory=lambda: [0.3, 0.5, 0.7]
    )
    order_q: Annotated[float, at.Interval(gt=0, le=1)] = 0.8
    methods: Annotated[list[Literal["full", "random", "top-q", "OrderDP"]], at.MinLen(1)] = field(
        default_factory=lambda: ["full", "random", "top-q", "OrderDP"]
    )
    dataset: Literal["fashion_mnist", "digits"] = "fashion_mnist"
    train_size: PosInt = 30000
    val_size: PosInt = 5000
    test_size: PosInt = 10000
    hidden: PosInt = 256
    epochs: PosInt = 10
    lr: PosFloat = 1e-3
    batch_size: PosInt = 128
    label_noise: Fraction = 0.0
    seeds: PosInt = 3
