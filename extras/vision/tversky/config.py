"""Config of the extras.vision.tversky recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt


@dataclass
class TverskyConfig:
    """Tversky projection layer against nn.Linear, three demonstrations.

    XOR: one layer (2 → 2 classes) trained on the four points of XOR for xor_steps Adam steps at xor_lr,
    xor_seeds seeds per feature-bank size in xor_banks; a run converges when all four points are strictly
    classified. nn.Linear cannot exceed 75 %.
    Frozen features: a small CNN trained for cnn_epochs on train_size Fashion-MNIST images (dataset:
    fashion_mnist, or digits for scikit-learn's 8×8 digits) is frozen; a linear head and a Tversky head
    (head_bank features) are trained on its standardised features for head_epochs; the learning rate (from
    head_lrs), the Tversky head's normalisation and the epoch are picked on val_size held-out training images;
    test accuracy on test_size test images; seeds seeds (each with its own CNN).
    Prototypes: a Tversky layer on raw pixels (proto_bank features, proto_epochs); its prototypes and first
    features are plotted as images.
    """

    xor_banks: Annotated[list[PosInt], at.MinLen(1)] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32])
    xor_seeds: PosInt = 20
    xor_steps: PosInt = 500
    xor_lr: PosFloat = 0.05
    dataset: Literal["fashion_mnist", "digits"] = "fashion_mnist"
    train_size: PosInt = 10000
    val_size: PosInt = 2000
    test_size: PosInt = 5000
    seeds: PosInt = 3
    cnn_epochs: PosInt = 3
    feature_dim: PosInt = 64
    head_epochs: PosInt = 15
    head_lrs: Annotated[list[PosFloat], at.MinLen(1)] = field(default_factory=lambda: [1e-3, 3e-3, 1e-2])
    head_bank: PosInt = 64
    proto_bank: PosInt = 64
    proto_epochs: PosInt = 5
    batch_size: PosInt = 128
