"""Config of the extras.spiking.bep recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, PosFloat, PosInt


@dataclass
class BEPConfig:
    """BEP against straight-through-estimator QAT and a local rule, binary MLPs on Fashion-MNIST.

    Data: train_size training images (val_size of them held out to pick the epoch), test_size test images,
    binarised at each pixel's training median. Network: 784-hidden…, ±1 weights and activations, fixed random
    ±1 prototypes for the 10 classes. Methods: bep (the binary chain rule through Wᵀ), local (fixed random ±1
    feedback instead of Wᵀ: binary feedback alignment) and ste (float latent weights clipped to [−1, 1],
    sign with the straight-through estimator, Adam at lr, cross-entropy on the prototype scores / √K_L).
    BEP: group γ₀, trigger r, gate ν, reinforcement p_r, initial |H| up to h_init. epochs of batch_size; seeds.
    """

    methods: Annotated[list[Literal["bep", "local", "ste"]], at.MinLen(1)] = field(
        default_factory=lambda: ["bep", "local", "ste"]
    )
    train_size: PosInt = 12000
    val_size: PosInt = 2000
    test_size: PosInt = 10000
    hidden: Annotated[list[PosInt], at.MinLen(1)] = field(default_factory=lambda: [1000, 1000])
    epochs: PosInt = 3
    batch_size: PosInt = 100
    group: PosInt = 4
    r: Fraction = 0.5
    nu: Fraction = 0.01
    p_r: Fraction = 0.5
    h_init: PosInt = 8
    lr: PosFloat = 1e-3
    seeds: PosInt = 3

    def problems(self) -> list[str]:
        bad = [h for h in self.hidden if h % self.group]
        return [f"group: {self.group} does not divide the hidden widths {bad}"] if bad else []
