"""Uncertainty estimators on sampled texts, LM-Polygraph style: ``estimator(stats) -> np.ndarray [Q]``, higher
means more uncertain. All are vectorised over questions.

``stats`` holds, for Q questions with up to N texts each (the reference model's samples first):

- ``sim``    ``[Q, N, N]``: pairwise similarity in [0, 1] (``agentkit.uncertainty.similarity``), diagonal 1;
- ``member`` ``[Q, N]``: 0 for the reference model's samples, 1…K for the other models', -1 for padding;
- ``lexical`` ``[Q, N, N]``: ROUGE-L F1 (only for ``LexicalSimilarity``).

**Cross-model uncertainty** (Hamidieh et al., "Complementing Self-Consistency with Cross-Model Disagreement for
Uncertainty Quantification", arXiv 2604.17112). With the reference model's samples ``y⁰_1..y⁰_k`` and member m's
``yᵐ_1..yᵐ_{k_m}``:

    S_intra = mean_{i<j} sim(y⁰_i, y⁰_j)                   AU = 1 − S_intra
    S_inter = mean_{i, m≥1, j} sim(y⁰_i, yᵐ_j)              EU = S_intra − S_inter
                                                           TU = AU + EU = 1 − S_inter

Choices the paper leaves open, selectable here (defaults first):

- ``inter="pooled"``: every cross pair weighs the same; ``"member"``: the mean of each member's mean, so a
  member with more samples does not count more. Identical when all members have the same number of samples.
- ``clip_eu=False``: EU may be negative (the other models agree with the reference more than it agrees with
  itself); keeping the sign keeps TU = 1 − S_inter exactly. ``True`` clips at 0 (TU = AU + max(EU, 0)).

**Baselines** on the reference model's samples only (``W = sim`` restricted to them, k samples), as in
LM-Polygraph (Lin et al., "Generating with Confidence", 2023):

- ``LexicalSimilarity``: 1 − mean pairwise ROUGE-L (LM-Polygraph returns the negated mean; same ranking);
- ``NumSemSets``: the number of semantic sets: connected components of the graph ``W_ij ≥ threshold``;
- ``EigValLaplacian``: Σ_k max(0, 1 − λ_k) over the eigenvalues of ``L = I − D^{-1/2} W D^{-1/2}``;
- ``Degree``: 1 − Σ_ij W_ij / k² (``trace(kI − D) / k²``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Stats = dict[str, Any]


def _pair_mean(W: np.ndarray, mask: np.ndarray) -> np.ndarray:
    n = mask.sum(axis=(1, 2))
    return np.divide((W * mask).sum(axis=(1, 2)), n, out=np.full(len(W), np.nan), where=n > 0)


def _ref_masks(member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ref = member == 0
    upper = np.triu(np.ones((member.shape[1],) * 2, dtype=bool), 1)
    return ref, ref[:, :, None] & ref[:, None, :] & upper


def s_intra(stats: Stats) -> np.ndarray:
    _, intra = _ref_masks(stats["member"])
    return _pair_mean(stats["sim"], intra)


def s_inter(stats: Stats, inter: str = "pooled") -> np.ndarray:
    W, member = stats["sim"], stats["member"]
    ref = member == 0
    if inter == "pooled":
        return _pair_mean(W, ref[:, :, None] & (member >= 1)[:, None, :])
    if inter != "member":
        raise ValueError(f"inter must be 'pooled' or 'member', not {inter!r}")
    per = [_pair_mean(W, ref[:, :, None] & (member == m)[:, None, :]) for m in range(1, int(member.max()) + 1)]
    return np.nanmean(np.stack(per), axis=0)


@dataclass
class CrossModelUncertainty:
    """(AU, EU, TU) in one pass: ``components(stats)``; as an estimator it returns ``part`` (TU by default)."""

    inter: str = "pooled"
    clip_eu: bool = False
    part: str = "TU"

    @property
    def name(self) -> str:
        return self.part

    def components(self, stats: Stats) -> dict[str, np.ndarray]:
        intra, cross = s_intra(stats), s_inter(stats, self.inter)
        eu = intra - cross
        if self.clip_eu:
            eu = np.maximum(eu, 0.0)
        return {"AU": 1.0 - intra, "EU": eu, "TU": 1.0 - intra + eu}

    def __call__(self, stats: Stats) -> np.ndarray:
        return self.components(stats)[self.part]


def AU() -> CrossModelUncertainty:  # noqa: N802 (estimator names as in the paper)
    """Aleatoric uncertainty from self-consistency: 1 − S_intra."""
    return CrossModelUncertainty(part="AU")


def EU(inter: str = "pooled", clip_eu: bool = False) -> CrossModelUncertainty:  # noqa: N802
    """Epistemic uncertainty from cross-model disagreement: S_intra − S_inter (optionally clipped at 0)."""
    return CrossModelUncertainty(inter, clip_eu, "EU")


def TU(inter: str = "pooled", clip_eu: bool = False) -> CrossModelUncertainty:  # noqa: N802
    """Total uncertainty: AU + EU (= 1 − S_inter without clipping)."""
    return CrossModelUncertainty(inter, clip_eu, "TU")


def _ref_block(stats: Stats, key: str = "sim") -> tuple[np.ndarray, np.ndarray]:
    """The reference samples' similarity ``[Q, N, N]`` (zero outside) and their mask ``[Q, N]``."""
    ref = stats["member"] == 0
    return np.where(ref[:, :, None] & ref[:, None, :], stats[key], 0.0), ref


@dataclass
class LexicalSimilarity:
    name: str = "Lexical(ROUGE-L)"

    def __call__(self, stats: Stats) -> np.ndarray:
        _, intra = _ref_masks(stats["member"])
        return 1.0 - _pair_mean(stats["lexical"], intra)


@dataclass
class NumSemSets:
    threshold: float = 0.9
    name: str = "NumSemSets"

    def __call__(self, stats: Stats) -> np.ndarray:
        W, ref = _ref_block(stats)
        A = (W >= self.threshold) | np.eye(W.shape[1], dtype=bool)[None]
        A &= ref[:, :, None] & ref[:, None, :]
        R = A.astype(np.float32)
        for _ in range(int(np.ceil(np.log2(max(W.shape[1], 2))))):  # transitive closure by repeated squaring
            R = np.minimum(R @ R, 1.0)
        size = R.sum(axis=2)  # each sample's component size; a component of size s counts s·(1/s) = 1
        return np.where(ref, 1.0 / np.maximum(size, 1.0), 0.0).sum(axis=1)


@dataclass
class EigValLaplacian:
    name: str = "EigValLaplacian"

    def __call__(self, stats: Stats) -> np.ndarray:
        W, ref = _ref_block(stats)
        W = (W + W.transpose(0, 2, 1)) / 2
        out = np.zeros(len(W))
        k = ref.sum(axis=1)
        for size in np.unique(k):  # eigvalsh needs equal shapes: group questions by sample count
            rows = np.flatnonzero(k == size)
            idx = np.stack([np.flatnonzero(ref[q]) for q in rows])
            Wk = np.take_along_axis(np.take_along_axis(W[rows], idx[:, :, None], 1), idx[:, None, :], 2)
            d = 1.0 / np.sqrt(np.maximum(Wk.sum(axis=2), 1e-12))
            L = np.eye(size)[None] - d[:, :, None] * Wk * d[:, None, :]
            out[rows] = np.clip(1.0 - np.linalg.eigvalsh(L), 0.0, None).sum(axis=1)
        return out


@dataclass
class Degree:
    name: str = "Degree"

    def __call__(self, stats: Stats) -> np.ndarray:
        W, ref = _ref_block(stats)
        k = ref.sum(axis=1).astype(np.float64)
        return 1.0 - W.sum(axis=(1, 2)) / np.maximum(k * k, 1.0)


def all_estimators(inter: str = "pooled", clip_eu: bool = False, sets_threshold: float = 0.9) -> dict[str, Any]:
    """Names -> estimator objects, in report order."""
    return {
        "AU": AU(),
        "EU": EU(inter, clip_eu),
        "TU": TU(inter, clip_eu),
        "Lexical(ROUGE-L)": LexicalSimilarity(),
        "NumSemSets": NumSemSets(sets_threshold),
        "EigValLaplacian": EigValLaplacian(),
        "Degree": Degree(),
    }
