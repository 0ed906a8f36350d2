"""Black-box uncertainty on saved generations: AU (self-consistency), cross-model EU and TU = AU + EU, the
LM-Polygraph black-box baselines, and error-detection / abstention / calibration metrics.

- ``generate``: K samples per question from several models (any engines), resumable;
- ``score``: estimators, labels, metrics and the report (``agentkit uncertainty score``).
"""

from agentkit.uncertainty.estimators import (
    AU,
    EU,
    TU,
    CrossModelUncertainty,
    Degree,
    EigValLaplacian,
    LexicalSimilarity,
    NumSemSets,
)
from agentkit.uncertainty.schema import GenerationRow, iter_generations, write_generations
from agentkit.uncertainty.score import ScoreConfig, score

__all__ = [
    "AU",
    "EU",
    "TU",
    "CrossModelUncertainty",
    "Degree",
    "EigValLaplacian",
    "GenerationRow",
    "LexicalSimilarity",
    "NumSemSets",
    "ScoreConfig",
    "iter_generations",
    "score",
    "write_generations",
]
