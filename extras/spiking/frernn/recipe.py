"""extras.spiking.frernn: FRE-RNN (feedback-regulated residual RNN, Equilibrium Propagation) against unregulated EP
and backprop on Fashion-MNIST, 3 and 8 hidden layers with and without residuals: accuracy, settling steps, time."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.spiking.frernn.config import FRERNNConfig, parse
from agentkit.extras.spiking.frernn.model import FRERNN
from agentkit.extras.sweep import sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

COLUMNS = ["test_accuracy", "val_accuracy", "free_steps", "settled_at", "train_settled_at", "seconds_per_epoch"]


class FRERNNRecipe(Recipe[FRERNNConfig]):
    name = "extras.spiking.frernn"
    config_cls = FRERNNConfig
    description = "FRE-RNN vs unregulated EP and BP on Fashion-MNIST: accuracy, settling steps and wall time"

    def setup(self) -> None:
        c = self.config
        splits = data.fashion_mnist_splits(c.train_size, c.val_size, c.test_size)
        self.sets = {k: (x.flatten(1), y) for k, (x, y) in splits.items()}

    def train(self) -> dict[str, Any]:
        c = self.config
        res = sweep(self.ctx, [(st,) for st in c.settings], c.seeds, self._run).results(columns=COLUMNS)
        base = next((st for st in c.settings if st.startswith("ep-")), c.settings[0])
        self.ctx.add_section(
            f"Fashion-MNIST, 784-{c.width}×layers-10 tanh networks ({c.seeds} seeds; epoch picked on validation)",
            f"fre: EP with feedback ×{c.feedback} and a free phase of {c.steps_per_layer}·layers steps; ep: EP with "
            f"unscaled feedback and {c.ep_steps} free steps; bp: backprop through the feed-forward pass; -res: identity "
            f"residuals from layer i − {c.skip}. free_steps: the free phase's most steps; settled_at: the first step after "
            f"which no unit moved more than {c.tol} on the test set (free_steps when it never settled); "
            "train_settled_at: its mean over training batches; "
            + "seconds_per_epoch: training wall time here (2 CPU cores).\n\n"
            + report.table(res, COLUMNS)
            + f"\n\nPaired differences from {base} (unregulated EP, or the first setting):\n\n"
            + report.paired(res, base, ["test_accuracy", "settled_at", "seconds_per_epoch"]),
        )
        plt = pyplot()
        fig, axes = plt.subplots(1, 3, figsize=(15, 3.8))
        report.bars(axes[0], res, "test_accuracy", "test accuracy")
        report.bars(axes[1], res, "settled_at", "free-phase settling step")
        report.bars(axes[2], res, "seconds_per_epoch", "seconds per epoch")
        for ax in axes:
            ax.tick_params(axis="x", labelrotation=45)
        fig.tight_layout()
        self.ctx.save_plot(fig, "frernn", "Accuracy, settling and training time (mean ± std over seeds)")
        return report.means(res, ["test_accuracy"])

    def _run(self, setting: str, seed: int) -> dict[str, Any]:
        c = self.config
        method, layers, res = parse(setting)
        (x, y), gen = self.sets["train"], torch.Generator().manual_seed(seed)
        net = FRERNN([784] + [c.width] * layers, 10, c.feedback if method == "fre" else 1.0, c.skip * res, seed)
        steps = c.steps_per_layer * layers if method == "fre" else c.ep_steps
        opt = torch.optim.Adam(net.parameters(), c.lr)
        best, clock, settle_sum, batches = (-1.0, 0.0, 0), 0.0, 0, 0
        for _ in range(c.epochs):
            t0 = time.perf_counter()
            for b in torch.randperm(len(y), generator=gen).split(c.batch_size):
                opt.zero_grad()
                if method == "bp":
                    F.cross_entropy(net(x[b]), y[b]).backward()
                else:
                    settle_sum += net.ep_step(x[b], y[b], steps, c.beta, c.tol)
                    batches += 1
                opt.step()
            clock += time.perf_counter() - t0
            val = self._accuracy(net, "val", method, steps)[0]
            if val > best[0]:
                best = (val, *self._accuracy(net, "test", method, steps))
        return {
            "test_accuracy": best[1],
            "val_accuracy": best[0],
            "free_steps": steps if method != "bp" else 0,
            "settled_at": best[2],
            "train_settled_at": settle_sum / max(batches, 1),
            "seconds_per_epoch": clock / c.epochs,
        }

    def _accuracy(self, net: FRERNN, split: str, method: str, steps: int) -> tuple[float, int]:
        """(accuracy, settling step) on a split: EP networks are read at their free-phase state."""
        x, y = self.sets[split]
        with torch.no_grad():
            if method == "bp":
                return (net(x).argmax(1) == y).float().mean().item(), 0
            logits, settled = net.predict(x, steps, self.config.tol)
        return (logits.argmax(1) == y).float().mean().item(), settled

    def evaluate(self) -> dict[str, Any]:
        return {}
