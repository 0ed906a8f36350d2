"""extras.vision.skipless: a ViT on Fashion-MNIST with skips, without skips (default init) and without skips
with the paper's initialisation, under AdamW and SOAP: loss curves, accuracy, attention-Jacobian conditioning."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import torch

from agentkit.extras import report
from agentkit.extras.data import fashion_mnist
from agentkit.extras.nets import fit, warmup_cosine
from agentkit.extras.sweep import sweep
from agentkit.extras.vision.skipless.config import SkiplessConfig
from agentkit.extras.vision.skipless.model import ViT, attention_jacobian_condition
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

VARIANTS, OPTIMIZERS = ("skip", "skipless", "skipless-init"), ("adamw", "soap")


class SkiplessRecipe(Recipe[SkiplessConfig]):
    name = "extras.vision.skipless"
    config_cls = SkiplessConfig
    description = "Skipless ViT with the paper's init vs skips and vs default init: loss, accuracy, Jacobian κ"

    def setup(self) -> None:
        c = self.config  # variants, optimizers, patch and heads are checked when the config is built
        x, y = fashion_mnist("train", c.train_size, seed=0)
        xt, yt = fashion_mnist("test", c.test_size, seed=0)
        x, xt = torch.from_numpy(x)[:, None], torch.from_numpy(xt)[:, None]
        y, yt = torch.from_numpy(y), torch.from_numpy(yt)
        self.val, self.train_set, self.test = (
            (x[: c.val_size], y[: c.val_size]),
            (x[c.val_size :], y[c.val_size :]),
            (xt, yt),
        )

    def train(self) -> dict[str, Any]:
        c = self.config
        runs = [(v, o) for v in c.variants for o in c.optimizers]
        grid = sweep(self.ctx, runs, c.seeds, self._train_one, seeds_outer=False)
        cols = ["test_accuracy", "final_train_loss", "log10 κ block 1", "log10 κ median", "seconds"]
        res = grid.results(lambda v, o: f"{v} / {o}", columns=cols)
        self.ctx.add_section(
            f"ViT ({c.depth}×{c.d}, {c.heads} heads, {c.patch}×{c.patch} patches) on Fashion-MNIST, "
            f"{c.epochs} epochs, {c.seeds} seeds",
            report.table(res, cols)
            + "\n\nκ: condition number of the attention sub-layer's Jacobian at initialisation (x ↦ x + MHSA(x) "
            "with skips, MHSA(x) without), median over the samples; `log10 κ median` is the median over all "
            "blocks. Test accuracy at the best validation epoch; final_train_loss: mean of the last 10 % of "
            "steps.\n\n" + report.paired(res, f"{c.variants[0]} / {c.optimizers[0]}", cols[:2]),
        )
        self._plot(grid)
        return report.means(res, ["test_accuracy"])

    def _train_one(self, variant: str, optimizer: str, seed: int) -> dict[str, Any]:
        c = self.config
        torch.manual_seed(seed)
        model = ViT(variant, c.depth, c.d, c.heads, c.patch, alpha=c.alpha, beta=c.beta, c=c.c)
        kappas = self._conditioning(model)
        if optimizer == "soap":
            from pytorch_optimizer import SOAP

            opt = SOAP(model.parameters(), lr=c.lr_soap, weight_decay=c.weight_decay)
        else:
            opt = torch.optim.AdamW(model.parameters(), lr=c.lr_adamw, weight_decay=c.weight_decay)
        sched = warmup_cosine(opt, c.epochs * -(-len(self.train_set[1]) // c.batch_size))
        t0 = time.perf_counter()
        out = fit(model, opt, self.train_set, self.val, self.test, c.epochs, c.batch_size, sched)
        losses, best = out["losses"], (out["val_accuracy"], out["test_accuracy"])
        k = max(1, len(losses) // 10)
        return {
            "test_accuracy": best[1],
            "val_accuracy": best[0],
            "final_train_loss": sum(losses[-k:]) / k,
            "log10 κ block 1": kappas[0],
            "log10 κ median": statistics.median(kappas),
            "log10 κ per block": kappas,
            "seconds": time.perf_counter() - t0,
            "curve": report.thin(losses, 150),
        }

    def _conditioning(self, model: ViT) -> list[float]:
        """log10 κ of every block's attention Jacobian at initialisation (median over jacobian_samples)."""
        with torch.no_grad():
            h = model.tokens(self.train_set[0][: self.config.jacobian_samples])
        out = []
        for blk in model.blocks:
            out.append(statistics.median(math.log10(attention_jacobian_condition(blk, hi)) for hi in h))
            with torch.no_grad():
                h = blk(h)
        return out

    def _plot(self, grid) -> None:
        plt = pyplot()

        c = self.config
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for v, o in grid.settings:
            for s, r in enumerate(grid.raw[(v, o)]):
                axes[0].plot(
                    r["curve"],
                    color=f"C{c.variants.index(v)}",
                    ls="-" if o == "adamw" else "--",
                    alpha=0.7,
                    label=f"{v} / {o}" if s == 0 else None,
                )
        axes[0].set_xlabel("training step (thinned)")
        axes[0].set_ylabel("training loss")
        axes[0].legend(fontsize=7)
        for v in c.variants:
            per = [r["log10 κ per block"] for r in grid.raw[(v, c.optimizers[0])]]
            axes[1].plot(range(1, c.depth + 1), [statistics.mean(b) for b in zip(*per)], marker="o", label=v)
        axes[1].set_xlabel("block")
        axes[1].set_ylabel("log10 κ (attention Jacobian, init)")
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(
            fig,
            "skipless",
            "Training loss (solid AdamW, dashed SOAP; one line per seed) and the "
            "attention Jacobian's condition number per block at initialisation",
        )

    def evaluate(self) -> dict[str, Any]:
        return {}
