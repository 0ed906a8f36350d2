"""Config of the extras.graph.h3gnn recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegFloat, NonNegInt, PosFloat, PosInt

Method = Literal["raw", "propagated", "graphmae", "byol", "h3gnn"]


@dataclass
class H3GNNConfig:
    """H³GNNs against graph SSL baselines: linear-probe node accuracy on homophily-controlled graphs.

    Data (``agentkit.extras.data.partition_graph``): one random partition graph per homophily h in homophilies
    and seed: classes × per_class nodes, mean degree ``degree``, ``channels``-d features of which
    ``informative`` carry the class at separation class_sep. Nodes split 60/20/20 (train/val/test) for the probe.
    Methods: raw (logistic regression on X), propagated (on Â²X: a parameter-free GCN), graphmae (GCN
    encoder, masked-feature reconstruction with the scaled cosine error, γ = 2), byol (the H³GNN encoder and
    teacher–student loss, random masking) and h3gnn (the same with hardness masking after warmup epochs).
    Encoder: width d, K = hops, high-pass (I − βÂ)^power, heads, dropout (in the WGCNs); Adam (lr, weight_decay) for epochs;
    EMA momentum; mask_rate R; steer r (share of the mask drawn by hardness). The probe is fitted every
    eval_every epochs and the epoch with the best validation accuracy gives the test accuracy.
    """

    homophilies: Annotated[list[Fraction], at.MinLen(1)] = field(default_factory=lambda: [0.1, 0.5, 0.9])
    classes: Annotated[int, at.Ge(2)] = 5
    per_class: PosInt = 200
    degree: PosFloat = 5.0
    channels: PosInt = 32
    informative: PosInt = 6
    class_sep: PosFloat = 0.6
    methods: Annotated[list[Method], at.MinLen(1)] = field(
        default_factory=lambda: ["raw", "propagated", "graphmae", "byol", "h3gnn"]
    )
    d: PosInt = 64
    hops: PosInt = 2
    beta: PosFloat = 1.0
    power: PosInt = 1
    heads: PosInt = 4
    dropout: Fraction = 0.1
    epochs: PosInt = 200
    lr: PosFloat = 2e-3
    weight_decay: NonNegFloat = 1e-5
    momentum: Annotated[float, at.Interval(ge=0, lt=1)] = 0.99
    mask_rate: Annotated[float, at.Interval(gt=0, lt=1)] = 0.5
    steer: Fraction = 0.5
    warmup: NonNegInt = 50
    eval_every: PosInt = 50
    seeds: PosInt = 3

    def problems(self) -> list[str]:
        out = []
        if self.informative > self.channels:
            out.append(f"informative: {self.informative} is more than channels ({self.channels})")
        if 2**self.informative < self.classes:
            out.append(f"informative: 2^{self.informative} dimensions cannot hold {self.classes} class clusters")
        if self.d % self.heads:
            out.append(f"heads: {self.heads} does not divide d ({self.d})")
        return out
