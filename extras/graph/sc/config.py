"""Config of the extras.graph.sc recipe."""

from __future__ import annotations

from dataclasses import dataclass

from agentkit.config import Fraction, NonNegFloat, PosFloat, PosInt


@dataclass
class SCConfig:
    """GSAT against GSAT + self-consistency (SC) on BA-2Motifs, generated offline.

    Data (``agentkit.extras.data.ba_motifs``): ``graphs`` BA(base, 1) trees with a house (class 0) or a 5-cycle
    (class 1) attached; split 70/10/20 (train/val/test, stratified). Model (the official BA-2Motifs config):
    GIN with ``layers`` layers of width hidden, explainer dropout; Adam (lr), batch_size graphs per step.
    Epochs are fewer than the official 100 + 100 so that four seeds fit in 10 minutes on 2 CPU cores (at
    100 + 100 the figures were the same within their spread: 15.5 minutes).
    Stage 1 (GSAT): epochs, CE + reg·KL(Bern(α) ‖ Bern(r)), the epoch with the best validation accuracy kept.
    Stage 2 from that model, GIN layers frozen, explainer and head fine-tuned for sc_epochs: "GSAT + SC" adds
    λ_sc·mean|α_old − α_new| (sc_dropout in the explainer), "GSAT + FT" is the same fine-tuning with λ_sc = 0
    (the control: does the gain come from SC or from training longer?). Fidelity removes or keeps the top
    fid_edges edges of each graph. seeds: model seeds (one data set); SHD compares seeds pairwise.
    """

    graphs: PosInt = 1000
    base: PosInt = 20
    hidden: PosInt = 64
    layers: PosInt = 2
    dropout: Fraction = 0.5
    sc_dropout: Fraction = 0.3
    lr: PosFloat = 1e-3
    batch_size: PosInt = 128
    epochs: PosInt = 60
    sc_epochs: PosInt = 50
    r: Fraction = 0.5
    reg: NonNegFloat = 0.5
    lam_sc: NonNegFloat = 1.0
    fid_edges: PosInt = 10
    seeds: PosInt = 4

    def problems(self) -> list[str]:
        from agentkit.extras.data import stratified_split_problems

        return stratified_split_problems("graphs", self.graphs, 2, 0.1, 0.2)
