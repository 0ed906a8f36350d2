"""extras.robust.hdro: worst-group accuracy of ERM, Group DRO and Hierarchical Group DRO on coloured
Fashion-MNIST, on the standard test set and on sets where one minority group is shifted (rotated)."""

from __future__ import annotations

import time
from typing import Any

import torch

from agentkit.extras import report
from agentkit.extras.data import coloured_fashion_mnist as cfm
from agentkit.extras.nets import SmallCNN, predict
from agentkit.extras.robust.hdro.config import HDROConfig
from agentkit.extras.robust.hdro.loss import GroupLoss
from agentkit.extras.sweep import sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

NAMES = {"erm": "ERM", "group_dro": "Group DRO", "hdro": "HDRO"}
GROUPS = ("y0 red", "y0 green", "y1 red", "y1 green")


class HDRORecipe(Recipe[HDROConfig]):
    name = "extras.robust.hdro"
    config_cls = HDROConfig
    description = "Hierarchical Group DRO vs ERM and Group DRO: worst-group accuracy under a within-group shift"

    def setup(self) -> None:
        c = self.config  # methods and shift_group are checked when the config is built
        x, y, g = cfm("train", c.train_size, c.train_agree, seed=0)
        perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
        va, tr = perm[: c.val_size], perm[c.val_size :]
        t = torch.from_numpy
        self.train_set = (t(x)[tr], t(y)[tr], t(g)[tr])
        self.val_set = (t(x)[va], t(y)[va], t(g)[va])
        self.tests = {"standard": tuple(map(t, cfm("test", c.test_size, c.test_agree, seed=1)))}
        for deg in c.shift_degs:
            self.tests[f"rot{deg:g}"] = tuple(
                map(t, cfm("test", c.test_size, c.test_agree, seed=1, rotate_group=c.shift_group, rotate_deg=deg))
            )
        self.runs = [(m, e) for m in c.methods for e in (c.eps if m == "hdro" else [0.0])]

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, self.runs, c.seeds, self._train_one, seeds_outer=False)
        res = grid.results(lambda m, e: NAMES[m] + (f" ε={e:g}" if m == "hdro" else ""))
        splits = list(self.tests)
        counts = torch.bincount(self.train_set[2], minlength=4).tolist()
        self.ctx.add_section(
            f"Worst-group and average test accuracy ({c.seeds} seeds, epoch picked by worst-group validation accuracy)",
            f"Training groups {dict(zip(GROUPS, counts))}; test colour agreement {c.test_agree}; rotN: the test set "
            f"with group {GROUPS[c.shift_group]!r} rotated by N°.\n\n"
            + report.table(res, [f"{s}/{k}" for s in splits for k in ("worst", "average")] + ["seconds"])
            + "\n\n"
            + report.paired(res, NAMES["group_dro"], [f"{s}/worst" for s in splits]),
        )
        self.ctx.add_section("Per-group test accuracy", report.table(res, [f"{s}/{k}" for s in splits for k in GROUPS]))
        self._plot(res, splits)
        return report.means(res, [f"{s}/worst" for s in splits])

    def _train_one(self, method: str, eps: float, seed: int) -> dict[str, float]:
        c = self.config
        x, y, g = self.train_set
        torch.manual_seed(seed)
        model = SmallCNN(in_ch=2, classes=2, hidden=c.hidden)
        opt = torch.optim.SGD(model.parameters(), lr=c.lr, momentum=0.9, weight_decay=c.weight_decay)
        loss_fn = GroupLoss(torch.bincount(g, minlength=4), method, eps, c.eta, c.adjust)
        best, t0 = (-1.0, {}), time.perf_counter()
        for _ in range(c.epochs):
            for b in torch.randperm(len(y)).split(c.batch_size):
                opt.zero_grad()
                loss_fn(model.features(x[b]), y[b], g[b], model.head).backward()
                opt.step()
            val = group_accuracy(model, *self.val_set)
            if val["worst"] > best[0]:
                best = (
                    val["worst"],
                    {f"{s}/{k}": v for s, d in self.tests.items() for k, v in group_accuracy(model, *d).items()},
                )
        return {**best[1], "val/worst": best[0], "seconds": time.perf_counter() - t0}

    def _plot(self, res: report.Results, splits: list[str]) -> None:
        plt = pyplot()

        fig, axes = plt.subplots(1, len(splits), figsize=(3.6 * len(splits), 3.4), sharey=True)
        for ax, split in zip(axes, splits):
            report.bars(ax, res, f"{split}/worst", f"{split} test set")
            ax.set_ylabel("")
        axes[0].set_ylabel("worst-group accuracy")
        fig.tight_layout()
        self.ctx.save_plot(fig, "worst_group", "Worst-group test accuracy per method (mean ± std, dots: seeds)")

    def evaluate(self) -> dict[str, Any]:
        return {}


def group_accuracy(model, x: torch.Tensor, y: torch.Tensor, g: torch.Tensor) -> dict[str, float]:
    """Accuracy per group (named as in GROUPS), the worst of the groups present, and the average."""
    right = (predict(model, x) == y).float()
    per = {GROUPS[k]: right[g == k].mean().item() for k in range(4) if bool((g == k).any())}
    return {**per, "worst": min(per.values()), "average": right.mean().item()}
