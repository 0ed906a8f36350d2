"""extras.spiking.bep: binary MLPs on Fashion-MNIST trained by BEP (integers only), by a local rule (binary
feedback alignment) and by straight-through-estimator QAT: test accuracy and the operations training costs."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from agentkit.extras import data, report
from agentkit.extras.spiking.bep.config import BEPConfig
from agentkit.extras.spiking.bep.model import BinaryMLP, binarise
from agentkit.extras.spiking.bep.ste import STEBinaryMLP
from agentkit.plots import pyplot
from agentkit.recipe import Recipe, job_key

NAMES = {"bep": "BEP (Wᵀ)", "local": "local rule (random ±1 feedback)", "ste": "STE-QAT (float latent)"}


class BEPRecipe(Recipe[BEPConfig]):
    name = "extras.spiking.bep"
    config_cls = BEPConfig
    description = "BEP vs STE-QAT and a local rule: binary MLP accuracy on Fashion-MNIST and training operations"

    def setup(self) -> None:
        c = self.config
        x, y = data.fashion_mnist("train", c.train_size, seed=0)
        xt, yt = data.fashion_mnist("test", c.test_size, seed=1)
        x, xt = torch.from_numpy(x.reshape(len(x), -1)), torch.from_numpy(xt.reshape(len(xt), -1))
        tr, va, _ = data.split(y, val=c.val_size / len(y), test=0, seed=0)
        thresholds = x[tr].median(0).values
        self.train_set = (binarise(x[tr], thresholds), torch.from_numpy(y[tr]))
        self.val_set = (binarise(x[va], thresholds), torch.from_numpy(y[va]))
        self.test_set = (binarise(xt, thresholds), torch.from_numpy(yt))

    def train(self) -> dict[str, Any]:
        c = self.config
        done = self.ctx.each("runs", [(m, s) for s in range(c.seeds) for m in c.methods], self._run, "training runs")
        res: report.Results = {}
        for m in c.methods:
            for s in range(c.seeds):
                report.add(res, NAMES[m], {k: v for k, v in done[job_key((m, s))].items() if k != "curve"})
        sizes = [784, *c.hidden]
        self.ctx.add_section(
            f"Fashion-MNIST, binary {'-'.join(map(str, sizes))} + 10 prototypes ({c.seeds} seeds; epoch picked on validation)",
            "bit_ops_per_sample: BEP and the local rule, XNOR-popcount bit operations per training sample (forward, "
            "plus the backward pass and the update of the samples that trigger one); float_macs_per_sample: STE's "
            "32-bit multiply-accumulates per training sample (forward, input gradients, weight gradients).\n\n"
            + report.table(
                res, ["test_accuracy", "val_accuracy", "bit_ops_per_sample", "float_macs_per_sample", "seconds"]
            ),
        )
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
        report.bars(axes[0], res, "test_accuracy", "test accuracy")
        for m in c.methods:
            curves = np.array([done[job_key((m, s))]["curve"] for s in range(c.seeds)])
            axes[1].plot(range(1, c.epochs + 1), curves.mean(0), marker="o", label=NAMES[m])
        axes[1].set_xlabel("epoch")
        axes[1].set_ylabel("validation accuracy")
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "bep", "Binary MLP on Fashion-MNIST: test accuracy (mean ± std) and validation curves")
        return {f"{m}/test_accuracy": report.mean_std(v["test_accuracy"])[0] for m, v in res.items()}

    def _run(self, method: str, seed: int) -> dict[str, Any]:
        c = self.config
        sizes = [784, *c.hidden]
        x, y = self.train_set
        torch.manual_seed(seed)
        t0, ops, curve, best = time.perf_counter(), 0, [], (-1.0, 0.0)
        feedback = "random" if method == "local" else "transpose"
        net = BinaryMLP(sizes, 10, c.group, c.r, c.nu, c.p_r, c.h_init, seed, feedback)
        if method == "ste":
            model = STEBinaryMLP(sizes, net.P)
            opt = torch.optim.Adam(model.parameters(), c.lr)
            macs = sum(w.numel() for w in model.weights) + net.P.numel()
        fwd = sum(h.numel() for h in net.H) + net.P.numel()
        back = sum(h.numel() for h in net.H[1:]) + net.P.numel()
        for _ in range(c.epochs):
            for b in torch.randperm(len(y)).split(c.batch_size):
                if method == "ste":
                    loss = model.loss(x[b], y[b])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    model.clip()
                else:
                    out = net.step(x[b], y[b])
                    ops += len(b) * fwd + out["triggered"] * back + out["update_ops"]
            predict = (lambda a: model(a).argmax(1)) if method == "ste" else net.predict
            with torch.no_grad():
                val = (predict(self.val_set[0]) == self.val_set[1]).float().mean().item()
                curve.append(val)
                if val > best[0]:
                    best = (val, (predict(self.test_set[0]) == self.test_set[1]).float().mean().item())
        n = c.epochs * len(y)
        return {
            "test_accuracy": best[1],
            "val_accuracy": best[0],
            "bit_ops_per_sample": ops / n if method != "ste" else 0.0,
            "float_macs_per_sample": 3 * macs if method == "ste" else 0.0,
            "seconds": time.perf_counter() - t0,
            "curve": curve,
        }

    def evaluate(self) -> dict[str, Any]:
        return {}
