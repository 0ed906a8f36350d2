"""Config of the extras.tabular.jarf recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class JARFConfig(SweepConfig):
    """JARF against an axis-aligned random forest, PCA+RF, LDA+RF and a random-rotation forest: Cohen's κ and fit time."""

    thetas: list[Annotated[float, at.Interval(ge=0, le=90)]] = option(
        [0.0, 15.0, 30.0, 45.0], "rotation angles in degrees of the synthetic rotated-boundary sets"
    )
    n_samples: PosInt = option(1000, "rows of each rotated-boundary set")
    n_features: PosInt = option(10, "features of each rotated-boundary set (half informative)")
    datasets: list[Literal["digits", "iris", "wine", "breast_cancer"]] = option(
        ["breast_cancer", "wine", "digits"], "scikit-learn bundled sets"
    )
    test_size: Annotated[float, at.Interval(gt=0, lt=1)] = option(0.3, "test share of each split (one split per seed)")
    n_estimators: PosInt = option(200, "trees of every forest")
    surrogate_estimators: PosInt = option(100, "trees of JARF's surrogate")
    methods: Annotated[list[Literal["RF", "PCA+RF", "LDA+RF", "RotationRF", "JARF"]], at.MinLen(1)] = option(
        ["RF", "PCA+RF", "LDA+RF", "RotationRF", "JARF"],
        "RF (axis-aligned), PCA+RF, LDA+RF, RotationRF (random oblique rotations) and JARF",
    )
