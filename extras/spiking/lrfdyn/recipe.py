"""extras.spiking.lrfdyn: a tiny spiking transformer on Fashion-MNIST with SSA, LRF-SSA and LRF-Dyn attention:
accuracy and the bytes the token mixing holds at inference."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from agentkit.extras import data, report
from agentkit.extras.spiking.lrfdyn.config import LRFDynConfig
from agentkit.extras.spiking.lrfdyn.model import SpikingTransformer
from agentkit.extras.sweep import sweep
from agentkit.recipe import Recipe

NAMES = {"ssa": "SSA (Spikformer)", "lrf": "LRF-SSA", "dyn": "LRF-Dyn"}
COLUMNS = ["test_accuracy", "val_accuracy", "state_kib", "recurrent_agreement", "seconds"]  # seconds: training


class LRFDynRecipe(Recipe[LRFDynConfig]):
    name = "extras.spiking.lrfdyn"
    config_cls = LRFDynConfig
    description = "SSA vs LRF-SSA vs LRF-Dyn spiking attention on Fashion-MNIST: accuracy and inference state memory"

    def setup(self) -> None:
        c = self.config
        data.require("snntorch", "spiking", "the extras.spiking.lrfdyn recipe's LIF neurons come from snntorch")
        splits = data.fashion_mnist_splits(c.train_size, c.val_size, c.test_size)
        self.sets = {k: (x.unsqueeze(1), y) for k, (x, y) in splits.items()}

    def train(self) -> dict[str, Any]:
        c = self.config
        res = sweep(self.ctx, [(m,) for m in c.methods], c.seeds, self._run).results(
            lambda m: NAMES[m], columns=COLUMNS
        )
        grid = 28 // c.patch
        self.ctx.add_section(
            f"Fashion-MNIST, spiking transformer: {grid}×{grid} tokens, d = {c.d}, {c.heads} heads, {c.blocks} blocks, "
            f"T = {c.steps} ({c.seeds} seeds; epoch picked on validation)",
            "state_kib: what the token mixing holds at inference per image and time step, summed over blocks (spikes "
            "1 byte, reals 4): SSA and LRF-SSA as Spikformer runs them hold K and V of every token and the h×N×N "
            "attention map (LRF-SSA also its conv outputs); LRF-Dyn holds its h×k×k state and the V spikes its "
            "dilated convs still need in raster order. recurrent_agreement: the share of the first "
            f"{c.recurrent_check} test images that LRF-Dyn classifies the same token by token as in its FFT "
            "training form.\n\n" + report.table(res, COLUMNS) + "\n\n" + report.paired(res, NAMES["ssa"], COLUMNS[:3]),
        )
        report.figure(
            self.ctx, res, ["test_accuracy", "state_kib"], "lrfdyn",
            "Test accuracy and inference state memory (mean ± std over seeds)",
            ["test accuracy", "attention state at inference (KiB)"],
        )  # fmt: skip
        return report.means(res, ["test_accuracy"])

    def _run(self, method: str, seed: int) -> dict[str, Any]:
        c = self.config
        (x, y), gen = self.sets["train"], torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        net = SpikingTransformer(method, c.d, c.heads, c.blocks, c.steps, c.patch, list(c.dilations))
        opt = torch.optim.AdamW(net.parameters(), c.lr)
        t0, best, state = time.perf_counter(), (-1.0, 0.0), None
        for _ in range(c.epochs):
            net.train()
            for b in torch.randperm(len(y), generator=gen).split(c.batch_size):
                opt.zero_grad()
                F.cross_entropy(net(x[b]), y[b]).backward()
                opt.step()
            val = self._accuracy(net, "val")
            if val > best[0]:
                best, state = (val, 0.0), {k: v.clone() for k, v in net.state_dict().items()}
        seconds = time.perf_counter() - t0
        net.load_state_dict(state)  # the epoch validation picked
        best = (best[0], self._accuracy(net, "test"))
        agreement = 1.0
        if method == "dyn" and c.recurrent_check:
            xt = self.sets["test"][0][: c.recurrent_check]
            with torch.no_grad():
                agreement = (net(xt).argmax(1) == net(xt, recurrent=True).argmax(1)).float().mean().item()
        return {
            "test_accuracy": best[1],
            "val_accuracy": best[0],
            "state_kib": net.state_bytes() / 1024,
            "recurrent_agreement": agreement,
            "seconds": seconds,
        }

    def _accuracy(self, net: SpikingTransformer, split: str) -> float:
        x, y = self.sets[split]
        net.eval()
        with torch.no_grad():
            pred = torch.cat([net(b).argmax(1) for b in x.split(500)])
        return (pred == y).float().mean().item()

    def evaluate(self) -> dict[str, Any]:
        return {}
