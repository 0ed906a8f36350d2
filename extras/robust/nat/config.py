"""Config of the extras.robust.nat recipe."""

from __future__ import annotations

from dataclasses import dataclass

from agentkit.config import NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class NATConfig(SweepConfig):
    """Natural training, PGD adversarial training and NAT on Fashion-MNIST with a small CNN: clean accuracy, PGD
    accuracy (CE, CW margin, their per-sample worst) and the entropy of the non-true classes."""

    train_size: PosInt = option(9000, "Fashion-MNIST training images (val_size of them pick the epoch by PGD accuracy)")
    val_size: PosInt = option(1000, "held-out training images")
    test_size: PosInt = option(2000, "test images")
    natural_epochs: PosInt = option(5, "epochs of natural training")
    epochs: PosInt = option(4, "epochs of PGD-AT and NAT")
    eps: PosFloat = option(0.1, "the L∞ radius ε of training and test attacks")
    alpha: PosFloat = option(0.02, "PGD's step in training")
    steps: PosInt = option(10, "PGD's steps in training (random start)")
    test_steps: PosInt = option(20, "PGD's steps at test, with CE and with the CW margin loss")
    test_alpha: PosFloat = option(0.01, "PGD's step at test")
    lam: NonNegFloat = option(0.06, "NAT's λ in −λτ²·KL against the seed's natural model")
    tau: PosFloat = option(4.0, "NAT's temperature τ")
    lr: PosFloat = option(0.05, "SGD's learning rate (momentum 0.9, one-cycle schedule)")
    weight_decay: NonNegFloat = option(5e-4, "SGD's weight decay")
    batch_size: PosInt = option(128, "images per step")
