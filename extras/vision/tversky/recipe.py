"""extras.vision.tversky: the Tversky projection layer against nn.Linear (XOR, heads on frozen CNN features,
prototype images). Each part's per-seed results are recorded, so ``--resume`` redoes only unfinished seeds."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from agentkit.extras import data, report
from agentkit.extras.data import FMNIST_CLASSES, xor
from agentkit.extras.nets import SmallCNN, accuracy, fit
from agentkit.extras.sweep import sweep
from agentkit.extras.vision.tversky.config import TverskyConfig
from agentkit.extras.vision.tversky.model import TverskyProjection
from agentkit.plots import pyplot
from agentkit.recipe import Recipe


class TverskyRecipe(Recipe[TverskyConfig]):
    name = "extras.vision.tversky"
    config_cls = TverskyConfig
    description = "Tversky projection layer vs nn.Linear: XOR convergence, heads on frozen CNN features, prototypes"

    def setup(self) -> None:
        self.data = _load(self.config)

    def train(self) -> dict[str, Any]:
        metrics = self._xor()
        metrics.update(self._heads())
        metrics.update(self._prototypes())
        return metrics

    # ---- XOR ----------------------------------------------------------------------------------------------
    def _xor(self) -> dict[str, Any]:
        c = self.config
        x, y = (torch.tensor(a) for a in xor())
        layers = [("linear", 0)] + [("tversky", k) for k in c.xor_banks]

        def solve(kind: str, k: int, s: int) -> float:
            torch.manual_seed(s)
            layer = nn.Linear(2, 2) if kind == "linear" else TverskyProjection(2, 2, k)
            return _fit_full_batch(layer, x, y, c.xor_steps, c.xor_lr)

        grid = sweep(self.ctx, layers, c.xor_seeds, solve, name="xor", desc="XOR", seeds_outer=False)
        rows, out = [], {}
        for kind, k in layers:
            accs = grid.raw[(kind, k)]
            name = "nn.Linear" if kind == "linear" else f"Tversky K={k}"
            rate = sum(a == 1.0 for a in accs) / len(accs)
            out[f"xor/{name}/convergence"], out[f"xor/{name}/best_accuracy"] = rate, max(accs)
            rows.append(f"| {name} | {rate:.2f} | {report.fmt(accs, 2)} | {max(accs):.2f} |")
        self.ctx.add_section(
            f"XOR with one layer ({c.xor_seeds} seeds each, {c.xor_steps} Adam steps)",
            "| layer | converged (4/4 strictly right) | accuracy | best |\n|---|---|---|---|\n" + "\n".join(rows),
        )
        self._plot_xor(out)
        return out

    def _plot_xor(self, out: dict[str, float]) -> None:
        plt = pyplot()

        ks = self.config.xor_banks
        fig, ax = plt.subplots(figsize=(5, 3))
        ax.plot(ks, [out[f"xor/Tversky K={k}/convergence"] for k in ks], marker="o", label="Tversky projection")
        ax.axhline(out["xor/nn.Linear/convergence"], color="gray", ls="--", label="nn.Linear")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("feature bank size K")
        ax.set_ylabel("share of seeds that solve XOR")
        ax.legend()
        self.ctx.save_plot(fig, "xor", "XOR convergence rate of one layer against the feature bank size")

    # ---- heads on frozen CNN features ---------------------------------------------------------------------
    def _heads(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [()], c.seeds, self._heads_of_seed, name="heads", desc="frozen-feature heads")
        res: report.Results = {}
        for row in grid.raw[()]:
            report.add(res, "CNN's own head", {"test accuracy": row["cnn"], "params": 10 * c.feature_dim + 10})
            report.add(res, "linear head", {"test accuracy": row["linear"]["test"], "params": row["linear"]["params"]})
            report.add(
                res, "Tversky head", {"test accuracy": row["tversky"]["test"], "params": row["tversky"]["params"]}
            )
        self.ctx.add_section(
            f"Heads on frozen CNN features ({c.dataset}, {c.seeds} seeds, epoch chosen on validation)",
            report.table(res, ["test accuracy", "params"], label="head")
            + "\n\n"
            + report.paired(res, "linear head", ["test accuracy"]),
        )
        self._plot_bars(res)
        return {f"heads/{m}/test_accuracy": report.mean_std(v["test accuracy"])[0] for m, v in res.items()}

    def _heads_of_seed(self, s: int) -> dict[str, Any]:
        """A CNN trained with seed ``s``, frozen; its own head, and the best linear and Tversky heads on its
        standardised features (learning rate and Tversky variant chosen on validation)."""
        c = self.config
        torch.manual_seed(s)
        d = self.data
        cnn = SmallCNN(hidden=c.feature_dim, size=d["train"][0].shape[-1])
        fit(
            cnn,
            torch.optim.Adam(cnn.parameters(), lr=1e-3),
            d["train"],
            d["val"],
            d["test"],
            c.cnn_epochs,
            c.batch_size,
        )
        cnn.eval()  # frozen from here: the heads train on its last features
        with torch.no_grad():
            feats = {k: torch.cat([cnn.features(b) for b in v[0].split(1024)]) for k, v in d.items()}
        row = {"cnn": accuracy(cnn, *d["test"])}
        mu, sd = feats["train"].mean(0), feats["train"].std(0) + 1e-6  # both heads get standardised features
        feats = {k: (v - mu) / sd for k, v in feats.items()}
        labels = {k: v[1] for k, v in self.data.items()}
        scales = (1.0, c.feature_dim**-0.5)  # the paper's init, and one that keeps |S| of order one
        heads = {
            "linear": [lambda: nn.Linear(c.feature_dim, 10)],
            "tversky": [
                lambda n=n, z=z: TverskyProjection(c.feature_dim, 10, c.head_bank, normalize=n, init_scale=z)
                for n in (False, True)
                for z in scales
            ],
        }
        for name, makers in heads.items():  # learning rate (and the Tversky variant) chosen on validation
            fits = []
            for i, make in enumerate(makers):
                for lr in c.head_lrs:
                    torch.manual_seed(s)
                    head = make()
                    r = fit(
                        head,
                        torch.optim.Adam(head.parameters(), lr=lr),
                        *((feats[k], labels[k]) for k in ("train", "val", "test")),
                        c.head_epochs,
                        c.batch_size,
                    )
                    fits.append(
                        {
                            "val": r["val_accuracy"],
                            "test": r["test_accuracy"],
                            "lr": lr,
                            "variant": i,
                            "params": sum(p.numel() for p in head.parameters()),
                        }
                    )
            row[name] = max(fits, key=lambda f: f["val"])
        return row

    def _plot_bars(self, res: report.Results) -> None:
        plt = pyplot()

        fig, ax = plt.subplots(figsize=(4, 3))
        report.bars(ax, res, "test accuracy")
        lo = min(min(v["test accuracy"]) for v in res.values())
        ax.set_ylim(max(0.0, lo - 0.05), 1.0)
        fig.tight_layout()
        self.ctx.save_plot(fig, "heads", "Test accuracy of a linear and a Tversky head on the same frozen features")

    # ---- prototypes on raw pixels -------------------------------------------------------------------------
    def _prototypes(self) -> dict[str, Any]:
        c = self.config
        ytr, yva, yte = (self.data[k][1] for k in ("train", "val", "test"))
        side = self.data["train"][0].shape[-1]
        flat = {k: v[0].reshape(len(v[0]), -1) for k, v in self.data.items()}
        best = None
        for lr in c.head_lrs:  # chosen on validation
            torch.manual_seed(0)
            layer = TverskyProjection(side * side, 10, c.proto_bank, normalize=True, init_scale=(side * side) ** -0.5)
            r = fit(
                layer,
                torch.optim.Adam(layer.parameters(), lr=lr),
                (flat["train"], ytr),
                (flat["val"], yva),
                (flat["test"], yte),
                c.proto_epochs,
                c.batch_size,
            )
            val, acc = r["val_accuracy"], r["test_accuracy"]
            if best is None or val > best[0]:
                best = (val, acc, lr, layer)
        val, acc, lr, layer = best
        self._plot_prototypes(layer, side)
        self.ctx.add_section(
            "Tversky layer on raw pixels",
            f"One Tversky projection layer (K = {c.proto_bank}, "
            f"normalised inputs, init scale d^-1/2, lr {lr:g} chosen on validation) on raw pixels "
            f"reaches test accuracy {acc:.3f}; its prototypes and features are plotted as images.",
        )
        return {"pixels/tversky/test_accuracy": acc}

    def _plot_prototypes(self, layer: TverskyProjection, side: int) -> None:
        plt = pyplot()

        protos = layer.prototypes.detach().reshape(-1, side, side)
        feats = layer.bank.detach()[:10].reshape(-1, side, side)
        fig, axes = plt.subplots(2, 10, figsize=(12, 2.8))
        for i in range(10):
            for row, imgs, title in ((0, protos, "prototype"), (1, feats, "feature")):
                axes[row][i].imshow(imgs[i].numpy(), cmap="RdBu_r")
                axes[row][i].axis("off")
                name = FMNIST_CLASSES[i] if self.config.dataset == "fashion_mnist" else str(i)
                axes[row][i].set_title(name if row == 0 else f"{title} {i}", fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "prototypes", "Learned prototypes (top, one per class) and features (bottom)")

    def evaluate(self) -> dict[str, Any]:
        return {}


def _load(c: TverskyConfig) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """train / val / test as (images [N, 1, H, W] float, labels [N] long)."""
    if c.dataset == "fashion_mnist":
        x, y = data.fashion_mnist("train", c.train_size + c.val_size, seed=0)
        xt, yt = data.fashion_mnist("test", c.test_size, seed=0)
        tr, va, _ = data.split(y, val=c.val_size / len(y), test=0.0, seed=0)
        parts = {"train": (x[tr], y[tr]), "val": (x[va], y[va]), "test": (xt, yt)}
    elif c.dataset == "digits":
        x, y = data.sklearn_set("digits")
        x = (x / 16.0).reshape(-1, 8, 8)
        n = len(y)
        tr, va, te = data.split(y, val=c.val_size / n, test=c.test_size / n, seed=0)
        parts = {"train": (x[tr][: c.train_size], y[tr][: c.train_size]), "val": (x[va], y[va]), "test": (x[te], y[te])}
    else:
        from agentkit.errors import AgentkitError

        raise AgentkitError(f"dataset: {c.dataset!r} is not fashion_mnist or digits")
    return {
        k: (torch.tensor(np.asarray(a), dtype=torch.float32)[:, None], torch.tensor(b)) for k, (a, b) in parts.items()
    }


def _fit_full_batch(layer: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float) -> float:
    """Full-batch Adam on cross-entropy; the share of points whose true class scores strictly highest."""
    opt = torch.optim.Adam(layer.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(layer(x), y).backward()
        opt.step()
    with torch.no_grad():
        s = layer(x)
        true = s.gather(1, y[:, None])
        rival = s.masked_fill(F.one_hot(y, s.shape[1]).bool(), float("-inf")).amax(1, keepdim=True)
    return (true > rival).float().mean().item()
