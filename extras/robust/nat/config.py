"""Config of the extras.robust.nat recipe."""

from __future__ import annotations

from dataclasses import dataclass

from agentkit.config import NonNegFloat, PosFloat, PosInt


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

    train_size: PosInt = 9000
    val_size: PosInt = 1000
    test_size: PosInt = 2000
    natural_epochs: PosInt = 5
    epochs: PosInt = 4
    eps: PosFloat = 0.1
    alpha: PosFloat = 0.02
    steps: PosInt = 10
    test_steps: PosInt = 20
    test_alpha: PosFloat = 0.01
    lam: NonNegFloat = 0.06
    tau: PosFloat = 4.0
    lr: PosFloat = 0.05
    weight_decay: NonNegFloat = 5e-4
    batch_size: PosInt = 128
    seeds: PosInt = 3
