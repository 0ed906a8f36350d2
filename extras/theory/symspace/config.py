"""Config of the extras.theory.symspace recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class SymSpaceConfig(SweepConfig):
    """Symmetric-space latents (Cartan bases in so(n), exp(P) conditioning a flow-matching decoder, geodesic-symmetry
    consistency) against the same flow without L_Cartan and L_GSC and a VAE: do samples reach a held-out region?"""

    tasks: Annotated[list[Literal["sphere", "sprites"]], at.MinLen(1)] = option(
        ["sphere", "sprites"],
        "sphere: points on S², trained on azimuth 0–270°, the 270–360° arc held out; sprites: dSprites-like "
        "images of a square, positions with x > 0.5 and y > 0.5 held out",
    )
    methods: Annotated[list[Literal["symspace", "cfm", "vae", "no_gsc", "no_cartan"]], at.MinLen(1)] = option(
        ["symspace", "cfm", "vae", "no_gsc", "no_cartan"],
        "symspace (every loss); cfm (the same model without L_Cartan and L_GSC); vae (same encoder, MLP decoder); "
        "no_gsc and no_cartan (one of the two dropped)",
    )
    train_size: Annotated[int, at.Ge(16)] = option(6000, "training samples (seen region only)")
    eval_size: Annotated[int, at.Ge(16)] = option(
        2000,
        "generated samples, and reference samples drawn from the whole space (half as many from the held-out region)",
    )
    algebra_n: Annotated[int, at.Interval(ge=2, le=8)] = option(3, "the latent Lie algebra is so(n)")
    k_dim: Annotated[int, at.Ge(0)] = option(1, "size of the learnable basis of 𝔨")
    hidden: PosInt = option(128, "width of the two hidden layers of every network (sphere)")
    sprite_hidden: PosInt = option(256, "the same for sprites")
    sprite_size: Annotated[int, at.Interval(ge=8, le=32)] = option(12, "sprite images are size × size pixels")
    steps: PosInt = option(3000, "training steps (every method the same; no selection)")
    batch_size: PosInt = option(256, "samples per step")
    lr: PosFloat = option(1e-3, "Adam's learning rate")
    kl_weight: NonNegFloat = option(0.01, "weight of L_KL (the VAE's too)")
    cartan_weight: NonNegFloat = option(1.0, "weight of L_Cartan")
    gsc_weight: NonNegFloat = option(1.0, "weight of L_GSC")
    basis_weight: NonNegFloat = option(1e-3, "weight of L_basis")
    sigma_min: Annotated[float, at.Interval(ge=0, lt=1)] = option(1e-4, "the flow path's width at t = 1")
    euler_steps: PosInt = option(32, "Euler steps when sampling the flow")

    def problems(self) -> list[str]:
        room = self.algebra_n * (self.algebra_n - 1) // 2
        if self.k_dim + 2 > room:
            return [f"k_dim: {self.k_dim} + the 2 directions of 𝔭 exceed so({self.algebra_n})'s {room} dimensions"]
        return []
