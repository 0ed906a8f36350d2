"""Config of the extras.graph.apf recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import Fraction, NonNegFloat, PosFloat, PosInt

Method = Literal["gcn", "dgi", "bandpass", "apf", "apf_no_rq", "apf_no_high", "apf_no_gate"]


@dataclass
class APFConfig:
    """APF against GCN from scratch, DGI + logistic regression, a fixed band-pass filter and APF ablations.

    Data (``agentkit.extras.data.anomaly_graph``, one graph per seed): ``nodes`` nodes in ``blocks`` communities
    (mean degree ``degree``, ``homophily``), ``channels``-d features, anomaly_rate of the nodes anomalous (half
    contextual: another community's features shifted by ``shift``; half structural: cliques). Labels:
    train_labels nodes for training and as many for validation (model selection), each with anomalous_labels
    anomalies; every other node is the test set. Scores: AUPRC and AUROC on the test nodes.
    Models: width hidden, Chebyshev order; pre-training pretrain_epochs (APF's two DGI losses, DGI's one),
    fine-tuning epochs, Adam lr, weight_decay, dropout; validation every eval_every epochs. RQ subgraphs:
    candidates random-walk subgraphs (walks walks of length 2) per node. Gate regulariser: weight gate_weight,
    targets p_anomaly ≤ p_normal. Ablations: apf_no_rq (per-node summary over the whole 2-hop neighbourhood),
    apf_no_high (low-pass branch only), apf_no_gate (C = ½).
    """

    nodes: PosInt = 2000
    blocks: Annotated[int, at.Ge(2)] = 4
    degree: PosFloat = 8.0
    homophily: Fraction = 0.9
    channels: PosInt = 16
    anomaly_rate: Annotated[float, at.Interval(gt=0, lt=0.5)] = 0.05
    shift: NonNegFloat = 1.5
    train_labels: PosInt = 100
    anomalous_labels: PosInt = 20
    methods: Annotated[list[Method], at.MinLen(1)] = field(
        default_factory=lambda: ["gcn", "dgi", "bandpass", "apf", "apf_no_rq", "apf_no_high", "apf_no_gate"]
    )
    hidden: PosInt = 64
    order: Annotated[int, at.Ge(2)] = 3
    candidates: PosInt = 8
    walks: PosInt = 4
    pretrain_epochs: PosInt = 200
    epochs: PosInt = 200
    lr: PosFloat = 1e-3
    weight_decay: NonNegFloat = 5e-4
    dropout: Fraction = 0.2
    eval_every: PosInt = 10
    gate_weight: NonNegFloat = 0.5
    p_anomaly: Fraction = 0.2
    p_normal: Fraction = 0.8
    seeds: PosInt = 3

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
