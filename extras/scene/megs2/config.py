"""Config of the extras.scene.megs2 recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras import data
from agentkit.extras.sweep import SweepConfig, device_problems

Share = Annotated[float, at.Interval(gt=0, lt=1)]


@dataclass
class MEGS2Config(SweepConfig):
    """MEGS² (spherical-Gaussian colour lobes, primitives and lobes pruned together under one memory budget by
    ADMM) against SH-3 with sequential pruning (opacity, then SH degree: LightGaussian-style) and lobes with
    sequential pruning, at equal static memory, on procedural objects with view-dependent (Blinn-Phong) colour."""

    methods: Annotated[list[Literal["megs2", "lobes_seq", "sh3_seq"]], at.MinLen(1)] = option(
        ["megs2", "lobes_seq", "sh3_seq"],
        "megs2 (lobes, unified ADMM pruning of primitives and lobes); lobes_seq (lobes: opacity pruning, then the "
        "weakest lobes); sh3_seq (SH-3: opacity pruning, then SH degree cuts, LightGaussian-style)",
    )
    budgets: Annotated[list[Share], at.MinLen(1)] = option(
        [0.15, 0.3], "static memory budgets, as shares of the dense SH-3 model's floats"
    )
    category: Literal[tuple(data.SDF_CATEGORIES)] | None = option(  # type: ignore[valid-type]
        None, "the object's category (None: one drawn per seed)"
    )
    views: Annotated[int, at.Ge(4)] = option(48, "rendered views (every test_every-th held out)")
    test_every: Annotated[int, at.Ge(2)] = option(6, "every test_every-th view is a test view (48 / 6: 40 + 8)")
    size: Annotated[int, at.Ge(8)] = option(64, "image side (px)")
    gaussians: PosInt = option(1500, "Gaussians, initialised at training views' surface hits")
    lobes: PosInt = option(3, "spherical-Gaussian lobes a primitive (the paper's 3)")
    dense_steps: PosInt = option(400, "steps of each dense model (SH-3 and lobes; one training view a step)")
    prune_steps: PosInt = option(150, "steps after the dense model, the same for every method and budget")
    admm_share: Share = option(0.6, "share of prune_steps MEGS² spends under ADMM (the rest fine-tunes the support)")
    admm_every: PosInt = option(10, "steps between ADMM projections and dual updates")
    rho: PosFloat = option(5.0, "ADMM's penalty ρ")
    seq_keep: Share = option(
        0.66, "share of primitives the sequential methods keep by opacity first (LightGaussian: 66 %)"
    )
    lr: PosFloat = option(
        0.01, "Adam's learning rate for colours and opacities (means ×0.016, scales ×0.5, rotations ×0.1)"
    )
    s2_functions: PosInt = option(64, "S² colour fit: seeded Blinn-Phong radiance functions a seed")
    s2_directions: Annotated[int, at.Ge(8)] = option(2048, "S² colour fit: Fibonacci directions (half fit, half test)")
    s2_steps: PosInt = option(400, "S² colour fit: Adam steps of the lobes (SH is fitted by least squares)")
    device: str = option("cpu", "torch device (cuda runs the same config on a GPU)")

    def problems(self) -> list[str]:
        out = []
        if self.views // self.test_every < 1 or self.views - self.views // self.test_every < 2:
            out.append(f"test_every: {self.test_every} leaves no test view or too few training views of {self.views}")
        out += device_problems(self.device)
        return out
