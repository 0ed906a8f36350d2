"""Config of the extras.robust.nat recipe."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class NATConfig:
    """Natural training, PGD adversarial training and NAT on Fashion-MNIST with a small CNN.

    train_size training images (val_size of them held out to pick the epoch by PGD accuracy), test_size test
    images. Natural training: natural_epochs; PGD-AT and NAT: epochs, each step on PGD examples (eps, alpha,
    steps, random start). NAT adds −λτ²·KL against the seed's natural model (lam, tau). SGD with momentum 0.9
    (lr, weight_decay, cosine decay), batch_size. Test: clean accuracy, PGD-test_steps accuracy with CE and
    with the CW margin loss (step test_alpha), their per-sample worst case, and the entropy of the non-true
    classes. seeds: repetitions.
    """

    train_size: int = 9000
    val_size: int = 1000
    test_size: int = 2000
    natural_epochs: int = 5
    epochs: int = 4
    eps: float = 0.1
    alpha: float = 0.02
    steps: int = 10
    test_steps: int = 20
    test_alpha: float = 0.01
    lam: float = 0.06
    tau: float = 4.0
    lr: float = 0.05
    weight_decay: float = 5e-4
    batch_size: int = 128
    seeds: int = 3
