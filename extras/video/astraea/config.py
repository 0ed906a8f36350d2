"""Config of the extras.video.astraea recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig, device_problems

Share = Annotated[float, at.Interval(gt=0, lt=1)]


@dataclass
class AstraeaConfig(SweepConfig):
    """Astraea (a scored token selection and genetically searched per-step token budgets) against a uniform budget,
    random tokens and timestep skipping at the same mean compute, on a small video DiT trained here by flow matching
    on moving Fashion-MNIST. Quality is measured against the full model's samples from the same noise."""

    methods: Annotated[list[Literal["astraea", "uniform", "random", "skip"]], at.MinLen(1)] = option(
        ["astraea", "uniform", "random", "skip"],
        "astraea (score + searched budgets); uniform (score, the same budget every step); random (random tokens, "
        "uniform budget); skip (timestep skipping: whole steps reuse the previous velocity)",
    )
    budgets: Annotated[list[Share], at.MinLen(1)] = option(
        [0.3, 0.5, 0.7], "mean shares of tokens recomputed per step (the speed targets), step 0 included (full)"
    )
    frames: Annotated[int, at.Ge(2)] = option(8, "frames per clip")
    size: Annotated[int, at.Ge(14)] = option(32, "frame side (px)")
    items: Annotated[list[Annotated[int, at.Ge(1)]], at.Len(2, 2)] = option([1, 2], "least and most garments per clip")
    train_clips: Annotated[int, at.Ge(16)] = option(6000, "training clips (seeded per seed)")
    val_clips: Annotated[int, at.Ge(4)] = option(128, "validation clips (the DiT's checkpoint is picked on them)")
    patch: PosInt = option(8, "patch side: N = frames · (size / patch)² tokens (128 at the defaults)")
    dim: PosInt = option(64, "DiT width")
    depth: PosInt = option(4, "DiT blocks")
    heads: PosInt = option(4, "attention heads")
    train_steps: PosInt = option(3000, "flow-matching steps")
    batch: PosInt = option(16, "clips per step")
    lr: PosFloat = option(1e-3, "AdamW's peak learning rate (linear warm-up, cosine decay)")
    evals: PosInt = option(5, "validation checks (the state with the lowest validation flow loss is kept)")
    euler_steps: Annotated[int, at.Ge(2)] = option(20, "Euler sampling steps (the paper's vDiTs: 30–50)")
    test_clips: Annotated[int, at.Ge(2)] = option(32, "test noises: each method's samples against the full model's")
    ga_clips: Annotated[int, at.Ge(1)] = option(4, "calibration noises the search's fitness is measured on")
    ga_parents: PosInt = option(12, "the genetic search's population (50 in the paper)")
    ga_children: PosInt = option(8, "children per generation (30 in the paper)")
    ga_generations: Annotated[int, at.Ge(0)] = option(6, "generations (30 in the paper)")
    min_budget: Share = option(0.05, "the least share a step may recompute")
    timing_repeats: PosInt = option(
        3, "back-to-back timings of the full sampler and each method (the median speed-up is kept)"
    )
    device: str = option("cpu", "torch device (cuda runs the same config on a GPU)")

    def problems(self) -> list[str]:
        out = []
        if self.size % self.patch:
            out.append(f"patch: {self.patch} does not divide size {self.size}")
        if self.dim % self.heads:
            out.append(f"heads: {self.heads} does not divide dim {self.dim}")
        if self.items[0] > self.items[1]:
            out.append(f"items: {self.items} must be [least, most]")
        for b in self.budgets:
            if b * self.euler_steps < 1 + (self.euler_steps - 1) * self.min_budget:
                out.append(
                    f"budgets: {b} is below step 0 (full) and min_budget {self.min_budget} on the other "
                    f"{self.euler_steps - 1} steps"
                )
        out += device_problems(self.device)
        if self.ga_parents < 2:
            out.append("ga_parents: the search needs at least 2 parents")
        return out
