"""Config of the extras.efficiency.orderdp recipe."""

from __future__ import annotations

from dataclasses import dataclass, field


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

    keep: list[float] = field(default_factory=lambda: [0.3, 0.5, 0.7])
    order_q: float = 0.8
    methods: list[str] = field(default_factory=lambda: ["full", "random", "top-q", "OrderDP"])
    dataset: str = "fashion_mnist"
    train_size: int = 30000
    val_size: int = 5000
    test_size: int = 10000
    hidden: int = 256
    epochs: int = 10
    lr: float = 1e-3
    batch_size: int = 128
    label_noise: float = 0.0
    seeds: int = 3
