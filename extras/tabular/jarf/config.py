"""Config of the extras.tabular.jarf recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosInt


@dataclass
class JARFConfig:
    """JARF against an axis-aligned random forest, PCA+RF, LDA+RF and a random-rotation (oblique) forest.

    thetas: rotation angles (degrees) of the synthetic rotated-boundary sets (n_samples rows, n_features
    features, half informative); datasets: scikit-learn bundled sets; seeds: train/test splits and model
    seeds per dataset (test share test_size). n_estimators: trees of every forest (JARF's surrogate uses
    surrogate_estimators). Metrics: Cohen's κ on the test split and fit time.
    """

    thetas: list[float] = field(default_factory=lambda: [0.0, 15.0, 30.0, 45.0])
    n_samples: PosInt = 1000
    n_features: PosInt = 10
    datasets: list[Literal["digits", "iris", "wine", "breast_cancer"]] = field(
        default_factory=lambda: ["breast_cancer", "wine", "digits"]
    )
    seeds: PosInt = 3
    test_size: Annotated[float, at.Interval(gt=0, lt=1)] = 0.3
    n_estimators: PosInt = 200
    surrogate_estimators: PosInt = 100
    methods: Annotated[list[Literal["RF", "PCA+RF", "LDA+RF", "RotationRF", "JARF"]], at.MinLen(1)] = field(
        default_factory=lambda: ["RF", "PCA+RF", "LDA+RF", "RotationRF", "JARF"]
    )
