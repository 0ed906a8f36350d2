"""Config of the extras.vision.tversky recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class TverskyConfig(SweepConfig):
    """Tversky projection layer against nn.Linear: XOR with one layer, heads on frozen CNN features, and
    prototypes learned on raw pixels (plotted as images)."""

    xor_banks: Annotated[list[PosInt], at.MinLen(1)] = option(
        [1, 2, 4, 8, 16, 32], "XOR: feature-bank sizes K of the Tversky layer"
    )
    xor_seeds: PosInt = option(
        20, "XOR: seeds per bank size (a run converges when all four points are strictly right; nn.Linear cannot)"
    )
    xor_steps: PosInt = option(500, "XOR: full-batch Adam steps")
    xor_lr: PosFloat = option(0.05, "XOR: Adam's learning rate")
    dataset: Literal["fashion_mnist", "digits"] = option(
        "fashion_mnist", "frozen features: fashion_mnist, or digits (scikit-learn's 8×8)"
    )
    train_size: PosInt = option(
        10000, "frozen features: training images (val_size of them pick learning rate, variant and epoch)"
    )
    val_size: PosInt = option(2000, "frozen features: held-out training images")
    test_size: PosInt = option(5000, "frozen features: test images")
    cnn_epochs: PosInt = option(3, "frozen features: epochs of the small CNN (its own per seed)")
    feature_dim: PosInt = option(64, "frozen features: the CNN's feature width")
    head_epochs: PosInt = option(15, "frozen features: epochs of each head")
    head_lrs: Annotated[list[PosFloat], at.MinLen(1)] = option(
        [1e-3, 3e-3, 1e-2], "frozen features: learning rates each head picks from on validation"
    )
    head_bank: PosInt = option(64, "frozen features: the Tversky head's feature-bank size")
    proto_bank: PosInt = option(64, "prototypes: the raw-pixel Tversky layer's feature-bank size")
    proto_epochs: PosInt = option(5, "prototypes: its epochs")
    batch_size: PosInt = option(128, "images per step")
