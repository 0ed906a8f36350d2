"""Config of the extras.world.lpwm recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig, device_problems


@dataclass
class LPWMConfig(SweepConfig):
    """LPWM (latent particles, a causal spatio-temporal transformer and per-particle latent actions) against the
    same model without latent actions (deterministic dynamics), on seeded sprite videos that turn at random, and on
    an action-conditioned variant where one sprite follows given actions."""

    methods: Annotated[list[Literal["lpwm", "deterministic", "lpwm_action"]], at.MinLen(1)] = option(
        ["lpwm", "deterministic", "lpwm_action"],
        "lpwm (latent actions: inverse model in training, latent policy at inference); deterministic (the same "
        "model without latent actions); lpwm_action (latent actions and the given actions; action videos only)",
    )
    datasets: Annotated[list[Literal["turns", "action"]], at.MinLen(1)] = option(
        ["turns", "action"],
        "turns (sprites turn by 45–135° at random frames); action (sprite 0 follows given compass actions, the "
        "others bounce without turning)",
    )
    train_clips: PosInt = option(400, "training clips of each dataset")
    val_clips: PosInt = option(32, "validation clips of each dataset (the kept checkpoints' selection)")
    test_clips: PosInt = option(48, "test clips of each dataset")
    frames: Annotated[int, at.Ge(3)] = option(14, "frames a clip (context + predicted)")
    context: PosInt = option(4, "context frames a rollout starts from (the rest are predicted)")
    size: Annotated[int, at.Ge(16)] = option(64, "frame side (px; a multiple of patch)")
    sprites: Annotated[list[Annotated[int, at.Interval(ge=1, le=6)]], at.Len(2, 2)] = option(
        [3, 6], "fewest and most sprites a clip"
    )
    turn: Annotated[float, at.Interval(ge=0, le=1)] = option(0.15, "chance a sprite turns at a frame (turns)")
    redraw: Annotated[float, at.Interval(ge=0, le=1)] = option(0.25, "chance the agent's action changes (action)")
    patch: PosInt = option(8, "proposal patch side (px): (size / patch)² keypoint proposals")
    particles: PosInt = option(
        12, "particles rendered a frame: the sharpest of the (size / patch)² (the official n_kp_dec; balls: 12)"
    )
    features: PosInt = option(4, "visual features a particle (the official learned_feature_dim: 4)")
    bg_features: PosInt = option(4, "background latent dimension")
    anchor_s: Annotated[float, at.Interval(gt=0, lt=1)] = option(0.25, "glimpse size as a share of the frame")
    glimpse: Annotated[int, at.Ge(4)] = option(16, "glimpse side (px; a multiple of 4)")
    width: PosInt = option(32, "the DLP's CNN width")
    beta_kl: PosFloat = option(0.08, "β_KL: the posterior KLs' weight (official: 0.08)")
    beta_obj: Annotated[float, at.Ge(0)] = option(0.08, "β_obj: the transparency term's weight (official: 0.08)")
    beta_dyn: PosFloat = option(0.2, "β_dyn: the dynamic and latent-action KLs' weight (official: 0.2)")
    context_dim: PosInt = option(7, "latent action dimension a particle (official context_dim: 7)")
    dlp_steps: PosInt = option(1300, "DLP warm-up steps (frames only, before any dynamics; shared by the methods)")
    dlp_batch: PosInt = option(16, "frames a DLP step")
    dlp_lr: PosFloat = option(2e-3, "the DLP's Adam learning rate (official: 8e-5 over 150 epochs)")
    dyn_steps: PosInt = option(500, "dynamics steps of each method")
    dyn_batch: PosInt = option(8, "clips a dynamics step")
    dyn_lr: PosFloat = option(1e-3, "the dynamics' Adam learning rate")
    dim: PosInt = option(32, "the transformers' width (official: 512)")
    layers: PosInt = option(3, "dynamics layers (official: 6)")
    context_layers: PosInt = option(1, "latent-action (context) layers (official: 4)")
    heads: PosInt = option(4, "attention heads")
    samples: Annotated[int, at.Ge(1)] = option(5, "rollouts a test clip (best-of-k)")
    evals: PosInt = option(4, "validation checks of each training (the best state is kept)")
    shown: Annotated[int, at.Ge(0)] = option(2, "test clips in the rollout strips (seed 0)")
    device: str = option("cpu", "torch device (cuda runs the same config on a GPU)")

    def problems(self) -> list[str]:
        out = []
        if self.size % self.patch:
            out.append(f"size: {self.size} is not a multiple of patch {self.patch}")
        elif self.particles > (self.size // self.patch) ** 2:
            out.append(f"particles: {self.particles} is more than the {(self.size // self.patch) ** 2} proposals")
        if self.patch % 2:
            out.append(f"patch: {self.patch} must be even (proposals come from a half-resolution heat map)")
        if self.glimpse % 4:
            out.append(f"glimpse: {self.glimpse} is not a multiple of 4")
        if self.context >= self.frames:
            out.append(f"context: {self.context} leaves no frame to predict of {self.frames}")
        if self.sprites[0] > self.sprites[1]:
            out.append(f"sprites: {self.sprites} is not [fewest, most]")
        if "lpwm_action" in self.methods and "action" not in self.datasets:
            out.append("methods: lpwm_action needs the action dataset in datasets")
        out += device_problems(self.device)
        return out
