"""Config of the extras.graph.sc recipe."""

from __future__ import annotations

from dataclasses import dataclass

from agentkit.config import Fraction, NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class SCConfig(SweepConfig):
    """GSAT against GSAT + self-consistency (SC) on BA-2Motifs, generated offline. Epochs are fewer than the
    official 100 + 100 so that four seeds fit in 10 minutes on 2 CPU cores (at 100 + 100 the figures were the same
    within their spread: 15.5 minutes)."""

    graphs: PosInt = option(
        1000, "BA-2Motifs graphs: BA(base, 1) trees with a house (class 0) or a 5-cycle (class 1), split 70/10/20"
    )
    base: PosInt = option(20, "nodes of each BA tree")
    hidden: PosInt = option(64, "the GIN's width")
    layers: PosInt = option(2, "the GIN's layers")
    dropout: Fraction = option(0.5, "the explainer's dropout in stage 1")
    sc_dropout: Fraction = option(0.3, "the explainer's dropout in stage 2")
    lr: PosFloat = option(1e-3, "Adam's learning rate")
    batch_size: PosInt = option(128, "graphs per step")
    epochs: PosInt = option(60, "stage 1 (GSAT) epochs; the best validation epoch is kept (official: 100)")
    sc_epochs: PosInt = option(50, "stage 2 epochs: explainer and head fine-tuned, GIN frozen (official: 100)")
    r: Fraction = option(0.5, "GSAT's prior edge probability r in KL(Bern(α) ‖ Bern(r))")
    reg: NonNegFloat = option(0.5, "weight of GSAT's KL term")
    lam_sc: NonNegFloat = option(1.0, "λ_sc, the weight of SC's mean |α_old − α_new| (GSAT + FT: 0, the control)")
    fid_edges: PosInt = option(10, "top edges per graph removed (Fid⁺) or kept alone (Fid⁻) for fidelity")
    seeds: PosInt = option(4, "model seeds (one data set); SHD compares them pairwise")

    def problems(self) -> list[str]:
        from agentkit.extras.data import stratified_split_problems

        return stratified_split_problems("graphs", self.graphs, 2, 0.1, 0.2)
