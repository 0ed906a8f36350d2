"""Config of the extras.graph.h3gnn recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegFloat, NonNegInt, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig

Method = Literal["raw", "propagated", "graphmae", "byol", "h3gnn"]


@dataclass
class H3GNNConfig(SweepConfig):
    """H³GNNs against graph SSL baselines: linear-probe node accuracy (nodes split 60/20/20) on homophily-controlled
    random partition graphs (``agentkit.extras.data.partition_graph``)."""

    homophilies: Annotated[list[Fraction], at.MinLen(1)] = option(
        [0.1, 0.5, 0.9], "homophily h of the random partition graphs, one graph per h and seed"
    )
    classes: Annotated[int, at.Ge(2)] = option(5, "node classes")
    per_class: PosInt = option(200, "nodes per class")
    degree: PosFloat = option(5.0, "mean degree")
    channels: PosInt = option(32, "feature dimensions")
    informative: PosInt = option(6, "feature dimensions that carry the class")
    class_sep: PosFloat = option(0.6, "separation of the class means")
    methods: Annotated[list[Method], at.MinLen(1)] = option(
        ["raw", "propagated", "graphmae", "byol", "h3gnn"],
        "raw (logistic regression on X), propagated (on Â²X), graphmae, byol (random masking) and h3gnn (hardness masking after warmup)",
    )
    d: PosInt = option(64, "the encoder's width")
    hops: PosInt = option(2, "K, the hops of the WGCN encoder")
    beta: PosFloat = option(1.0, "β in the high-pass filter (I − βÂ)^power")
    power: PosInt = option(1, "the high-pass filter's power")
    heads: PosInt = option(4, "attention heads")
    dropout: Fraction = option(0.1, "dropout in the WGCNs")
    epochs: PosInt = option(200, "SSL training epochs")
    lr: PosFloat = option(2e-3, "Adam's learning rate")
    weight_decay: NonNegFloat = option(1e-5, "Adam's weight decay")
    momentum: Annotated[float, at.Interval(ge=0, lt=1)] = option(0.99, "the teacher's EMA momentum")
    mask_rate: Annotated[float, at.Interval(gt=0, lt=1)] = option(0.5, "R, the share of nodes masked")
    steer: Fraction = option(0.5, "r, the share of the mask drawn by hardness")
    warmup: NonNegInt = option(50, "h3gnn: epochs of random masking before hardness steers it")
    eval_every: PosInt = option(50, "epochs between probe fits; the best validation epoch gives the test accuracy")

    def problems(self) -> list[str]:
        out = []
        if self.informative > self.channels:
            out.append(f"informative: {self.informative} is more than channels ({self.channels})")
        if 2**self.informative < self.classes:
            out.append(f"informative: 2^{self.informative} dimensions cannot hold {self.classes} class clusters")
        if self.d % self.heads:
            out.append(f"heads: {self.heads} does not divide d ({self.d})")
        return out
