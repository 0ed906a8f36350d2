"""extras.graph.sc: GSAT against GSAT + self-consistency on BA-2Motifs: explanation ROC-AUC against the motif
edges, stability across seeds (SHD), fidelity and accuracy."""

from __future__ import annotations

import copy
import itertools
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.graph.sc.config import SCConfig
from agentkit.extras.graph.sc.model import AttnGIN, Explainer, bernoulli_kl, concrete, sc_loss, symmetrise
from agentkit.extras.sweep import sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

METHODS = ("GSAT", "GSAT + FT", "GSAT + SC")


class SCRecipe(Recipe[SCConfig]):
    name = "extras.graph.sc"
    config_cls = SCConfig
    description = "GSAT vs GSAT + self-consistency on BA-2Motifs: explanation AUC, SHD across seeds, fidelity"

    def setup(self) -> None:
        data.require_pyg()
        from torch_geometric.data import Batch

        c = self.config
        graphs = data.ba_motifs(c.graphs, c.base, seed=0)
        y = np.array([int(g.y) for g in graphs])
        tr, va, te = data.split(y, val=0.1, test=0.2, seed=0)
        self.train_set = [graphs[i] for i in tr]
        self.val_batch = Batch.from_data_list([graphs[i] for i in va])
        self.test_batch = Batch.from_data_list([graphs[i] for i in te])

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [()], c.seeds, self._seed, name="seeds", desc="seeds (GSAT, then FT and SC)")
        res = grid.nested()  # one job per seed trains GSAT, then fine-tunes it two ways
        for m in METHODS:  # SHD: mean |α_i − α_j| over test edges, for every pair of seeds
            atts = [np.array(r[m]["att"]) for r in grid.raw[()]]
            res[m]["shd"] = [float(np.abs(a - b).mean()) for a, b in itertools.combinations(atts, 2)]
        cols = ["explanation_auc", "shd", "fidelity", "fid_plus", "fid_minus", "accuracy", "sc_gap"]
        self.ctx.add_section(
            f"Test graphs ({c.seeds} seeds; SHD over the {c.seeds * (c.seeds - 1) // 2} pairs of seeds)",
            "explanation_auc: ROC-AUC of α against the motif edges; shd: mean |α_i − α_j| between seeds (lower is "
            "more stable); fidelity = (Fid⁺ + 1 − Fid⁻)/2 with the top "
            f"{c.fid_edges} edges per graph removed (Fid⁺) or kept alone (Fid⁻); sc_gap: mean |α_old − α_new|.\n\n"
            + report.table(res, cols)
            + "\n\n"
            + report.paired(res, "GSAT + FT", ["explanation_auc", "fidelity", "accuracy"]),
        )
        self._plot(res)
        return report.means(res, ["explanation_auc", "shd", "fidelity"])

    def _seed(self, seed: int) -> dict[str, Any]:
        c = self.config
        torch.manual_seed(seed)
        gin = AttnGIN(self.train_set[0].num_features, c.hidden, c.layers, 2)
        expl = Explainer(c.hidden, c.dropout)
        t0 = time.perf_counter()
        gin, expl = self._fit(gin, expl, list(gin.parameters()) + list(expl.parameters()), c.epochs, 0.0, seed)
        out = {"GSAT": {**self._score(gin, expl), "seconds": time.perf_counter() - t0}}
        for name, lam in (("GSAT + FT", 0.0), ("GSAT + SC", c.lam_sc)):
            g2, e2 = copy.deepcopy(gin), copy.deepcopy(expl)
            g2.requires_grad_(False)
            g2.head.requires_grad_(True)
            e2.mlp[2].p = c.sc_dropout
            t1 = time.perf_counter()
            g2, e2 = self._fit(g2, e2, list(g2.head.parameters()) + list(e2.parameters()), c.sc_epochs, lam, seed)
            out[name] = {**self._score(g2, e2), "seconds": time.perf_counter() - t1}
        return out

    def _fit(self, gin: AttnGIN, expl: Explainer, params: list, epochs: int, lam: float, seed: int):
        """Train (GSAT loss, + λ·SC gap when λ > 0); keep the epoch with the best validation accuracy."""
        from torch_geometric.loader import DataLoader

        c = self.config
        opt = torch.optim.Adam(params, c.lr)
        frozen = not any(p.requires_grad for p in gin.mlps.parameters())
        loader = DataLoader(self.train_set, c.batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
        best = (-1.0, None)
        for _ in range(epochs):
            gin.train(not frozen)  # frozen layers keep their batch-norm statistics
            expl.train()
            for b in loader:
                h = gin.emb(b.x, b.edge_index)
                att = symmetrise(concrete(expl(h.detach() if frozen else h, b.edge_index)), b.edge_index, b.num_nodes)
                loss = F.cross_entropy(gin(b.x, b.edge_index, b.batch, att), b.y) + c.reg * bernoulli_kl(att, c.r)
                if lam > 0:
                    loss = loss + lam * sc_loss(gin, expl, b.x, b.edge_index)[0]
                opt.zero_grad()
                loss.backward()
                opt.step()
            acc = self._predict(gin, expl, self.val_batch)[0]
            if acc > best[0]:
                best = (acc, (copy.deepcopy(gin.state_dict()), copy.deepcopy(expl.state_dict())))
        gin.load_state_dict(best[1][0])
        expl.load_state_dict(best[1][1])
        return gin, expl

    @torch.no_grad()
    def _predict(self, gin, expl, b, keep: torch.Tensor | None = None) -> tuple[float, torch.Tensor, torch.Tensor]:
        """(accuracy, α [E], predictions [B]) in eval mode; ``keep`` (0/1 per edge) replaces α when given."""
        gin.eval()
        expl.eval()
        att = symmetrise(torch.sigmoid(expl(gin.emb(b.x, b.edge_index), b.edge_index)), b.edge_index, b.num_nodes)
        pred = gin(b.x, b.edge_index, b.batch, att if keep is None else keep).argmax(1)
        return (pred == b.y).float().mean().item(), att, pred

    def _score(self, gin, expl) -> dict[str, Any]:
        from sklearn.metrics import roc_auc_score

        c, b = self.config, self.test_batch
        acc, att, pred = self._predict(gin, expl, b)
        top = top_edges(att, b.batch[b.edge_index[0]], c.fid_edges)
        right = (pred == b.y).float()
        without = (self._predict(gin, expl, b, keep=(~top).float())[2] == b.y).float()
        alone = (self._predict(gin, expl, b, keep=top.float())[2] == b.y).float()
        fid_plus, fid_minus = (right - without).mean().item(), (right - alone).mean().item()
        with torch.no_grad():
            gap = sc_loss(gin, expl, b.x, b.edge_index)[0].item()
        return {
            "accuracy": acc,
            "explanation_auc": roc_auc_score(b.edge_gt.numpy(), att.numpy()),
            "fid_plus": fid_plus,
            "fid_minus": fid_minus,
            "fidelity": (fid_plus + 1 - fid_minus) / 2,
            "sc_gap": gap,
            "att": [round(v, 4) for v in att.tolist()],
        }

    def _plot(self, res: report.Results) -> None:
        plt = pyplot()
        fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
        for ax, (k, title) in zip(
            axes,
            [("explanation_auc", "explanation ROC-AUC ↑"), ("shd", "SHD across seeds ↓"), ("fidelity", "fidelity ↑")],
        ):
            report.bars(ax, res, k, title)
        fig.tight_layout()
        self.ctx.save_plot(fig, "sc", "Explanation quality of GSAT, GSAT + FT and GSAT + SC (mean ± std, dots: seeds)")

    def evaluate(self) -> dict[str, Any]:
        return {}


def top_edges(att: torch.Tensor, graph_of_edge: torch.Tensor, k: int) -> torch.Tensor:
    """Boolean ``[E]``: the k edges of largest α in each graph (ties by order)."""
    order = torch.argsort(att, descending=True, stable=True)
    order = order[torch.argsort(graph_of_edge[order], stable=True)]  # by graph, then by α descending
    counts = torch.bincount(graph_of_edge)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(len(att)) - starts[graph_of_edge[order]]
    out = torch.zeros(len(att), dtype=torch.bool)
    out[order[rank < k]] = True
    return out
