"""extras.efficiency.klas: which stitches to keep between small ViTs of one family. KLAS (KL of per-block probes,
Γ in FLOPs buckets) against SN-Net's rule, CKA-ranked and random stitches: the same count, least-squares
initialised, fine-tuned for the same steps; the accuracy–FLOPs frontier each family reaches."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras import data, nets, report
from agentkit.extras.efficiency.klas.config import KLASConfig
from agentkit.extras.efficiency.klas.selection import (
    gamma,
    kl_table,
    klas_select,
    linear_cka,
    lstsq_stitch,
    mean_kl,
    pareto_auc,
    snnet_stitches,
)
from agentkit.extras.efficiency.klas.vit import Stitched, ViT, fit_probe, flops, probe_probs
from agentkit.extras.sweep import product, sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

NAMES = {"klas": "KLAS", "snnet": "SN-Net rule", "cka": "CKA-ranked", "random": "random"}
Stitch = tuple[int, int, int, int]  # (anchor f, anchor g, block i of f, block j of g)


class KLASRecipe(Recipe[KLASConfig]):
    name = "extras.efficiency.klas"
    config_cls = KLASConfig
    description = "KLAS vs SN-Net's rule, CKA and random stitches: accuracy–FLOPs frontiers of stitched ViTs"

    def setup(self) -> None:
        c = self.config
        self.data = data.fashion_mnist_splits(c.train_size, c.val_size, c.test_size)
        self.family: dict[int, dict[str, Any]] = {}

    # ---- the anchors and what every method reads ---------------------------------------------------------------

    def _family(self, seed: int) -> dict[str, Any]:
        """The seed's trained anchors, their probes' class distributions on validation, and every candidate stitch
        with its FLOPs, Γ and CKA (made once per process; every method of the seed starts from it)."""
        if seed in self.family:
            return self.family[seed]
        c = self.config
        (x, y), (xv, yv) = self.data["train"], self.data["val"]
        anchors = []
        for k, w in enumerate(c.widths):
            torch.manual_seed(1000 * seed + k)
            model = ViT(w, c.depth)
            opt = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=0.05)
            steps = c.anchor_epochs * -(-len(y) // c.batch_size)
            nets.fit(
                model, opt, (x, y), (xv, yv), (xv, yv), c.anchor_epochs, c.batch_size, nets.warmup_cosine(opt, steps)
            )
            anchors.append(model.eval())
        feats = [a.block_features(x[:5000]) for a in anchors]
        feats_v = [a.block_features(xv) for a in anchors]
        probs = []
        for fa, fv in zip(feats, feats_v):
            probs.append([probe_probs(fit_probe(f, y[:5000], steps=c.probe_steps), v) for f, v in zip(fa, fv)])
        example = xv[:2]
        cands: list[Stitch] = [
            (a, b, i, j)
            for a in range(len(anchors))
            for b in range(a + 1, len(anchors))
            for i in range(c.depth)
            for j in range(c.depth - 1)
        ]
        theta = {(a, b): kl_table(probs[a], probs[b]) for a, b in {(s[0], s[1]) for s in cands}}
        next_kl = [np.array([mean_kl(p[j], p[j + 1]) for j in range(c.depth - 1)]) for p in probs]
        ls, ls_acc = [], []  # each candidate's least-squares stitch (W, b) on 1,000 training images, and its
        for a, b, i, j in cands:  # validation accuracy with it, before any fine-tuning
            with torch.no_grad():
                h_f = anchors[a].tokens(x[:1000], i).reshape(-1, anchors[a].width)
                h_g = anchors[b].tokens(x[:1000], j).reshape(-1, anchors[b].width)
            ls.append(lstsq_stitch(h_f, h_g))
            ls_acc.append(nets.accuracy(Stitched(anchors[a], anchors[b], i, j, *ls[-1]), xv[:1000], yv[:1000]))
        out = {
            "ls": ls,
            "ls_accuracy": np.array(ls_acc),
            "anchors": anchors,
            "anchor_flops": [flops(a, example) for a in anchors],
            "cands": cands,
            "flops": np.array([flops(Stitched(anchors[a], anchors[b], i, j), example) for a, b, i, j in cands]),
            "gamma": np.array([gamma(theta[a, b], next_kl[b])[i, j] for a, b, i, j in cands]),
            "cka": np.array([linear_cka(feats_v[a][i], feats_v[b][j]) for a, b, i, j in cands]),
            "last_kl": {pair: float(t[-1, -1]) for pair, t in theta.items()},
        }
        self.family[seed] = out
        return out

    def _select(self, method: str, fam: dict[str, Any], seed: int) -> list[Stitch]:
        """The method's stitches, as many as SN-Net's rule gives."""
        c = self.config
        cands = fam["cands"]
        rule = [(a, a + 1, i, j) for a in range(len(c.widths) - 1) for i, j in snnet_stitches(c.depth, c.window)]
        if method == "snnet":
            return rule
        count = len(rule)
        if method == "random":
            pick = np.random.default_rng(seed).choice(len(cands), count, replace=False)
            return [cands[k] for k in sorted(pick)]
        if method == "cka":
            return [cands[k] for k in np.argsort(-fam["cka"], kind="stable")[:count]]
        pair = min(fam["last_kl"], key=fam["last_kl"].get)  # the anchor pair with the smallest last-block KL
        idx = np.array([k for k, s in enumerate(cands) if (s[0], s[1]) == pair])
        kept = set(idx[klas_select(fam["gamma"][idx], fam["flops"][idx], c.buckets, c.slack)].tolist())
        ranked = sorted(idx.tolist(), key=lambda k: (k not in kept, fam["gamma"][k]))  # kept first, then by Γ
        return [cands[k] for k in ranked[:count]]

    # ---- one method: least squares, fine-tuning, the frontier --------------------------------------------------

    def _run(self, method: str, seed: int) -> dict[str, Any]:
        c = self.config
        fam = self._family(seed)
        chosen = self._select(method, fam, seed)
        anchors = copy.deepcopy(fam["anchors"])
        x, y = self.data["train"]
        members = [
            Stitched(anchors[a], anchors[b], i, j, *fam["ls"][fam["cands"].index((a, b, i, j))])
            for a, b, i, j in chosen
        ]  # on the copies, from the family's least-squares fits
        family = [*anchors, *members]
        params = {id(p): p for m in family for p in m.parameters()}
        opt = torch.optim.AdamW(list(params.values()), lr=c.lr / 3, weight_decay=0.05)
        rng = np.random.default_rng([seed, 7])
        for m in family:
            m.train()
        for _ in self.ctx.progress(range(c.finetune_steps), f"{NAMES[method]} fine-tuning (seed {seed})"):
            model = family[rng.integers(len(family))]  # SN-Net: one member of the family per step
            b = torch.from_numpy(rng.integers(0, len(y), c.batch_size))
            loss = F.cross_entropy(model(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        xt, yt = self.data["test"]
        acc = [nets.accuracy(m, xt, yt) for m in family]
        fl = fam["anchor_flops"] + [int(fam["flops"][fam["cands"].index(s)]) for s in chosen]
        lo, hi = min(fam["anchor_flops"]), max(fam["anchor_flops"])
        stitch_acc = acc[len(anchors) :]
        from scipy.stats import spearmanr

        return {
            "rho_gamma": float(spearmanr(-fam["gamma"], fam["ls_accuracy"]).statistic),
            "rho_cka": float(spearmanr(fam["cka"], fam["ls_accuracy"]).statistic),
            "pareto_auc": pareto_auc(np.array(fl, float), np.array(acc), lo, hi),
            "stitch_accuracy": float(np.mean(stitch_acc)),
            "best_stitch_accuracy": float(np.max(stitch_acc)),
            "stitches": len(chosen),
            "points": [[f, a] for f, a in zip(fl, acc)],
            "chosen": [list(s) for s in chosen],
        }

    # ---- report ------------------------------------------------------------------------------------------------

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, product(c.methods), c.seeds, self._run, desc="methods × seeds")
        res = grid.results(lambda m: NAMES[m])
        cols = ["pareto_auc", "stitch_accuracy", "best_stitch_accuracy", "stitches"]
        self.ctx.add_section(
            f"Accuracy–FLOPs frontier of each stitched family ({c.seeds} seeds)",
            "pareto_auc: the mean over FLOPs between the smallest and the largest anchor of the best test accuracy "
            "any member (anchors and stitches) reaches within that many FLOPs; stitch_accuracy: the stitches' mean "
            f"test accuracy. Every method has the same count of stitches and {c.finetune_steps} fine-tuning steps "
            "from its own copy of the same anchors.\n\n"
            + report.table(res, cols)
            + "\n\n"
            + report.paired(res, NAMES["snnet"], cols[:3]),
        )
        first = grid.raw[(c.methods[0],)]
        self.ctx.add_section(
            "Does a score predict a stitch's accuracy? (every candidate, before fine-tuning)",
            "Spearman ρ over all candidate stitches of every small → large anchor pair between the score and the "
            "stitch's validation accuracy right after its least-squares fit (higher −Γ and higher CKA should mean a "
            "better stitch).\n\n"
            + report.table(
                {
                    "−Γ (KLAS)": {"ρ": [r["rho_gamma"] for r in first]},
                    "linear CKA": {"ρ": [r["rho_cka"] for r in first]},
                },
                ["ρ"],
                label="score",
            ),
        )
        self._plot(grid)
        return report.means(res, cols[:3])

    def _plot(self, grid) -> None:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6, 4))
        for (m,), rows in grid.raw.items():
            pts = np.array(rows[0]["points"])
            order = np.argsort(pts[:, 0])
            ax.scatter(pts[:, 0] / 1e6, pts[:, 1], s=14, label=NAMES[m])
            front = np.maximum.accumulate(pts[order, 1])
            ax.step(pts[order, 0] / 1e6, front, where="post", alpha=0.6)
        ax.set_xlabel("MFLOPs per image")
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize=8)
        fig.tight_layout()
        self.ctx.save_plot(
            fig, "frontiers", "Accuracy against FLOPs of every family member, with each frontier (seed 0)"
        )

    def evaluate(self) -> dict[str, Any]:
        return {}
