"""extras.graph.difflift: ∂lift's learned hypergraph and cell-complex liftings against static liftings (none,
closed 1-hop neighbourhoods, feature kNN, cycles), one topological network, on heterophilic node classification
and BA-2Motifs graph classification."""

from __future__ import annotations

import copy
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.graph.difflift.config import DiffLiftConfig
from agentkit.extras.graph.difflift.model import (
    Cells,
    TopoNet,
    closed_neighbourhoods,
    cycle_cells,
    knn,
    static_hyperedges,
)
from agentkit.extras.sweep import product, sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

NAMES = {
    "none": "graph only",
    "one_hop": "static 1-hop",
    "knn": "feature kNN",
    "cycle": "cycles",
    "hyper": "∂lift hypergraph",
    "cell": "∂lift cells",
}


class DiffLiftRecipe(Recipe[DiffLiftConfig]):
    name = "extras.graph.difflift"
    config_cls = DiffLiftConfig
    description = "∂lift learned liftings vs static 1-hop, feature-kNN and cycle liftings: node and graph accuracy"

    def setup(self) -> None:
        data.require_pyg()

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, product(c.tasks, c.liftings), c.seeds, self._run, desc="lifting runs")
        res = {t: part.results(lambda lift: NAMES[lift]) for t, part in grid.split().items()}
        for t in c.tasks:
            what = (
                f"node classification, random partition graph h = {c.homophily}"
                if t == "node"
                else f"graph classification, BA-2Motifs ({c.motif_graphs} graphs)"
            )
            self.ctx.add_section(
                f"{t}: {what} ({c.seeds} seeds)",
                report.table(res[t], ["test_accuracy", "val_accuracy", "cells", "seconds"])
                + "\n\n"
                + report.paired(res[t], NAMES[c.liftings[0]], ["test_accuracy"]),
            )
        plt = pyplot()
        fig, axes = plt.subplots(1, len(c.tasks), figsize=(5.5 * len(c.tasks), 3.6), squeeze=False)
        for ax, t in zip(axes[0], c.tasks):
            report.bars(ax, res[t], "test_accuracy", "node classification" if t == "node" else "BA-2Motifs")
        fig.tight_layout()
        self.ctx.save_plot(fig, "accuracy", "Test accuracy per lifting (mean ± std, dots: seeds)")
        return {k: v for t in c.tasks for k, v in report.means(res[t], ["test_accuracy"], f"{t}/").items()}

    def _static(self, lifting: str, x: torch.Tensor, edge_index: torch.Tensor, batch=None) -> Cells | None:
        c, n = self.config, x.size(0)
        if lifting == "one_hop":
            return closed_neighbourhoods(edge_index, n)
        if lifting == "knn":
            return static_hyperedges(knn(x, c.knn_k, batch))
        if lifting == "cycle":
            return cycle_cells(edge_index, n, c.max_cycle)
        return None

    def _model(self, d_in: int, classes: int, lifting: str, graph_level: bool) -> TopoNet:
        c = self.config
        return TopoNet(d_in, c.d, classes, c.layers, lifting, c.dropout, c.k_min, c.k_max, graph_level)

    def _run(self, task: str, lifting: str, seed: int) -> dict[str, float]:
        t0 = time.perf_counter()
        out = self._node(lifting, seed) if task == "node" else self._motif(lifting, seed)
        return {**out, "seconds": time.perf_counter() - t0}

    def _node(self, lifting: str, seed: int) -> dict[str, float]:
        c = self.config
        g = data.partition_graph(
            c.homophily, c.classes, c.per_class, c.degree, c.channels, c.informative, c.class_sep, seed
        )
        tr, va, te = (torch.from_numpy(i) for i in data.split(g.y.numpy(), val=0.2, test=0.2, seed=seed))
        torch.manual_seed(seed)
        static = self._static(lifting, g.x, g.edge_index)
        model = self._model(g.num_features, c.classes, lifting, graph_level=False)
        opt = torch.optim.Adam(model.parameters(), c.lr, weight_decay=c.weight_decay)
        best = {"val_accuracy": -1.0}
        for _ in range(c.node_epochs):
            model.train()
            loss = F.cross_entropy(model(g.x, g.edge_index, static=static)[tr], g.y[tr])
            opt.zero_grad()
            loss.backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                pred = model(g.x, g.edge_index, static=static).argmax(1)
            val = (pred[va] == g.y[va]).float().mean().item()
            if val > best["val_accuracy"]:
                best = {"val_accuracy": val, "test_accuracy": (pred[te] == g.y[te]).float().mean().item()}
        with torch.no_grad():
            cells = model.cells(g.x, g.edge_index, None, static)[2]
        return {**best, "cells": _count(cells)}

    def _motif(self, lifting: str, seed: int) -> dict[str, float]:
        from torch_geometric.data import Batch
        from torch_geometric.loader import DataLoader

        c = self.config
        graphs = data.ba_motifs(c.motif_graphs, seed=seed)
        y = np.array([int(g.y) for g in graphs])
        tr, va, te = data.split(y, val=0.1, test=0.2, seed=seed)
        torch.manual_seed(seed)
        model = self._model(graphs[0].num_features, 2, lifting, graph_level=True)
        opt = torch.optim.Adam(model.parameters(), c.lr / 5, weight_decay=c.weight_decay)
        loader = DataLoader(
            [graphs[i] for i in tr], c.batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
        )
        evals = {k: Batch.from_data_list([graphs[i] for i in idx]) for k, idx in (("val", va), ("test", te))}
        static_eval = {k: self._static(lifting, b.x, b.edge_index, b.batch) for k, b in evals.items()}

        def accuracy(split: str) -> float:
            b = evals[split]
            with torch.no_grad():
                pred = model(b.x, b.edge_index, b.batch, static_eval[split]).argmax(1)
            return (pred == b.y).float().mean().item()

        best, state = {"val_accuracy": -1.0}, None
        for _ in range(c.motif_epochs):
            model.train()
            for b in loader:
                logits = model(b.x, b.edge_index, b.batch, self._static(lifting, b.x, b.edge_index, b.batch))
                loss = F.cross_entropy(logits, b.y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            model.eval()
            val = accuracy("val")
            if val > best["val_accuracy"]:
                best, state = {"val_accuracy": val}, copy.deepcopy(model.state_dict())
        model.load_state_dict(state)
        model.eval()
        b = evals["test"]
        with torch.no_grad():
            cells = model.cells(b.x, b.edge_index, b.batch, static_eval["test"])[2]
        return {**best, "test_accuracy": accuracy("test"), "cells": _count(cells) / len(te)}


def _count(cells: Cells | None) -> float:
    """Cells with non-zero weight (per graph for the motif task: divided by the caller)."""
    if cells is None or len(cells.cell) == 0:
        return 0.0
    alive = torch.zeros(int(cells.cell.max()) + 1).index_add_(0, cells.cell, cells.weight.detach()) > 0
    return float(alive.sum())
