"""extras.graph.h3gnn: linear-probe node accuracy of H³GNNs against raw features, propagated features, a
GraphMAE-style reconstruction baseline and BYOL without hardness masking, from heterophilic to homophilic graphs."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from agentkit.extras import data, report
from agentkit.extras.graph.h3gnn.config import H3GNNConfig
from agentkit.extras.graph.h3gnn.model import H3Encoder, TeacherStudent, gcn_adjacency, hardness_mask_probs
from agentkit.extras.nets import GCN, linear_probe
from agentkit.extras.sweep import product, sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

NAMES = {
    "raw": "raw X + LR",
    "propagated": "Â²X + LR",
    "graphmae": "GraphMAE-style",
    "byol": "BYOL (random mask)",
    "h3gnn": "H³GNN (hardness mask)",
}


class H3GNNRecipe(Recipe[H3GNNConfig]):
    name = "extras.graph.h3gnn"
    config_cls = H3GNNConfig
    description = "H³GNNs vs raw features, Â²X, GraphMAE-style and BYOL: probe accuracy against homophily"

    def setup(self) -> None:
        data.require_pyg()

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, product(c.homophilies, c.methods), c.seeds, self._run, desc="probe runs")
        parts = grid.split()
        per_h = {h: part.results(lambda m: NAMES[m]) for h, part in parts.items()}
        metrics = {}
        for h, part in parts.items():
            metrics |= report.means(part.results(), ["test_accuracy"], f"h={h:g}/")
        rows = {
            f"{NAMES[m]}": {f"h={h:g}": per_h[h][NAMES[m]]["test_accuracy"] for h in c.homophilies} for m in c.methods
        }
        self.ctx.add_section(
            f"Linear-probe test accuracy ({c.seeds} seeds; probe C and SSL epoch picked on validation)",
            report.table(rows, [f"h={h:g}" for h in c.homophilies], label="method")
            + "\n\nPaired differences from the first method, per homophily:\n\n"
            + report.paired(rows, NAMES[c.methods[0]], [f"h={h:g}" for h in c.homophilies]),
        )
        self.ctx.add_section(
            "Seconds per run",
            report.table({k: {"s": v["seconds"]} for k, v in per_h[c.homophilies[-1]].items()}, ["s"]),
        )
        self._plot(per_h)
        return metrics

    def _run(self, h: float, method: str, seed: int) -> dict[str, float]:
        c = self.config
        g = data.partition_graph(h, c.classes, c.per_class, c.degree, c.channels, c.informative, c.class_sep, seed)
        tr, va, te = data.split(g.y.numpy(), val=0.2, test=0.2, seed=seed)
        t0 = time.perf_counter()
        torch.manual_seed(seed)
        if method == "raw":
            out = linear_probe(g.x, g.y, tr, va, te)
        elif method == "propagated":
            out = linear_probe(propagate(g.x, g.edge_index, 2), g.y, tr, va, te)
        else:
            train = self._graphmae if method == "graphmae" else self._teacher_student
            out = train(g, method, lambda z: linear_probe(z, g.y, tr, va, te))
        return {**out, "seconds": time.perf_counter() - t0}

    def _teacher_student(self, g, method: str, probe) -> dict[str, float]:
        c = self.config
        enc = H3Encoder(g.num_features, c.d, g.num_edges, c.hops, c.beta, c.power, c.heads, c.dropout)
        model = TeacherStudent(enc, g.num_features, c.d, c.momentum)
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], c.lr, weight_decay=c.weight_decay)

        def embed() -> torch.Tensor:
            model.eval()
            with torch.no_grad():
                z = model.student(g.x, g.edge_index)
            model.train()
            return z

        best = {"val_accuracy": -1.0}
        for epoch in range(1, c.epochs + 1):
            if method == "h3gnn" and epoch > c.warmup and model.hardness is not None:
                p = hardness_mask_probs(model.hardness, c.mask_rate, c.steer)
            else:
                p = torch.full((g.num_nodes,), c.mask_rate)
            loss = model.loss(g.x, g.edge_index, torch.rand(g.num_nodes) < p)
            opt.zero_grad()
            loss.backward()
            opt.step()
            model.update_teacher()
            if epoch % c.eval_every == 0 or epoch == c.epochs:
                res = probe(embed())
                if res["val_accuracy"] > best["val_accuracy"]:
                    best = {**res, "epoch": epoch}
        return best

    def _graphmae(self, g, method: str, probe) -> dict[str, float]:
        """GraphMAE (Hou et al. 2022): mask rows with a token, encode with a GCN, re-mask the masked nodes'
        codes, decode with one GCN layer, and score the masked rows with the scaled cosine error (1 − cos)^γ."""
        c = self.config
        enc = GCN(g.num_features, c.d, c.d, layers=2, dropout=c.dropout)
        dec = GCN(c.d, c.d, g.num_features, layers=1, dropout=0.0)
        token = nn.Parameter(torch.zeros(1, g.num_features))
        opt = torch.optim.Adam([*enc.parameters(), *dec.parameters(), token], c.lr, weight_decay=c.weight_decay)
        best = {"val_accuracy": -1.0}
        for epoch in range(1, c.epochs + 1):
            mask = torch.rand(g.num_nodes) < c.mask_rate
            z = F.prelu(enc(torch.where(mask[:, None], token, g.x), g.edge_index), torch.tensor(0.25))
            rec = dec(torch.where(mask[:, None], torch.zeros_like(z), z), g.edge_index)
            loss = (1 - F.cosine_similarity(rec[mask], g.x[mask], dim=-1)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if epoch % c.eval_every == 0 or epoch == c.epochs:
                enc.eval()
                with torch.no_grad():
                    res = probe(enc(g.x, g.edge_index))
                enc.train()
                if res["val_accuracy"] > best["val_accuracy"]:
                    best = {**res, "epoch": epoch}
        return best

    def _plot(self, per_h: dict[float, report.Results]) -> None:
        plt = pyplot()
        c = self.config
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for m in c.methods:
            report.curve(ax, c.homophilies, [per_h[h][NAMES[m]]["test_accuracy"] for h in c.homophilies], NAMES[m])
        ax.set_xlabel("node homophily h")
        ax.set_ylabel("linear-probe test accuracy")
        ax.legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(
            fig, "probe_accuracy", "Linear-probe test accuracy against homophily (mean ± std over seeds)"
        )

    def evaluate(self) -> dict[str, Any]:
        return {}


def propagate(x: torch.Tensor, edge_index: torch.Tensor, k: int) -> torch.Tensor:
    """Â^k X (SGC's features: a GCN without weights)."""
    adj = gcn_adjacency(edge_index, x.size(0))
    for _ in range(k):
        x = torch.sparse.mm(adj, x)
    return x
