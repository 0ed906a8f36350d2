"""extras.graph.apf: graph anomaly detection with 100 labels on a contextual SBM with injected anomalies: APF
against GCN from scratch, DGI + logistic regression, a fixed band-pass filter and APF's ablations (AUPRC, AUROC)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.graph.apf.config import APFConfig
from agentkit.extras.graph.apf.model import (
    APF,
    ChebFilter,
    chebyshev_basis,
    gate_regulariser,
    membership,
    mlp,
    rq_subgraphs,
    two_hop_sets,
)
from agentkit.extras.nets import GCN
from agentkit.extras.sweep import sweep
from agentkit.recipe import Recipe

NAMES = {
    "gcn": "GCN (scratch)",
    "dgi": "DGI + LR",
    "bandpass": "fixed band-pass",
    "apf": "APF",
    "apf_no_rq": "APF − RQ subgraph",
    "apf_no_high": "APF − high-pass",
    "apf_no_gate": "APF − gate",
}


class APFRecipe(Recipe[APFConfig]):
    name = "extras.graph.apf"
    config_cls = APFConfig
    description = "APF vs GCN, DGI + LR, a fixed band-pass filter and ablations: anomaly AUPRC with 100 labels"

    def setup(self) -> None:
        data.require_pyg()

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [(m,) for m in c.methods], c.seeds, self._run, desc="detector runs")
        res = grid.results(lambda m: NAMES[m])
        self.ctx.add_section(
            f"Test nodes ({c.seeds} graphs and label draws; model picked on the {c.train_labels} validation labels)",
            f"{c.nodes} nodes, {c.anomaly_rate:.0%} anomalies; {c.train_labels} training labels of which "
            f"{c.anomalous_labels} anomalous (chance AUPRC ≈ {c.anomaly_rate:.2f}).\n\n"
            + report.table(res, ["auprc", "auroc", "val_auprc", "seconds"])
            + "\n\n"
            + report.paired(res, NAMES["gcn"], ["auprc", "auroc"]),
        )
        caption = "Anomaly detection on the test nodes (mean ± std, dots: seeds)"
        report.figure(self.ctx, res, ["auprc", "auroc"], "anomaly", caption, ["AUPRC (test)", "AUROC (test)"])
        return report.means(res, ["auprc", "auroc"])

    # ---- one (method, seed) run -----------------------------------------------------------------------------
    def _run(self, method: str, seed: int) -> dict[str, float]:
        c = self.config
        g = data.anomaly_graph(c.nodes, c.blocks, c.degree, c.homophily, c.channels, c.anomaly_rate, c.shift, seed)
        g.x = (g.x - g.x.mean(0)) / g.x.std(0)
        tr, va, te = self._labels(g.y, seed)
        torch.manual_seed(seed)
        t0 = time.perf_counter()
        if method == "dgi":
            out = self._dgi(g, tr, va, te)
        else:
            out = self._supervised(g, method, tr, va, te, seed)
        return {**out, "seconds": time.perf_counter() - t0}

    def _labels(self, y: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        c, g = self.config, torch.Generator().manual_seed(seed + 1)
        pos = torch.nonzero(y == 1).flatten()[torch.randperm(int((y == 1).sum()), generator=g)]
        neg = torch.nonzero(y == 0).flatten()[torch.randperm(int((y == 0).sum()), generator=g)]
        a, n = c.anomalous_labels, c.train_labels - c.anomalous_labels
        tr = torch.cat([pos[:a], neg[:n]])
        va = torch.cat([pos[a : 2 * a], neg[n : 2 * n]])
        te = torch.ones(len(y), dtype=torch.bool)
        te[tr] = te[va] = False
        return tr, va, torch.nonzero(te).flatten()

    def _supervised(self, g, method: str, tr, va, te, seed: int) -> dict[str, float]:
        """GCN, the band-pass filter, or APF (pre-trained, then fine-tuned); the epoch with the best validation
        AUPRC gives the test scores."""
        c = self.config
        basis = chebyshev_basis(g.x, g.edge_index, c.order)
        if method == "gcn":
            model = GCN(g.num_features, c.hidden, 1, layers=2, dropout=c.dropout)
            score = lambda: model(g.x, g.edge_index).squeeze(-1)  # noqa: E731
        elif method == "bandpass":
            model = torch.nn.Sequential(
                ChebFilter(c.order, "band", learnable=False),
                mlp(g.num_features, c.hidden, c.dropout),
                torch.nn.PReLU(),
                torch.nn.Linear(c.hidden, 1),
            )
            score = lambda: model(basis).squeeze(-1)  # noqa: E731
        else:
            model = APF(g.num_features, c.hidden, c.order, high=method != "apf_no_high", dropout=c.dropout)
            self._pretrain(model, g, basis, method, seed)
            gated = method != "apf_no_gate"
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], c.lr, weight_decay=c.weight_decay)
        y = g.y.float()
        pos_weight = torch.tensor((len(tr) - y[tr].sum().item()) / max(1.0, y[tr].sum().item()))
        best = {"val_auprc": -1.0}
        for epoch in range(1, c.epochs + 1):
            model.train()
            if method.startswith("apf"):
                logits, gate = model(g.x, basis, gated)
                loss = F.binary_cross_entropy_with_logits(logits[tr], y[tr], pos_weight=pos_weight)
                if model.high and gated and c.gate_weight > 0:
                    loss = loss + c.gate_weight * gate_regulariser(gate[tr], g.y[tr], c.p_anomaly, c.p_normal)
            else:
                loss = F.binary_cross_entropy_with_logits(score()[tr], y[tr], pos_weight=pos_weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if epoch % c.eval_every == 0 or epoch == c.epochs:
                model.eval()
                with torch.no_grad():
                    s = model(g.x, basis, gated)[0] if method.startswith("apf") else score()
                val = scores(g.y[va], s[va])
                if val["auprc"] > best["val_auprc"]:
                    best = {**scores(g.y[te], s[te]), "val_auprc": val["auprc"], "epoch": epoch}
        return best

    def _pretrain(self, model: APF, g, basis: torch.Tensor, method: str, seed: int) -> None:
        """Both DGI objectives (label-free); the per-node summary reads out the RQ subgraphs (apf_no_rq: the
        whole 2-hop neighbourhood)."""
        c = self.config
        readout = None
        if model.high:
            if method == "apf_no_rq":
                sets = two_hop_sets(g.edge_index, g.num_nodes)
            else:
                sets = rq_subgraphs(g.x, g.edge_index, c.candidates, c.walks, seed)
            readout = membership(sets, g.num_nodes)
        opt = torch.optim.Adam(model.parameters(), c.lr, weight_decay=c.weight_decay)
        gen = torch.Generator().manual_seed(seed)
        model.train()
        for _ in range(c.pretrain_epochs):
            shuffled = chebyshev_basis(g.x[torch.randperm(g.num_nodes, generator=gen)], g.edge_index, c.order)
            loss = model.pretrain_loss(basis, shuffled, readout)
            opt.zero_grad()
            loss.backward()
            opt.step()

    def _dgi(self, g, tr, va, te) -> dict[str, float]:
        """PyG's DeepGraphInfomax (one GCN layer + PReLU, row-shuffled corruption), then a class-balanced
        logistic regression on the frozen embeddings, its C picked on the validation labels."""
        from sklearn.linear_model import LogisticRegression
        from torch_geometric.nn import DeepGraphInfomax, GCNConv

        c = self.config

        class Encoder(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv, self.act = GCNConv(g.num_features, c.hidden), torch.nn.PReLU(c.hidden)

            def forward(self, x, edge_index):
                return self.act(self.conv(x, edge_index))

        model = DeepGraphInfomax(
            c.hidden,
            Encoder(),
            summary=lambda z, *a, **k: torch.sigmoid(z.mean(0)),
            corruption=lambda x, ei: (x[torch.randperm(x.size(0))], ei),
        )
        opt = torch.optim.Adam(model.parameters(), c.lr, weight_decay=c.weight_decay)
        for _ in range(c.pretrain_epochs):
            loss = model.loss(*model(g.x, g.edge_index))
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            z = model(g.x, g.edge_index)[0].numpy()
        z = (z - z[tr].mean(0)) / (z[tr].std(0) + 1e-8)
        best = {"val_auprc": -1.0}
        for cc in (0.01, 0.1, 1.0, 10.0):
            lr = LogisticRegression(C=cc, class_weight="balanced", max_iter=2000).fit(z[tr], g.y[tr].numpy())
            s = torch.from_numpy(lr.decision_function(z))
            val = scores(g.y[va], s[va])
            if val["auprc"] > best["val_auprc"]:
                best = {**scores(g.y[te], s[te]), "val_auprc": val["auprc"], "C": cc}
        return best

    def evaluate(self) -> dict[str, Any]:
        return {}


def scores(y: torch.Tensor, s: torch.Tensor) -> dict[str, float]:
    """AUPRC (average precision) and AUROC of anomaly scores ``s`` against labels ``y`` (1 = anomaly)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    yy, ss = y.numpy(), np.nan_to_num(s.detach().numpy())
    return {"auprc": float(average_precision_score(yy, ss)), "auroc": float(roc_auc_score(yy, ss))}
