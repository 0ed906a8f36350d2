"""Config of the extras.vision.crd recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class CRDConfig(SweepConfig):
    """CRD (GP rule scores, Metropolis–Hastings concept selection steered by the proposer's logits) against
    proposer-only top-K, random K, all concepts and the proposer answering alone, on RAVEN-style matrices, as the
    proposer's reading noise ρ grows."""

    rhos: Annotated[list[Annotated[float, at.Interval(ge=0, lt=1)]], at.MinLen(1)] = option(
        [0.0, 0.05, 0.1, 0.2, 0.3], "the proposer's reading noise ρ: each value is read wrong with this probability"
    )
    methods: Annotated[list[Literal["crd", "topk", "random", "all", "proposer", "oracle"]], at.MinLen(1)] = option(
        ["crd", "topk", "random", "all", "proposer", "oracle"],
        "crd (MH selection); topk (the K highest proposer logits); random (K concepts); all (every concept); "
        "proposer (the proposer answers alone: the candidate its read values share most with the other "
        "candidates, weighted by its concept logits); oracle (the true rule concepts: the rule functions' ceiling)",
    )
    train_puzzles: Annotated[int, at.Ge(20)] = option(1000, "puzzles whose rule-governed concepts fit the rule GPs")
    val_puzzles: Annotated[int, at.Ge(4)] = option(200, "puzzles that pick K for crd, topk and random")
    test_puzzles: Annotated[int, at.Ge(4)] = option(500, "puzzles scored")
    ks: Annotated[list[Annotated[int, at.Ge(1)]], at.MinLen(1)] = option(
        [3, 4, 5], "set sizes K to choose from on validation"
    )
    spurious: Annotated[int, at.Interval(ge=0, le=8)] = option(4, "concepts the proposer names that follow no rule")
    sharpness: Annotated[float, at.Interval(ge=0, le=10)] = option(
        1.0, "how far the proposer's cue separates rule concepts from the rest (m: z ~ N(±m, 1))"
    )
    proposer_model: str | None = option(
        None,
        "a vision-language model (catalog name or directory, loaded as an Engine) that names the concepts from the "
        "drawn puzzle in place of the programmatic proposer; its readings are used as they come (ρ adds no noise) "
        "and a puzzle whose reply lists no valid concept counts as wrong for every method",
    )
    mh_steps: PosInt = option(300, "Metropolis–Hastings steps per puzzle")
    gp_hidden: PosInt = option(32, "hidden width of the deep kernel's MLP φ")
    gp_features: PosInt = option(8, "features φ gives each grid position")
    gp_steps: PosInt = option(300, "Adam steps fitting each rule family's GP")
    gp_lr: PosFloat = option(0.03, "their learning rate")

    def problems(self) -> list[str]:
        out = []
        named = 5 + self.spurious
        if max(self.ks) >= named:
            out.append(f"ks: {max(self.ks)} leaves nothing to choose among the {named} concepts the proposer names")
        if self.proposer_model:
            from agentkit.models.catalog import is_vision_model

            if not is_vision_model(self.proposer_model):  # reads the config alone; an unknown name raises its error
                out.append(f"proposer_model: {self.proposer_model} takes no images (a vision-language model is needed)")
        return out
