"""Config of the extras.tabular.jarf recipe."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class JARFConfig:
    """JARF against an axis-aligned random forest, PCA+RF, LDA+RF and a random-rotation (oblique) forest.

    thetas: rotation angles (degrees) of the synthetic rotated-boundary sets (n_samples rows, n_features
    features, half informative); datasets: scikit-learn bundled sets; seeds: train/test splits and model
    seeds per dataset (test share test_size). n_estimators: trees of every forest (JARF's surrogate uses
    surrogate_estimators). Metrics: Cohen's κ on the test split and fit time.
    """

    thetas: list[float] = field(default_factory=lambda: [0.0, 15.0, 30.0, 45.0])
    n_samples: int = 1000
    n_features: int = 10
    datasets: list[str] = field(default_factory=lambda: ["breast_cancer", "wine", "digits"])
    seeds: int = 3
    test_size: float = 0.3
    n_estimators: int = 200
    surrogate_estimators: int = 100
    methods: list[str] = field(default_factory=lambda: ["RF", "PCA+RF", "LDA+RF", "RotationRF", "JARF"])
