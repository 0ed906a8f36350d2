"""extras.efficiency.orderdp: per-epoch data pruning on an MLP classifier — full data, random pruning, plain
top-q by loss (biased) and OrderDP (random pool, then top-q) at the same kept fraction; accuracy against cost."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from agentkit.extras import data, report
from agentkit.extras.efficiency.orderdp.config import OrderDPConfig
from agentkit.extras.efficiency.orderdp.selection import OrderDPSelector
from agentkit.extras.sweep import sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

METHODS = ("full", "random", "top-q", "OrderDP")


class OrderDPRecipe(Recipe[OrderDPConfig]):
    name = "extras.efficiency.orderdp"
    config_cls = OrderDPConfig
    description = "OrderDP vs full data, random pruning and top-q: accuracy against training cost"

    def setup(self) -> None:
        c = self.config
        bad = [m for m in c.methods if m not in METHODS] + [k for k in c.keep if not 0 < k <= c.order_q]
        if bad:
            from agentkit.errors import AgentkitError

            raise AgentkitError(
                f"bad methods or keep fractions: {bad}",
                f"methods from {METHODS}; each keep in (0, order_q = {c.order_q}]",
            )
        self.data = _load(c)

    def train(self) -> dict[str, Any]:
        c = self.config
        runs = [("full", 1.0)] if "full" in c.methods else []
        runs += [(m, k) for k in c.keep for m in c.methods if m != "full"]
        grid = sweep(self.ctx, runs, c.seeds, self._train_one, seeds_outer=False)
        res = grid.results(lambda m, k: m if m == "full" else f"{m} @ keep {k:g}")
        self.ctx.add_section(
            f"Test accuracy and cost ({c.dataset}, MLP, {c.epochs} epochs, {c.seeds} seeds)",
            report.table(res, ["test_accuracy", "seconds", "samples"], label="method")
            + "\n\n"
            + report.paired(res, "full", ["test_accuracy", "seconds"]),
        )
        self._plot(grid)
        return report.means(res, ["test_accuracy"])

    def _train_one(self, method: str, keep: float, seed: int) -> dict[str, float]:
        c = self.config
        (x, y), (xv, yv), (xt, yt) = self.data["train"], self.data["val"], self.data["test"]
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(x.shape[1], c.hidden), nn.ReLU(), nn.Linear(c.hidden, 10))
        opt = torch.optim.Adam(model.parameters(), lr=c.lr)
        rho_s, rho_q = {
            "full": (1.0, 1.0),
            "random": (keep, 1.0),
            "top-q": (1.0, keep),
            "OrderDP": (keep / c.order_q, c.order_q),
        }[method]
        sel = OrderDPSelector(len(y), rho_s, rho_q, seed=seed)
        best, samples, t0 = (-1.0, 0.0), 0, time.perf_counter()
        for _ in range(c.epochs):
            idx = torch.from_numpy(sel.select())
            for b in idx[torch.randperm(len(idx))].split(c.batch_size):
                opt.zero_grad()
                losses = F.cross_entropy(model(x[b]), y[b], reduction="none")
                losses.mean().backward()  # the plain mean over the kept samples
                opt.step()
                sel.update(b.numpy(), losses.detach().numpy())
                samples += len(b)
            with torch.no_grad():
                val = (model(xv).argmax(1) == yv).float().mean().item()
                if val > best[0]:
                    best = (val, (model(xt).argmax(1) == yt).float().mean().item())
        return {
            "test_accuracy": best[1],
            "val_accuracy": best[0],
            "seconds": time.perf_counter() - t0,
            "samples": samples,
        }

    def _plot(self, grid) -> None:
        plt = pyplot()

        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for m, part in grid.split().items():
            per = part.results(lambda k: str(k))
            pts = [(k, report.mean_std(v["test_accuracy"]), report.mean_std(v["samples"])[0]) for k, v in per.items()]
            ax.errorbar(
                [p[2] for p in pts],
                [p[1][0] for p in pts],
                yerr=[p[1][1] for p in pts],
                marker="o",
                capsize=3,
                label=m,
                ls="-" if len(pts) > 1 else "none",
            )
        ax.set_xlabel("samples trained on (all epochs)")
        ax.set_ylabel("test accuracy")
        ax.legend()
        fig.tight_layout()
        self.ctx.save_plot(fig, "accuracy_vs_cost", "Test accuracy against training cost (mean ± std over seeds)")

    def evaluate(self) -> dict[str, Any]:
        return {}


def _load(c: OrderDPConfig) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    if c.dataset == "fashion_mnist":
        x, y = data.fashion_mnist("train", c.train_size, seed=0)
        xt, yt = data.fashion_mnist("test", c.test_size, seed=0)
        x, xt = x.reshape(len(x), -1), xt.reshape(len(xt), -1)
    elif c.dataset == "digits":
        x, y = data.sklearn_set("digits")
        x = x / 16.0
        tr, _, te = data.split(y, val=0.01, test=c.test_size / len(y), seed=0)
        x, y, xt, yt = x[tr][: c.train_size], y[tr][: c.train_size], x[te], y[te]
    else:
        from agentkit.errors import AgentkitError

        raise AgentkitError(f"dataset: {c.dataset!r} is not fashion_mnist or digits")
    tr, va, _ = data.split(y, val=c.val_size / len(y), test=0.0, seed=0)
    y = y.copy()
    if c.label_noise > 0:  # flip a share of the training labels (validation and test stay clean)
        rng = np.random.default_rng(0)
        flip = tr[rng.random(len(tr)) < c.label_noise]
        y[flip] = (y[flip] + rng.integers(1, 10, len(flip))) % 10

    def t(a, b):
        return torch.tensor(np.asarray(a), dtype=torch.float32), torch.tensor(np.asarray(b))

    return {"train": t(x[tr], y[tr]), "val": t(x[va], y[va]), "test": t(xt, yt)}
