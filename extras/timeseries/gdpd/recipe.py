"""extras.timeseries.gdpd: early classification of time series from a prefix. A teacher LSTM reads whole series;
the same LSTM as a student reads the first p %, trained alone, with logit KD, with FitNets, or with GDPD (a DDPM
prior over the teacher's features completes the prefix's features, and the completion must classify)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.sweep import product, sweep
from agentkit.extras.timeseries.gdpd.config import GDPDConfig
from agentkit.extras.timeseries.gdpd.diffusion import Schedule, fit_prior
from agentkit.extras.timeseries.gdpd.model import Distiller, LSTMClassifier
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

NAMES = {"student": "student alone", "kd": "logit KD", "fitnets": "FitNets", "gdpd": "GDPD"}


def auc_pr(y: np.ndarray, probs: np.ndarray) -> float:
    """Average precision: of class 1 for two classes, else the macro mean over one-vs-rest.

    >>> round(auc_pr(np.array([0, 1, 1]), np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])), 4)
    1.0
    """
    from sklearn.metrics import average_precision_score

    if probs.shape[1] == 2:
        return float(average_precision_score(y, probs[:, 1]))
    return float(average_precision_score(np.eye(probs.shape[1])[y], probs, average="macro"))


class GDPDRecipe(Recipe[GDPDConfig]):
    name = "extras.timeseries.gdpd"
    config_cls = GDPDConfig
    description = "GDPD vs the student alone, logit KD and FitNets: accuracy and AUC-PR from a prefix"

    def setup(self) -> None:
        self.sets = {name: self._load(name) for name in self.config.datasets}
        self.teachers: dict[tuple[str, int], dict[str, Any]] = {}

    def _load(self, name: str):
        """``(x, y, x_test, y_test)`` as float32 tensors ``[N, channels, length]``, subsampled by the smallest
        integer stride that leaves at most ``max_steps`` steps, standardised per channel with the training
        statistics."""
        c = self.config
        if name == "weak_prefix":
            x, y = data.weak_prefix_series(c.weak_n, cue=c.weak_cue, seed=0)
            half = c.weak_n // 2
            x, y, xt, yt = x[:half], y[:half], x[half:], y[half:]
        else:
            x, y, xt, yt = data.ucr(name)
        stride = -(-x.shape[2] // c.max_steps)  # LSTMs learn poorly over hundreds of steps (Coffee: chance at 286)
        x, xt = x[..., ::stride], xt[..., ::stride]
        mean, std = x.mean((0, 2), keepdims=True), x.std((0, 2), keepdims=True) + 1e-8
        t = torch.tensor
        return t((x - mean) / std, dtype=torch.float32), t(y), t((xt - mean) / std, dtype=torch.float32), t(yt)

    # ---- training ----------------------------------------------------------------------------------------------

    def _fit(self, params, loss_fn, score_fn, n: int, seed: int, desc: str):
        """Adam (gradients clipped to norm 1) on ``loss_fn(batch index)`` for ``epochs``; every ``eval_every`` epochs ``score_fn()`` (validation
        AUC-PR, then accuracy); the parameters end at the best state, and that score is returned."""
        c = self.config
        params = list(params)
        opt = torch.optim.Adam(params, lr=c.lr)
        gen = torch.Generator().manual_seed(seed)
        best = ((-1.0, -1.0), None)
        for epoch in self.ctx.progress(range(c.epochs), desc):
            for b in torch.randperm(n, generator=gen).split(c.batch_size):
                loss = loss_fn(b)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
            if (epoch + 1) % c.eval_every == 0 or epoch + 1 == c.epochs:
                score = score_fn()
                if score > best[0]:
                    best = (score, [p.detach().clone() for p in params])
        with torch.no_grad():
            for p, v in zip(params, best[1]):
                p.copy_(v)
        return best[0]

    def _scores(self, model, x, y) -> tuple[float, float]:
        """(AUC-PR, accuracy) of ``model`` on ``x``."""
        with torch.no_grad():
            probs = F.softmax(model(x), -1).numpy()
        return auc_pr(y.numpy(), probs), float((probs.argmax(1) == y.numpy()).mean())

    def _teacher(self, name: str, seed: int) -> dict[str, Any]:
        """The full-series teacher of a dataset and seed, its feature statistics and its DDPM prior (made once per
        process: every student of the seed distils from it)."""
        key = (name, seed)
        if key in self.teachers:
            return self.teachers[key]
        c = self.config
        x, y, xt, yt = self.sets[name]
        tr, va, _ = data.split(y.numpy(), val=c.val_frac, test=0, seed=seed)
        tr, va = torch.tensor(tr), torch.tensor(va)
        classes = int(y.max()) + 1
        torch.manual_seed(seed)
        teacher = LSTMClassifier(x.shape[1], classes, c.hidden)
        self._fit(
            teacher.parameters(),
            lambda b: F.cross_entropy(teacher(x[tr[b]]), y[tr[b]]),
            lambda: self._scores(teacher, x[va], y[va]),
            len(tr),
            seed,
            f"{name} teacher (seed {seed})",
        )
        teacher.requires_grad_(False).eval()
        with torch.no_grad():
            feats, logits = teacher.features(x), teacher(x)
        mean, std = feats[tr].mean(0), feats[tr].std(0) + 1e-4
        schedule = Schedule(c.diffusion_steps)
        torch.manual_seed(seed)
        prior = fit_prior((feats[tr] - mean) / std, schedule, c.prior_steps, c.prior_hidden)
        auc, acc = self._scores(teacher, xt, yt)
        out = dict(
            teacher=teacher,
            feats=feats,
            logits=logits,
            stats=(mean, std),
            prior=prior,
            schedule=schedule,
            tr=tr,
            va=va,
            classes=classes,
            test={"auc_pr": auc, "accuracy": acc},
        )
        self.teachers[key] = out
        return out

    def _run(self, name: str, prefix: float, method: str, seed: int) -> dict[str, Any]:
        """One student setting, scored on the test series: GDPD trained with each λ of ``weights`` and the best on
        validation AUC-PR kept; the baselines with ``baseline_weight``."""
        c = self.config
        t = self._teacher(name, seed)
        x, y, xt, yt = self.sets[name]
        cut = max(2, round(prefix * x.shape[2]))
        xs, xts = x[..., :cut], xt[..., :cut]
        best = None
        grid = {"student": [0.0], "gdpd": c.weights}.get(method, [c.baseline_weight])
        for weight in grid:
            val, student = self._student(name, xs, method, weight, seed, f"{name} {prefix:.0%} λ={weight:g}")
            if best is None or val > best[0]:
                best = (val, weight, student)
        auc, acc = self._scores(best[2], xts, yt)
        return {
            "auc_pr": auc,
            "accuracy": acc,
            "val_auc_pr": best[0][0],
            "weight": best[1],
            "teacher_auc_pr": t["test"]["auc_pr"],
            "teacher_accuracy": t["test"]["accuracy"],
        }

    def _student(self, name: str, xs: torch.Tensor, method: str, weight: float, seed: int, desc: str):
        """(validation (AUC-PR, accuracy), student) of one student on the prefixes ``xs``, trained by ``method``
        with weight λ."""
        c = self.config
        t = self._teacher(name, seed)
        y, tr, va = self.sets[name][1], t["tr"], t["va"]
        torch.manual_seed(seed)  # the same initial student for every method and λ
        student = LSTMClassifier(xs.shape[1], t["classes"], c.hidden)
        dist = Distiller(student, method, weight, t["teacher"].head, t["prior"], t["schedule"], t["stats"], c.tau)
        val = self._fit(
            dist.parameters(),
            lambda b: dist.loss(xs[tr[b]], y[tr[b]], t["feats"][tr[b]], t["logits"][tr[b]]),
            lambda: self._scores(student, xs[va], y[va]),
            len(tr),
            seed,
            f"{desc} {NAMES[method]} (seed {seed})",
        )
        return val, student

    # ---- the sweep and its report ------------------------------------------------------------------------------

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(
            self.ctx,
            product(c.datasets, c.prefixes, c.methods),
            c.seeds,
            self._run,
            desc="datasets × prefixes × methods × seeds",
        )
        cols = [f"{m} @{p:.0%}" for p in c.prefixes for m in ("auc_pr", "accuracy")]
        out: dict[str, Any] = {}
        plt = pyplot()
        fig, axes = plt.subplots(1, len(c.datasets), figsize=(4.3 * len(c.datasets), 3.5), squeeze=False)
        for ax, (name, part) in zip(axes[0], grid.split().items()):
            res: report.Results = {}
            for (p, m), rows in part.raw.items():
                for r in rows:
                    report.add(res, NAMES[m], {f"auc_pr @{p:.0%}": r["auc_pr"], f"accuracy @{p:.0%}": r["accuracy"]})
            teacher = part.raw[part.settings[0]]
            res["teacher (whole series)"] = {k: [r[f"teacher_{k.split()[0]}"] for r in teacher] for k in cols}
            chosen = [
                f"{p:.0%}: " + ", ".join(f"{r['weight']:g}" for r in rows)
                for (p, m), rows in part.raw.items()
                if m == "gdpd"
            ]
            self.ctx.add_section(
                f"{name}: test AUC-PR and accuracy from a prefix ({c.seeds} seeds)",
                "Each student reads the first p % of each series; the teacher reads all of it (a reference, not a "
                f"competitor). Logit KD and FitNets use λ = {c.baseline_weight:g}; GDPD's λ is picked on "
                f"validation AUC-PR from {c.weights} for each seed (chosen by prefix, seed by seed: "
                + "; ".join(chosen)
                + ").\n\n"
                + report.table(res, cols)
                + "\n\n"
                + report.paired({k: v for k, v in res.items() if not k.startswith("teacher")}, NAMES["student"], cols),
            )
            out |= report.means(res, cols, f"{name}/")
            for m, per in res.items():
                style = "--" if m.startswith("teacher") else "-"
                report.curve(
                    ax, [100 * p for p in c.prefixes], [per[f"auc_pr @{p:.0%}"] for p in c.prefixes], m, ls=style
                )
            ax.set_title(name)
            ax.set_xlabel("prefix read (% of the series)")
            ax.set_ylabel("test AUC-PR")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "auc_pr_vs_prefix", "Test AUC-PR against the prefix read (mean ± std over seeds)")
        return out

    def evaluate(self) -> dict[str, Any]:
        return {}
