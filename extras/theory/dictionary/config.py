"""Config of the extras.theory.dictionary recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class DictionaryConfig(SweepConfig):
    """A VAE with an L1 penalty on its decoder's Jacobian against the same VAE plain and with L1 on z, on data from
    known sparse supports: MCC of the latents, F1 of the Jacobian support, and the R² of a block that only
    identifies as a whole."""

    structures: Annotated[list[Literal["diverse", "coupled"]], at.MinLen(1)] = option(
        ["diverse", "coupled"],
        "diverse: every latent identifiable; coupled: latents 0 and 1 always co-occur (only their block is)",
    )
    latents: Annotated[int, at.Interval(ge=3, le=12)] = option(5, "true (and learned) latents K; 2K observed")
    methods: Annotated[list[Literal["vae", "l1_z", "l1_jacobian"]], at.MinLen(1)] = option(
        ["vae", "l1_z", "l1_jacobian"],
        "vae (no penalty); l1_z (alpha_z·‖μ(x)‖₁); l1_jacobian (α·‖D_ẑĝ‖₁, one run per value of alphas)",
    )
    alphas: Annotated[list[PosFloat], at.MinLen(1)] = option(
        [0.05, 0.5, 3.0], "weights α of the decoder-Jacobian penalty (0.05 is the paper's)"
    )
    alpha_z: PosFloat = option(1.0, "weight of l1_z's penalty on the encoded means")
    samples: Annotated[int, at.Ge(100)] = option(6000, "rows drawn; 2/3 train, 1/6 validation, 1/6 test")
    noise: NonNegFloat = option(0.05, "observation noise std (each observed is standardised)")
    hidden: PosInt = option(64, "hidden units of the encoder's and decoder's two layers")
    sigma_x: PosFloat = option(0.1, "the decoder's fixed likelihood std (the ELBO's reconstruction weight 1/2σ²)")
    steps: PosInt = option(3000, "training steps")
    batch_size: PosInt = option(256, "rows per step")
    jac_batch: PosInt = option(64, "rows per step whose decoder Jacobian is penalised")
    lr: PosFloat = option(1e-3, "Adam's learning rate")
    eval_every: PosInt = option(500, "steps between validations (the step with the best validation ELBO is kept)")
    threshold: Annotated[float, at.Interval(gt=0, lt=1)] = option(
        0.2, "support_f1: a learned dependency counts when its mean |Jacobian| is this share of its row's largest"
    )
