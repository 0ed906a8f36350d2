"""extras.theory.symspace: symmetric-space latents for combinatorial generalisation. A flow-matching decoder
conditioned on exp(P), P in a learnable Cartan 𝔭 ⊂ so(n), trained with geodesic-symmetry consistency, against the
same flow without L_Cartan and L_GSC and a same-size VAE: do samples drawn from the prior reach a region the
training data never showed (an arc of S², a quarter of sprite positions)?"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentkit.extras import data, report
from agentkit.extras.sweep import product, sweep
from agentkit.extras.theory.symspace.config import SymSpaceConfig
from agentkit.extras.theory.symspace.lie import cartan_residual
from agentkit.extras.theory.symspace.model import VAE, SymSpace, chamfer, recall
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

LABELS = {
    "symspace": "symspace",
    "cfm": "CFM (no Cartan, no GSC)",
    "vae": "VAE",
    "no_gsc": "symspace − GSC",
    "no_cartan": "symspace − Cartan",
}
METRICS = ["chamfer", "unseen_recall", "seen_recall", "gap_share", "reflect_gap"]
PLOT_POINTS = 600


class SymSpaceRecipe(Recipe[SymSpaceConfig]):
    name = "extras.theory.symspace"
    config_cls = SymSpaceConfig
    description = "Symmetric-space latents + flow matching vs the plain flow and a VAE: samples in a held-out region"

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, product(c.tasks, c.methods), c.seeds, self._run, desc="tasks × methods × seeds")
        out: dict[str, Any] = {}
        parts = grid.split()
        for task, part in parts.items():
            res = part.results(lambda m: LABELS[m])
            cols = METRICS + (["render_error"] if task == "sprites" else [])
            what = {
                "sphere": "Points on S² (training azimuths 0–270°; the 270–360° arc held out). Distances in R³.",
                "sprites": f"{c.sprite_size}×{c.sprite_size} images of a square (positions with x > 0.5 and y > 0.5 "
                "held out; each x and y value occurs elsewhere). Every metric reads positions back from the images "
                "(intensity centroid) and measures in [0, 1]²; render_error is ‖image − a clean render at its read "
                "position‖², how far a sample is from being a sprite at all.",
            }[task]
            floor = self._floor(task)
            self.ctx.add_section(
                f"{task}: {c.seeds} seeds, {c.steps} steps each",
                f"{what} chamfer: symmetric Chamfer distance between {c.eval_size} samples from the prior and as "
                f"many true points of the whole space (two independent true samples score {floor:.4f}); "
                "unseen_recall / seen_recall: mean squared distance from held-out / seen true points to the nearest "
                "sample (coverage); gap_share: the samples' share in the held-out region (uniform: 0.25); "
                "reflect_gap: the share of geodesic reflections, decode(−μ(x)) for seen test points x, that land in "
                "the held-out region (the mechanism L_GSC trains).\n\n"
                + report.table(res, cols, digits=4)
                + "\n\n"
                + report.paired(res, LABELS["cfm"], cols, digits=4)
                + "\n\n"
                + report.paired(res, LABELS["vae"], cols, digits=4),
            )
            out |= report.means(res, cols, f"{task}/")
        self._plot(parts)
        return out

    def _task(self, task: str, seed: int) -> dict[str, Any]:
        """The task's training inputs, seen test inputs, reference points (factor space: all, held out, seen), the
        readout from samples to factor space and the held-out test."""
        c = self.config
        if task == "sphere":
            return {
                "train": data.sphere(c.train_size, (0, 270), seed),
                "seen_x": data.sphere(c.eval_size // 2, (0, 270), 1000 + seed),
                "ref": data.sphere(c.eval_size, (0, 360), 2000 + seed),
                "unseen": data.sphere(c.eval_size // 2, (270, 360), 3000 + seed),
                "readout": lambda x: x,
                "in_gap": lambda p: data.azimuth_deg(p) >= 270,
            }
        size = c.sprite_size
        seen = data.sprite_positions(c.eval_size // 2, False, 1000 + seed)
        return {
            "train": data.sprites(data.sprite_positions(c.train_size, False, seed), size),
            "seen_x": data.sprites(seen, size),
            "seen": seen,
            "ref": data.sprite_positions(c.eval_size, None, 2000 + seed),
            "unseen": data.sprite_positions(c.eval_size // 2, True, 3000 + seed),
            "readout": lambda x: data.sprite_centroid(x, size),
            "in_gap": lambda p: (p > 0.5).all(1),
        }

    def _floor(self, task: str) -> float:
        """Chamfer between two independent true samples of the whole space (what a perfect sampler scores)."""
        t = self._task(task, 0)
        other = (
            data.sphere(len(t["ref"]), (0, 360), 9999)
            if task == "sphere"
            else data.sprite_positions(len(t["ref"]), None, 9999)
        )
        return chamfer(torch.tensor(t["ref"]), torch.tensor(other))

    def _run(self, task: str, method: str, seed: int) -> dict[str, Any]:
        c = self.config
        t = self._task(task, seed)
        x = torch.tensor(t["train"])
        hidden = c.hidden if task == "sphere" else c.sprite_hidden
        torch.manual_seed(seed)
        if method == "vae":
            model = VAE(x.shape[1], 2, hidden, c.kl_weight)
        else:
            weights = {"kl": c.kl_weight, "cartan": c.cartan_weight, "gsc": c.gsc_weight, "basis": c.basis_weight}
            if method in ("cfm", "no_cartan"):
                weights["cartan"] = 0.0
            if method in ("cfm", "no_gsc"):
                weights["gsc"] = 0.0
            model = SymSpace(x.shape[1], c.algebra_n, c.k_dim, 2, hidden, c.sigma_min, weights)
        opt = torch.optim.Adam(model.parameters(), lr=c.lr)
        for _ in self.ctx.progress(range(c.steps), f"{task} {LABELS[method]} (seed {seed})"):
            loss = model.total(model.loss(x[torch.randint(0, len(x), (c.batch_size,))]))
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        samples = model.sample(c.eval_size, c.euler_steps)
        points = t["readout"](samples.numpy())
        with torch.no_grad():
            mu = model.encode(torch.tensor(t["seen_x"]))[0]
        reflected = t["readout"](model.decode(-mu, c.euler_steps).numpy())
        p = torch.tensor(np.asarray(points, np.float32))
        out = {
            "chamfer": chamfer(p, torch.tensor(t["ref"])),
            "unseen_recall": recall(torch.tensor(t["unseen"]), p),
            "seen_recall": recall(torch.tensor(t["seen"] if task == "sprites" else t["seen_x"]), p),
            "gap_share": float(t["in_gap"](points).mean()),
            "reflect_gap": float(t["in_gap"](reflected).mean()),
        }
        if task == "sprites":
            clean = data.sprites(points, c.sprite_size)
            out["render_error"] = float(((samples.numpy() - clean) ** 2).sum(1).mean())
        if isinstance(model, SymSpace):
            with torch.no_grad():
                out["cartan_residual"] = float(cartan_residual(*model.bases()))
        if seed == 0:
            out["points"] = np.round(points[:PLOT_POINTS], 3).tolist()
        return out

    def _plot(self, parts) -> None:
        plt = pyplot()
        tasks = list(parts)
        settings = parts[tasks[0]].settings
        fig, axes = plt.subplots(
            len(tasks), len(settings) + 1, figsize=(2.9 * (len(settings) + 1), 2.9 * len(tasks)), squeeze=False
        )
        for row, task in zip(axes, tasks):
            t = self._task(task, 0)
            train = t["train"][:PLOT_POINTS] if task == "sphere" else data.sprite_positions(PLOT_POINTS, False, 0)
            panels = [("training data", np.asarray(train))] + [
                (LABELS[s[0]], np.asarray(parts[task].raw[s][0]["points"])) for s in settings
            ]
            for ax, (title, pts) in zip(row, panels):
                gap = t["in_gap"](pts)
                if task == "sphere":  # equal-area map: azimuth against height
                    ax.axvspan(270, 360, color="0.9")
                    xy = np.stack([data.azimuth_deg(pts), pts[:, 2]], 1)
                    ax.set_xlim(0, 360)
                    ax.set_ylim(-1.6, 1.6)
                    ax.set_xlabel("azimuth (°)")
                else:
                    ax.add_patch(plt.Rectangle((0.5, 0.5), 0.5, 0.5, color="0.9"))
                    xy = pts
                    ax.set_xlim(-0.1, 1.1)
                    ax.set_ylim(-0.1, 1.1)
                    ax.set_xlabel("x")
                ax.scatter(*xy[~gap].T, s=2, color="tab:blue")
                ax.scatter(*xy[gap].T, s=2, color="tab:red")
                ax.set_title(f"{task}: {title}\nin held-out region {gap.mean():.2f}", fontsize=8)
            row[0].set_ylabel("height z" if task == "sphere" else "y")
        fig.tight_layout()
        self.ctx.save_plot(
            fig,
            "samples",
            f"Training data and {PLOT_POINTS} samples per method (seed 0): red where the held-out region is (grey)",
        )
        fig, axes = plt.subplots(len(tasks), 2, figsize=(11, 3.8 * len(tasks)), squeeze=False)
        for row, task in zip(axes, tasks):
            res = parts[task].results(lambda m: LABELS[m])
            report.bars(row[0], res, "chamfer", f"{task}: Chamfer to the whole space (lower is better)")
            report.bars(row[1], res, "gap_share", f"{task}: samples' share in the held-out region (uniform 0.25)")
        fig.tight_layout()
        self.ctx.save_plot(fig, "chamfer", "Chamfer distance and held-out share: mean ± std, one dot per seed")

    def evaluate(self) -> dict[str, Any]:
        return {}
