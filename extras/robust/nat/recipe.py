"""extras.robust.nat: natural training vs PGD adversarial training vs NAT (PGD-AT with the nasty-teacher
regulariser) on Fashion-MNIST: clean accuracy, PGD accuracy (CE and margin attacks) and non-true entropy."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from agentkit.extras import report
from agentkit.extras.data import fashion_mnist
from agentkit.extras.nets import SmallCNN, accuracy, predict
from agentkit.extras.robust.nat.attack import nat_loss, non_true_entropy, pgd
from agentkit.extras.robust.nat.config import NATConfig
from agentkit.extras.sweep import sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

METHODS = ("natural", "PGD-AT", "NAT")


class NATRecipe(Recipe[NATConfig]):
    name = "extras.robust.nat"
    config_cls = NATConfig
    description = "NAT vs PGD adversarial training: clean and PGD-20 accuracy of a small CNN on Fashion-MNIST"

    def setup(self) -> None:
        c = self.config
        x, y = fashion_mnist("train", c.train_size, seed=0)
        xt, yt = fashion_mnist("test", c.test_size, seed=0)
        x, xt = torch.from_numpy(x)[:, None], torch.from_numpy(xt)[:, None]
        y, yt = torch.from_numpy(y), torch.from_numpy(yt)
        perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
        self.val, self.train_set = (
            (x[perm[: c.val_size]], y[perm[: c.val_size]]),
            (x[perm[c.val_size :]], y[perm[c.val_size :]]),
        )
        self.test = (xt, yt)
        self.natural: dict[int, SmallCNN] = {}

    def train(self) -> dict[str, Any]:
        c = self.config
        res = sweep(
            self.ctx, [(m,) for m in METHODS], c.seeds, self._train_one
        ).results()  # natural first: NAT's teacher
        cols = [
            "clean",
            f"PGD-{c.test_steps} CE",
            f"PGD-{c.test_steps} margin",
            "robust (worst of both)",
            "non-true entropy",
            "seconds",
        ]
        self.ctx.add_section(
            f"Test accuracy under ε = {c.eps:g} ({c.seeds} seeds, epoch picked by validation PGD accuracy)",
            report.table(res, cols) + f"\n\nNon-true entropy: nats over the 9 wrong classes (uniform = "
            f"{torch.log(torch.tensor(9.0)).item():.3f}); lower is sparser.\n\n"
            + report.paired(res, "PGD-AT", ["clean", cols[3], "non-true entropy"]),
        )
        self._plot(res)
        return report.means(res, ["clean", cols[3]])

    def _natural_model(self, seed: int) -> SmallCNN:
        if seed not in self.natural:  # after --resume the natural run is redone (deterministic, seconds)
            self._train_one("natural", seed)
        return self.natural[seed]

    def _train_one(self, method: str, seed: int) -> dict[str, float]:
        c = self.config
        x, y = self.train_set
        teacher = self._natural_model(seed) if method == "NAT" else None
        torch.manual_seed(seed)
        model = SmallCNN()
        epochs = c.natural_epochs if method == "natural" else c.epochs
        opt = torch.optim.SGD(model.parameters(), lr=c.lr, momentum=0.9, weight_decay=c.weight_decay)
        steps = epochs * -(-len(y) // c.batch_size)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, c.lr, total_steps=steps, pct_start=0.15)
        best, t0 = (-1.0, None), time.perf_counter()
        for _ in range(epochs):
            for b in torch.randperm(len(y)).split(c.batch_size):
                xb, yb = x[b], y[b]
                if method != "natural":
                    xb = pgd(model, xb, yb, c.eps, c.alpha, c.steps)
                out = model(xb)
                if method == "NAT":
                    with torch.no_grad():
                        nat = teacher(xb)
                    loss = nat_loss(out, nat, yb, c.lam, c.tau)
                else:
                    loss = F.cross_entropy(out, yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
            xv, yv = self.val
            score = (
                accuracy(model, xv, yv)
                if method == "natural"
                else accuracy(model, pgd(model, xv, yv, c.eps, c.alpha, c.steps), yv)
            )
            if score > best[0]:
                best = (score, {k: v.clone() for k, v in model.state_dict().items()})
        model.load_state_dict(best[1])
        model.eval()
        if method == "natural":
            self.natural[seed] = model
        return {**self._test(model), "val": best[0], "seconds": time.perf_counter() - t0}

    def _test(self, model: SmallCNN) -> dict[str, float]:
        c = self.config
        xt, yt = self.test
        torch.manual_seed(1234)

        def robust(loss: str) -> torch.Tensor:  # per test image: still right under PGD on this loss
            return torch.cat(
                [
                    predict(model, pgd(model, xb, yb, c.eps, c.test_alpha, c.test_steps, loss)) == yb
                    for xb, yb in zip(xt.split(500), yt.split(500))
                ]
            )

        right_ce, right_m = robust("ce"), robust("margin")
        with torch.no_grad():
            logits = model(xt)
        return {
            "clean": (logits.argmax(1) == yt).float().mean().item(),
            f"PGD-{c.test_steps} CE": right_ce.float().mean().item(),
            f"PGD-{c.test_steps} margin": right_m.float().mean().item(),
            "robust (worst of both)": (right_ce & right_m).float().mean().item(),
            "non-true entropy": non_true_entropy(logits, yt).mean().item(),
        }

    def _plot(self, res: report.Results) -> None:
        plt = pyplot()

        fig, axes = plt.subplots(1, 3, figsize=(10, 3.4))
        for ax, k in zip(axes, ("clean", "robust (worst of both)", "non-true entropy")):
            report.bars(ax, res, k, k)
        fig.tight_layout()
        self.ctx.save_plot(fig, "nat", "Clean accuracy, PGD accuracy and non-true entropy (mean ± std, dots: seeds)")

    def evaluate(self) -> dict[str, Any]:
        return {}
