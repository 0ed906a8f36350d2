"""Config of the extras.graph.difflift recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegFloat, PosFloat, PosInt

Lifting = Literal["none", "one_hop", "knn", "cycle", "hyper", "cell"]


@dataclass
class DiffLiftConfig:
    """∂lift (learned hypergraph and cell liftings) against static liftings, with the same topological network.

    Tasks: ``node`` (node classification on a heterophilic random partition graph: homophily, classes ×
    per_class nodes, mean degree, channels-d features of which informative carry the class; split 60/20/20) and
    ``motif`` (graph classification on BA-2Motifs: motif_graphs graphs, house vs 5-cycle on a BA tree, features
    0.1·1; split 70/10/20). Liftings: none (the graph alone), one_hop (closed neighbourhoods as hyperedges),
    knn (each node and its knn_k nearest neighbours in feature space), cycle (the cycle basis, cycles of length
    ≤ max_cycle, as 2-cells), hyper (∂lift hyperedges, k ∈ [k_min, k_max]), cell (∂lift edges over k_max/2
    candidates, triangles as 2-cells). Network: width d, layers, dropout; Adam (lr, weight_decay); node_epochs
    full-batch steps, or motif_epochs over batches of batch_size graphs; the epoch with the best validation
    accuracy gives the test accuracy. seeds: data and model seeds.
    """

    tasks: Annotated[list[Literal["node", "motif"]], at.MinLen(1)] = field(default_factory=lambda: ["node", "motif"])
    liftings: Annotated[list[Lifting], at.MinLen(1)] = field(
        default_factory=lambda: ["none", "one_hop", "knn", "cycle", "hyper", "cell"]
    )
    homophily: Fraction = 0.2
    classes: Annotated[int, at.Ge(2)] = 5
    per_class: PosInt = 200
    degree: PosFloat = 5.0
    channels: PosInt = 32
    informative: PosInt = 6
    class_sep: PosFloat = 0.8
    motif_graphs: PosInt = 600
    knn_k: PosInt = 5
    max_cycle: Annotated[int, at.Ge(3)] = 6
    k_min: Annotated[int, at.Ge(1)] = 2
    k_max: Annotated[int, at.Ge(2)] = 10
    d: PosInt = 64
    layers: PosInt = 2
    dropout: Fraction = 0.5
    lr: PosFloat = 5e-3
    weight_decay: NonNegFloat = 5e-4
    node_epochs: PosInt = 150
    motif_epochs: PosInt = 25
    batch_size: PosInt = 64
    seeds: PosInt = 3

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
