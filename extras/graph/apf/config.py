"""Config of the extras.graph.apf recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig

Method = Literal["gcn", "dgi", "bandpass", "apf", "apf_no_rq", "apf_no_high", "apf_no_gate"]


@dataclass
class APFConfig(SweepConfig):
    """APF against GCN from scratch, DGI + logistic regression, a fixed band-pass filter and APF ablations:
    AUPRC and AUROC on the test nodes of a graph per seed."""

    nodes: PosInt = option(2000, "nodes of each seed's graph (agentkit.extras.data.anomaly_graph)")
    blocks: Annotated[int, at.Ge(2)] = option(4, "communities")
    degree: PosFloat = option(8.0, "mean degree")
    homophily: Fraction = option(0.9, "share of edges within a community")
    channels: PosInt = option(16, "feature dimensions")
    anomaly_rate: Annotated[float, at.Interval(gt=0, lt=0.5)] = option(
        0.05,
        "share of anomalous nodes: half contextual (another community's features, shifted), half structural (cliques)",
    )
    shift: NonNegFloat = option(1.5, "how far contextual anomalies' features are shifted")
    train_labels: PosInt = option(
        100, "labelled training nodes (as many again validate); every other node is a test node"
    )
    anomalous_labels: PosInt = option(20, "anomalies among the training (and among the validation) labels")
    methods: Annotated[list[Method], at.MinLen(1)] = option(
        ["gcn", "dgi", "bandpass", "apf", "apf_no_rq", "apf_no_high", "apf_no_gate"],
        "gcn (scratch), dgi (+ logistic regression), bandpass (fixed), apf, and the ablations apf_no_rq, apf_no_high, apf_no_gate",
    )
    hidden: PosInt = option(64, "width of every model")
    order: Annotated[int, at.Ge(2)] = option(3, "Chebyshev polynomial order of the filters")
    candidates: PosInt = option(8, "random-walk subgraphs per node for the RQ selection")
    walks: PosInt = option(4, "walks of length 2 per candidate subgraph")
    pretrain_epochs: PosInt = option(200, "pre-training epochs (APF's two DGI losses, DGI's one)")
    epochs: PosInt = option(200, "fine-tuning epochs")
    lr: PosFloat = option(1e-3, "Adam's learning rate")
    weight_decay: NonNegFloat = option(5e-4, "Adam's weight decay")
    dropout: Fraction = option(0.2, "dropout probability")
    eval_every: PosInt = option(10, "epochs between validation checks (model selection)")
    gate_weight: NonNegFloat = option(0.5, "weight of the gate regulariser")
    p_anomaly: Fraction = option(0.2, "the gate's target for anomalies (at most p_normal)")
    p_normal: Fraction = option(0.8, "the gate's target for normal nodes")

    def problems(self) -> list[str]:
        out = []
        if self.anomalous_labels >= self.train_labels:
            out.append(f"anomalous_labels: {self.anomalous_labels} must be below train_labels ({self.train_labels})")
        if 2 * self.anomalous_labels > int(self.anomaly_rate * self.nodes):
            out.append(
                f"anomalous_labels: 2 × {self.anomalous_labels} labelled anomalies (train + validation) exceed the "
                f"{int(self.anomaly_rate * self.nodes)} anomalies of the graph"
            )
        if self.p_anomaly > self.p_normal:
            out.append(f"p_anomaly: {self.p_anomaly} must not exceed p_normal ({self.p_normal})")
        return out
