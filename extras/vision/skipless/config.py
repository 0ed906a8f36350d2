"""Config of the extras.vision.skipless recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegFloat, PosFloat, PosInt


@dataclass
class SkiplessConfig:
    """A ViT on Fashion-MNIST with skips, skipless with PyTorch's init, and skipless with the paper's init.

    variants: skip | skipless | skipless-init; optimizers: adamw | soap (pytorch-optimizer's SOAP). ViT: depth
    blocks of width d with heads heads on patch×patch patches; paper init α = alpha, β = beta, c = c.
    train_size training images (val_size of them held out to pick the epoch), test_size test images, epochs,
    batch_size, learning rates lr_adamw / lr_soap (warm-up then cosine), weight_decay. At initialisation the
    condition number of each block's attention Jacobian is measured on jacobian_samples training images.
    seeds: repetitions of every (variant, optimizer).
    """

    variants: Annotated[list[Literal["skip", "skipless", "skipless-init"]], at.MinLen(1)] = field(
        default_factory=lambda: ["skip", "skipless", "skipless-init"]
    )
    optimizers: Annotated[list[Literal["adamw", "soap"]], at.MinLen(1)] = field(
        default_factory=lambda: ["adamw", "soap"]
    )
    depth: PosInt = 8
    d: PosInt = 64
    heads: PosInt = 4
    patch: PosInt = 7
    alpha: PosFloat = 2.0
    beta: float = 0.6
    c: float = 3.0
    train_size: PosInt = 10000
    val_size: PosInt = 1000
    test_size: PosInt = 5000
    epochs: PosInt = 3
    batch_size: PosInt = 128
    lr_adamw: PosFloat = 1e-3
    lr_soap: PosFloat = 3e-3
    weight_decay: NonNegFloat = 0.05
    jacobian_samples: PosInt = 4
    seeds: PosInt = 3

    def problems(self) -> list[str]:
        """The ViT's shape: patches tile the 28×28 image, heads split the width."""
        return ([f"patch: {self.patch} does not divide 28"] if 28 % self.patch else []) + (
            [f"heads: {self.heads} does not divide d = {self.d}"] if self.d % self.heads else []
        )
