"""extras.theory.icssl: in-context semi-supervised learning on episodes of n points from two-class manifolds.
IC-SSL against EIG+ICL, a plain ICL transformer, LabelSpreading and SpectralEmbedding+LR, by label fraction, on
the training geometries and out of distribution (held-out geometries, Fashion-MNIST class pairs)."""

from __future__ import annotations

import copy
import time
import warnings
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.sweep import product, sweep
from agentkit.extras.theory.icssl.config import ICSSLConfig
from agentkit.extras.theory.icssl.model import ICSSL, EigICL, PlainICL, labelled_mask
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

NAMES = {
    "icssl": "IC-SSL",
    "eig_icl": "EIG+ICL",
    "plain_icl": "plain ICL transformer",
    "label_spreading": "LabelSpreading",
    "spectral_lr": "SpectralEmbedding+LR",
}
FASHION = "fashion_pairs"
SCALES = (0.03, 0.1, 0.3, 1.0)  # the scikit-learn baselines' bandwidth grid (× the episode's median d²)


def frac_label(f: float) -> str:
    """``0.03`` → ``"3%"``."""
    return f"{f * 100:g}%"


class ICSSLRecipe(Recipe[ICSSLConfig]):
    name = "extras.theory.icssl"
    config_cls = ICSSLConfig
    description = "IC-SSL vs EIG+ICL, a plain ICL transformer and graph SSL: accuracy by label fraction, ID and OOD"

    def setup(self) -> None:
        c = self.config
        self.fashion = data.fashion_mnist_pca(c.pca_dim) if c.fashion_pairs else None
        self.test_sets = [*c.train_sets, *c.ood_sets] + ([FASHION] if c.fashion_pairs else [])

    # ---- episodes ----------------------------------------------------------------------------------------------

    def _draw(self, name: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One episode's points and labels, in random order."""
        c = self.config
        if name == FASHION:
            z, y = self.fashion
            a, b = rng.choice(10, 2, replace=False)
            half = c.n // 2
            idx = np.concatenate(
                [rng.choice(np.flatnonzero(y == a), half, False), rng.choice(np.flatnonzero(y == b), c.n - half, False)]
            )
            return z[idx], (y[idx] == b).astype(np.int64)
        return data.manifold(name, c.n, c.d, c.noise, seed=int(rng.integers(2**31)))

    def _batch(self, names, fracs, rng: np.random.Generator):
        """``(x [B, n, d], y [B, n], m [B])``: each episode ordered with its m labelled points first, at least one
        of each class among them."""
        xs, ys, ms = [], [], []
        for name, f in zip(names, fracs):
            x, y = self._draw(name, rng)
            perm = rng.permutation(len(y))
            first = [perm[np.flatnonzero(y[perm] == k)[0]] for k in np.unique(y)]
            order = np.concatenate([first, perm[~np.isin(perm, first)]]).astype(int)
            xs.append(x[order])
            ys.append(y[order])
            ms.append(max(len(first), round(f * len(y))))
        width = max(x.shape[1] for x in xs)
        xs = [np.pad(x, ((0, 0), (0, width - x.shape[1]))) for x in xs]
        return torch.tensor(np.stack(xs)), torch.tensor(np.stack(ys)), torch.tensor(ms)

    def _val(self, seed: int):
        c = self.config
        rng = np.random.default_rng([seed, 2])
        names = [c.train_sets[i % len(c.train_sets)] for i in range(c.val_episodes)]
        fracs = [c.label_fracs[(i // len(c.train_sets)) % len(c.label_fracs)] for i in range(c.val_episodes)]
        return self._batch(names, fracs, rng)

    def _tests(self, seed: int):
        """Every test cell ``(set, fraction)`` → its episodes; the same for every method at a seed (paired)."""
        c = self.config
        for i, name in enumerate(self.test_sets):
            for j, f in enumerate(c.label_fracs):
                rng = np.random.default_rng([seed, 1, i, j])
                yield name, f, self._batch([name] * c.test_episodes, [f] * c.test_episodes, rng)

    # ---- the sweep ---------------------------------------------------------------------------------------------

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, product(c.methods), c.seeds, self._run, seeds_outer=False, desc="methods × seeds")
        res = grid.results(lambda m: NAMES[m])
        cols = [frac_label(f) for f in c.label_fracs]
        out: dict[str, Any] = {}
        groups = [("in distribution: mean over " + ", ".join(c.train_sets), "ID mean")]
        if len(self.test_sets) > len(c.train_sets):
            groups.append(
                ("out of distribution: mean over " + ", ".join(self.test_sets[len(c.train_sets) :]), "OOD mean")
            )
        for title, key in groups:
            per = {m: {col: v[f"{key}/{col}"] for col in cols} for m, v in res.items()}
            body = report.table(per, cols, label="method \\ labelled")
            for base in ("EIG+ICL", "plain ICL transformer"):
                if base in per and "IC-SSL" in per:
                    body += "\n\n" + report.paired({base: per[base], "IC-SSL": per["IC-SSL"]}, base, cols)
            self.ctx.add_section(f"Accuracy on the unlabelled points, {title} ({c.seeds} seeds)", body)
            out |= report.means(per, cols, f"{key}/")
        for name in self.test_sets:
            per = {m: {col: v[f"{name}/{col}"] for col in cols} for m, v in res.items()}
            body = report.table(per, cols, label="method \\ labelled")
            if "EIG+ICL" in per:
                body += "\n\n" + report.paired(per, "EIG+ICL", cols)
            where = "held out of training" if name not in c.train_sets else "trained on"
            self.ctx.add_section(f"{name} ({where}): accuracy by label fraction", body)
            out |= report.means(per, cols, f"{name}/")
        self.ctx.add_section(
            "Cost",
            "Parameters, seconds per run (training and testing), the validation accuracy that picked the kept "
            f"step (or the scikit-learn hyperparameters) and IC-SSL's learned bandwidth scale s (EIG+ICL keeps "
            f"{c.scale:g}; h = s · the episode's median squared distance).\n\n"
            + report.table(res, ["params", "seconds", "val_accuracy", "bandwidth_scale"], label="method"),
        )
        self._plot(res, cols)
        return out

    def _plot(self, res: report.Results, cols: list[str]) -> None:
        c = self.config
        plt = pyplot()
        panels = self.test_sets
        rows = (len(panels) + 3) // 4
        fig, axes = plt.subplots(
            rows, min(4, len(panels)), figsize=(4.2 * min(4, len(panels)), 3.3 * rows), squeeze=False
        )
        for ax, name in zip(axes.flat, panels):
            for m, v in res.items():
                report.curve(ax, [100 * f for f in c.label_fracs], [v[f"{name}/{col}"] for col in cols], m)
            ax.set_xscale("log")
            ax.set_xticks([100 * f for f in c.label_fracs], cols)
            ax.minorticks_off()
            ax.set_title(name + ("" if name in c.train_sets else " (OOD)"))
            ax.set_xlabel("labelled share of the episode")
            ax.set_ylabel("accuracy (unlabelled points)")
        for ax in list(axes.flat)[len(panels) :]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "accuracy_vs_labels", "Accuracy against the labelled share (mean ± std over seeds)")

    def _run(self, method: str, seed: int) -> dict[str, Any]:
        c = self.config
        t0 = time.perf_counter()
        val = self._val(seed)
        if method in ("label_spreading", "spectral_lr"):
            predict, val_acc, params = self._sklearn(method, val)
            learned = {}
        else:
            model, val_acc = self._fit(method, seed, val)
            params = sum(p.numel() for p in model.parameters())
            learned = {"bandwidth_scale": float(model.log_scale.detach().exp())} if method == "icssl" else {}

            def predict(x, y, m):
                with torch.no_grad():
                    return model(x, y, m).argmax(-1)

        out: dict[str, Any] = {"val_accuracy": val_acc} | ({"params": params} if params else {}) | learned
        cells: dict[str, dict[str, float]] = {}
        for name, f, (x, y, m) in self._tests(seed):
            acc = _accuracy(predict(x, y, m), y, m)
            out[f"{name}/{frac_label(f)}"] = acc
            cells.setdefault(frac_label(f), {})[name] = acc
        for key, names in (("ID mean", c.train_sets), ("OOD mean", self.test_sets[len(c.train_sets) :])):
            if names:
                for col, per in cells.items():
                    out[f"{key}/{col}"] = float(np.mean([per[nm] for nm in names]))
        out["seconds"] = time.perf_counter() - t0
        return out

    def _fit(self, method: str, seed: int, val) -> tuple[torch.nn.Module, float]:
        """Train an in-context learner on random training episodes (CE on the unlabelled points); keep the step
        with the best validation accuracy."""
        c = self.config
        torch.manual_seed(seed)
        if method == "icssl":
            model, lr = ICSSL(2, c.k, c.power_layers, c.gd_steps, c.scale), c.lr
        elif method == "eig_icl":
            model, lr = EigICL(2, c.k, c.gd_steps, c.scale), c.lr
        else:
            d_in = max(c.d, c.pca_dim if c.fashion_pairs else 0)
            model, lr = PlainICL(d_in, 2, c.width, c.layers, c.heads), c.icl_lr
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        rng = np.random.default_rng([seed, 0])
        best = (-1.0, None)
        for step in self.ctx.progress(range(c.steps), f"{NAMES[method]} (seed {seed})"):
            model.train()
            x, y, m = self._batch(rng.choice(c.train_sets, c.batch_size), rng.choice(c.label_fracs, c.batch_size), rng)
            unl = 1 - labelled_mask(m, *y.shape)
            ce = F.cross_entropy(model(x, y, m).transpose(1, 2), y, reduction="none")
            loss = (ce * unl).sum() / unl.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if (step + 1) % c.eval_every == 0 or step + 1 == c.steps:
                model.eval()
                with torch.no_grad():
                    acc = _accuracy(model(*val).argmax(-1), val[1], val[2])
                if acc > best[0]:
                    best = (acc, copy.deepcopy(model.state_dict()))
        model.load_state_dict(best[1])
        model.eval()
        return model, best[0]

    def _sklearn(self, method: str, val):
        """The scikit-learn baseline's predictor, with its hyperparameters picked on the validation episodes."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.manifold import SpectralEmbedding
        from sklearn.semi_supervised import LabelSpreading

        k = self.config.k

        def one(x: np.ndarray, y: np.ndarray, m: int, hp: tuple) -> np.ndarray:
            d2 = ((x[:, None] - x[None]) ** 2).sum(-1)
            gamma = 1.0 / (2 * hp[0] * np.median(d2[~np.eye(len(x), dtype=bool)]))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if method == "label_spreading":
                    target = np.where(np.arange(len(y)) < m, y, -1)
                    return (
                        LabelSpreading(kernel="rbf", gamma=gamma, alpha=hp[1], max_iter=100)
                        .fit(x, target)
                        .transduction_
                    )
                z = SpectralEmbedding(hp[1], affinity="rbf", gamma=gamma, random_state=0).fit_transform(x)
                z = z / z.std(0).clip(1e-12)  # eigenvectors have norm 1: coordinates ~ 1/√n, too small for LR's prior
                return LogisticRegression(C=10.0).fit(z[:m], y[:m]).predict(z)

        def predict(x, y, m, hp=None):
            hp = hp or chosen
            return torch.tensor(np.stack([one(a.numpy(), b.numpy(), int(mm), hp) for a, b, mm in zip(x, y, m)]))

        grid = product(SCALES, (0.2, 0.8) if method == "label_spreading" else sorted({2, min(4, k), k}))
        scores = {hp: _accuracy(predict(*val, hp=hp), val[1], val[2]) for hp in grid}
        chosen = max(grid, key=lambda hp: scores[hp])
        return predict, scores[chosen], 0

    def evaluate(self) -> dict[str, Any]:
        return {}


def _accuracy(pred: torch.Tensor, y: torch.Tensor, m: torch.Tensor) -> float:
    """Mean over episodes of the accuracy on their unlabelled points."""
    unl = 1 - labelled_mask(m, *y.shape)
    return float((((pred == y).float() * unl).sum(1) / unl.sum(1)).mean())
