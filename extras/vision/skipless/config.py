"""Config of the extras.vision.skipless recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class SkiplessConfig(SweepConfig):
    """A ViT on Fashion-MNIST with skips, skipless with PyTorch's init, and skipless with the paper's init."""

    variants: Annotated[list[Literal["skip", "skipless", "skipless-init"]], at.MinLen(1)] = option(
        ["skip", "skipless", "skipless-init"],
        "skip (standard), skipless (PyTorch's init), skipless-init (the paper's init)",
    )
    optimizers: Annotated[list[Literal["adamw", "soap"]], at.MinLen(1)] = option(
        ["adamw", "soap"], "adamw, soap (pytorch-optimizer's SOAP)"
    )
    depth: PosInt = option(8, "ViT blocks")
    d: PosInt = option(64, "ViT width")
    heads: PosInt = option(4, "attention heads")
    patch: PosInt = option(7, "patch size in pixels (must divide 28)")
    alpha: PosFloat = option(2.0, "the paper's init: α")
    beta: NonNegFloat = option(0.6, "the paper's init: β")
    c: PosFloat = option(3.0, "the paper's init: c")
    train_size: PosInt = option(10000, "Fashion-MNIST training images (val_size of them pick the epoch)")
    val_size: PosInt = option(1000, "held-out training images")
    test_size: PosInt = option(5000, "test images")
    epochs: PosInt = option(3, "training epochs")
    batch_size: PosInt = option(128, "images per step")
    lr_adamw: PosFloat = option(1e-3, "AdamW's peak learning rate (warm-up, then cosine)")
    lr_soap: PosFloat = option(3e-3, "SOAP's peak learning rate")
    weight_decay: NonNegFloat = option(0.05, "weight decay of both optimizers")
    jacobian_samples: PosInt = option(
        4, "training images the attention Jacobian's condition number is measured on at init"
    )

    def problems(self) -> list[str]:
        """The ViT's shape: patches tile the 28×28 image, heads split the width."""
        return ([f"patch: {self.patch} does not divide 28"] if 28 % self.patch else []) + (
            [f"heads: {self.heads} does not divide d = {self.d}"] if self.d % self.heads else []
        )
