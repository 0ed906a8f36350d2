"""extras.spiking.diffpc: predictive coding with ternary change spikes (DiffPC) against float PC and backprop,
MLPs on Fashion-MNIST and digits: test accuracy and the bits each neuron communicates."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.spiking.diffpc.config import DiffPCConfig
from agentkit.extras.spiking.diffpc.model import Code, PCNet, bits
from agentkit.extras.sweep import product, sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

NAMES = {"diffpc": "DiffPC (ternary spikes)", "pc": "PC (float messages)", "bp": "BP (cross-entropy)"}
COLUMNS = [
    "test_accuracy",
    "val_accuracy",
    "train_bits_per_neuron",
    "train_bits_per_neuron_step",
    "test_bits_per_neuron",
    "seconds",
]
FLOAT_BITS = 32


class DiffPCRecipe(Recipe[DiffPCConfig]):
    name = "extras.spiking.diffpc"
    config_cls = DiffPCConfig
    description = "DiffPC vs float PC and BP on Fashion-MNIST and digits: accuracy and bits per neuron"

    def setup(self) -> None:
        c = self.config
        self.sets = {}
        if "fmnist" in c.datasets:
            splits = data.fashion_mnist_splits(c.train_size, c.val_size, c.test_size)
            self.sets["fmnist"] = {k: (x.flatten(1), y) for k, (x, y) in splits.items()}
        if "digits" in c.datasets:
            x, y = data.sklearn_set("digits")
            tr, va, te = data.split(y, val=0.15, test=0.25, seed=0)
            x = x / 16.0
            self.sets["digits"] = self._tensors((x[tr], y[tr]), (x[va], y[va]), (x[te], y[te]))

    @staticmethod
    def _tensors(*parts) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return {
            k: (torch.as_tensor(x, dtype=torch.float32).flatten(1), torch.as_tensor(y))
            for k, (x, y) in zip(("train", "val", "test"), parts)
        }

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, product(c.datasets, c.methods), c.seeds, self._run)
        out: dict[str, Any] = {}
        plt = pyplot()
        fig, axes = plt.subplots(1, 2 * len(c.datasets), figsize=(6.5 * len(c.datasets), 3.6))
        for i, d in enumerate(c.datasets):
            res = grid.split()[d].results(lambda m: NAMES[m], columns=COLUMNS)
            sizes = "-".join(map(str, [self.sets[d]["train"][0].size(1), *c.hidden, 10]))
            ratio = ""
            if "diffpc" in c.methods and "pc" in c.methods:
                pcb = report.mean_std(res[NAMES["pc"]]["train_bits_per_neuron"])[0]
                dfb = report.mean_std(res[NAMES["diffpc"]]["train_bits_per_neuron"])[0]
                ratio = f" Float PC moves {pcb / max(dfb, 1e-9):.0f}× the bits DiffPC moves while training."
            self.ctx.add_section(
                f"{d}: {sizes} MLP ({c.seeds} seeds; epoch picked on validation)",
                "bits_per_neuron: bits sent per neuron per sample, averaged over all neurons (input, hidden, "
                "output). DiffPC: non-zero ternary spikes × log₂3 (a silent step costs nothing); PC and BP: 32 bits "
                "per value a neuron sends (PC: the sweep, then per relaxation step φ(x) of the free layers and ε of "
                "the layers above them; BP: the forward activations and, in training, the backward gradients); per_step divides "
                "by the time steps of a training sample (DiffPC: n·cycles per layer for the sweep, then the relaxation "
                "steps; PC: 1 per layer, then the steps; BP: a forward and a backward pass)."
                + ratio
                + "\n\n"
                + report.table(res, COLUMNS)
                + "\n\n"
                + report.paired(res, NAMES["pc"], ["test_accuracy"]),
            )
            report.bars(axes[2 * i], res, "test_accuracy", f"{d}: test accuracy")
            report.bars(axes[2 * i + 1], res, "train_bits_per_neuron", f"{d}: bits / neuron / sample (training)")
            axes[2 * i + 1].set_yscale("log")
            out |= report.means(res, ["test_accuracy"], f"{d}/")
        fig.tight_layout()
        self.ctx.save_plot(fig, "diffpc", "Test accuracy and bits per neuron per training sample (log scale)")
        return out

    def _code(self, method: str) -> Code:
        c = self.config
        return Code(spiking=method == "diffpc", m=c.m, n=c.n, cycles=c.cycles)

    def _run(self, dataset: str, method: str, seed: int) -> dict[str, Any]:
        c = self.config
        sets = self.sets[dataset]
        (x, y), epochs = sets["train"], c.epochs if dataset == "fmnist" else c.digits_epochs
        sizes = [x.size(1), *c.hidden, 10]
        neurons, senders = sum(sizes), sum(sizes[:-1])
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        net = PCNet(sizes)
        opt = torch.optim.AdamW(net.parameters(), c.lr, weight_decay=c.weight_decay)
        code = self._code(method)
        t0, spikes, seen, best = time.perf_counter(), 0, 0, (-1.0, 0.0, 0.0)
        for _ in range(epochs):
            for b in torch.randperm(len(y), generator=gen).split(c.batch_size):
                opt.zero_grad()
                if method == "bp":
                    F.cross_entropy(net(x[b]), y[b]).backward()
                else:
                    spikes += net.relax(x[b], F.one_hot(y[b], 10).float(), c.steps, c.gamma, code)[2]
                opt.step()
                seen += len(b)
            val, _ = self._accuracy(net, sets["val"], method)
            if val > best[0]:
                best = (val, *self._accuracy(net, sets["test"], method))
        per_step = sum(sizes[1:-1]) + sum(sizes[2:])  # PC: free layers' φ(x) forward, ε_2 … ε_L backward
        if method == "diffpc":
            train_bits = bits(spikes, neurons, seen)
        elif method == "pc":
            train_bits = FLOAT_BITS * (senders + c.steps * per_step) / neurons
        else:
            train_bits = FLOAT_BITS * (senders + sum(sizes[1:])) / neurons  # activations and gradients
        layers = len(sizes) - 1
        steps = {"diffpc": layers * c.n * c.cycles + c.steps, "pc": layers + c.steps, "bp": 2}[method]
        return {
            "test_accuracy": best[1],
            "val_accuracy": best[0],
            "train_bits_per_neuron": train_bits,
            "train_bits_per_neuron_step": train_bits / steps,
            "test_bits_per_neuron": best[2] if method == "diffpc" else FLOAT_BITS * senders / neurons,
            "seconds": time.perf_counter() - t0,
        }

    def _accuracy(self, net: PCNet, split, method: str) -> tuple[float, float]:
        """(accuracy, DiffPC's bits per neuron per sample for the spiking sweep) on a split."""
        x, y = split
        with torch.no_grad():
            if method != "diffpc":
                return (net(x).argmax(1) == y).float().mean().item(), 0.0
            scores, sent = net.predict(x, self._code(method))
        return (scores.argmax(1) == y).float().mean().item(), bits(
            sent, sum([x.size(1), *self.config.hidden, 10]), len(y)
        )

    def evaluate(self) -> dict[str, Any]:
        return {}
