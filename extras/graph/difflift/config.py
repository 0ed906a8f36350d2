"""Config of the extras.graph.difflift recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig

Lifting = Literal["none", "one_hop", "knn", "cycle", "hyper", "cell"]


@dataclass
class DiffLiftConfig(SweepConfig):
    """∂lift (learned hypergraph and cell liftings) against static liftings, with the same topological network;
    the epoch with the best validation accuracy gives the test accuracy."""

    tasks: Annotated[list[Literal["node", "motif"]], at.MinLen(1)] = option(
        ["node", "motif"],
        "node (classification on a heterophilic random partition graph, split 60/20/20) and motif (graph classification on BA-2Motifs, split 70/10/20)",
    )
    liftings: Annotated[list[Lifting], at.MinLen(1)] = option(
        ["none", "one_hop", "knn", "cycle", "hyper", "cell"],
        "none (the graph alone), one_hop (closed neighbourhoods), knn (feature neighbours), cycle (the cycle basis as 2-cells), hyper and cell (∂lift, learned)",
    )
    homophily: Fraction = option(0.2, "node task: share of edges within a class")
    classes: Annotated[int, at.Ge(2)] = option(5, "node task: classes")
    per_class: PosInt = option(200, "node task: nodes per class")
    degree: PosFloat = option(5.0, "node task: mean degree")
    channels: PosInt = option(32, "node task: feature dimensions")
    informative: PosInt = option(6, "node task: feature dimensions that carry the class")
    class_sep: PosFloat = option(0.8, "node task: separation of the class means")
    motif_graphs: PosInt = option(600, "motif task: graphs (a house or a 5-cycle on a BA tree, features 0.1·1)")
    knn_k: PosInt = option(5, "knn lifting: neighbours of each node in feature space")
    max_cycle: Annotated[int, at.Ge(3)] = option(6, "cycle lifting: longest cycle kept")
    k_min: Annotated[int, at.Ge(1)] = option(2, "∂lift: smallest hyperedge (k ∈ [k_min, k_max])")
    k_max: Annotated[int, at.Ge(2)] = option(10, "∂lift: largest hyperedge (cell: k_max/2 candidate edges)")
    d: PosInt = option(64, "the network's width")
    layers: PosInt = option(2, "the network's layers")
    dropout: Fraction = option(0.5, "dropout probability")
    lr: PosFloat = option(5e-3, "Adam's learning rate")
    weight_decay: NonNegFloat = option(5e-4, "Adam's weight decay")
    node_epochs: PosInt = option(150, "node task: full-batch steps")
    motif_epochs: PosInt = option(25, "motif task: epochs")
    batch_size: PosInt = option(64, "motif task: graphs per batch")

    def problems(self) -> list[str]:
        from agentkit.extras.data import stratified_split_problems

        out = [f"k_min: {self.k_min} must be below k_max ({self.k_max})"] if self.k_min >= self.k_max else []
        if self.informative > self.channels:
            out.append(f"informative: {self.informative} features cannot exceed channels ({self.channels})")
        if "node" in self.tasks:
            out += stratified_split_problems("per_class", self.classes * self.per_class, self.classes, 0.2, 0.2)
        if "motif" in self.tasks:
            out += stratified_split_problems("motif_graphs", self.motif_graphs, 2, 0.1, 0.2)
        return out
