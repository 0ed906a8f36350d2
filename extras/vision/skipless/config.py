"""Config of the extras.vision.skipless recipe."""

from __future__ import annotations

from dataclasses import dataclass, field


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

    variants: list[str] = field(default_factory=lambda: ["skip", "skipless", "skipless-init"])
    optimizers: list[str] = field(default_factory=lambda: ["adamw", "soap"])
    depth: int = 8
    d: int = 64
    heads: int = 4
    patch: int = 7
    alpha: float = 2.0
    beta: float = 0.6
    c: float = 3.0
    train_size: int = 10000
    val_size: int = 1000
    test_size: int = 5000
    epochs: int = 3
    batch_size: int = 128
    lr_adamw: float = 1e-3
    lr_soap: float = 3e-3
    weight_decay: float = 0.05
    jacobian_samples: int = 4
    seeds: int = 3
