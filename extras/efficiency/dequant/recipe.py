"""extras.efficiency.dequant: ridge dequantisation vs the straight-through estimator at low precision (A1W1,
4-bit, 2:4 sparsity) on a Fashion-MNIST MLP and a tiny character GPT: divergence rate and accuracy."""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F

from agentkit.errors import AgentkitError
from agentkit.extras import report
from agentkit.extras.data import char_corpus, fashion_mnist
from agentkit.extras.efficiency.dequant.config import SETTING, DequantConfig
from agentkit.extras.efficiency.dequant.models import CharGPT, mlp
from agentkit.extras.efficiency.dequant.quant import QuantSpec
from agentkit.extras.nets import accuracy, fit, warmup_cosine
from agentkit.extras.sweep import sweep
from agentkit.plots import pyplot
from agentkit.recipe import Recipe


def parse_setting(s: str, dequant: str, block: int, lam: float) -> tuple[QuantSpec | None, QuantSpec | None]:
    """ "A1W1" → (activation spec, weight spec); "fp" → (None, None); ":2of4" adds n:m weight sparsity."""
    m = SETTING.match(s)
    if not m:
        raise AgentkitError(f"settings: {s!r} is not fp or A<bits>W<bits>[:<n>of<m>]", "e.g. A1W1 or A4W4:2of4")
    if s == "fp":
        return None, None
    a, w, n, mm = m.groups()
    nm = (int(n), int(mm)) if n else None
    return QuantSpec(int(a), dequant, block, lam), QuantSpec(int(w), dequant, block, lam, nm)


def diverged(losses: list[float]) -> bool:
    """Non-finite loss, or the last 10 % of losses no lower on average than the first 10 %."""
    k = max(1, len(losses) // 10)
    return not all(math.isfinite(v) for v in losses) or sum(losses[-k:]) >= sum(losses[:k])


class DequantRecipe(Recipe[DequantConfig]):
    name = "extras.efficiency.dequant"
    config_cls = DequantConfig
    description = "Ridge dequantisation vs STE at A1W1 / 4-bit / 2:4: divergence and accuracy (MLP, char GPT)"

    def setup(self) -> None:
        c = self.config
        bad = [d for d in c.dequants if d not in ("ridge", "ste")]
        if bad:
            raise AgentkitError(f"dequants: {bad} unknown", "use ridge and/or ste")
        for s in c.settings + c.gpt_settings:
            parse_setting(s, "ridge", c.block, c.lam)
        x, y = fashion_mnist("train", c.train_size, seed=0)
        xt, yt = fashion_mnist("test", c.test_size, seed=0)
        t = torch.from_numpy
        self.train_set = (t(x)[c.val_size :], t(y)[c.val_size :])  # the balanced subset is sorted, not grouped
        self.val = (t(x)[: c.val_size], t(y)[: c.val_size])
        self.test = (t(xt), t(yt))
        if c.gpt:
            text = char_corpus()
            self.vocab = sorted(set(text))
            index = {ch: i for i, ch in enumerate(self.vocab)}
            ids = torch.tensor([index[ch] for ch in text])
            cut = int(0.9 * len(ids))
            self.text_train, self.text_val = ids[:cut], ids[cut:]

    def _runs(self, settings: list[str]) -> list[tuple[str, str]]:
        return [(s, d) for s in settings for d in (["-"] if s == "fp" else self.config.dequants)]

    def train(self) -> dict[str, Any]:
        c = self.config
        out: dict[str, Any] = {}
        parts = [
            (
                "mlp",
                self._runs(c.settings),
                self._mlp,
                ["test_accuracy", "final_accuracy", "diverged", "seconds"],
                c.mlp_seeds,
            )
        ]
        if c.gpt:
            parts.append(("gpt", self._runs(c.gpt_settings), self._gpt, ["val_bpc", "diverged", "seconds"], c.seeds))
        for part, runs, fn, cols, seeds in parts:
            grid = sweep(self.ctx, runs, seeds, fn, name=part, desc=f"{part} runs", seeds_outer=False)
            res = grid.results(lambda s, d: s if s == "fp" else f"{s} {d}", columns=cols)
            title = {
                "mlp": f"MLP on Fashion-MNIST ({c.mlp_epochs} epochs; test accuracy at the best "
                f"validation epoch, and after the last)",
                "gpt": f"Character GPT ({c.gpt_layers}×{c.gpt_d}, {c.gpt_steps} steps; validation bits per character)",
            }[part]
            self.ctx.add_section(
                f"{title}, {seeds} seeds",
                report.table(res, cols)
                + "\n\n`diverged` is the share of seeds that diverged.\n\n"
                + report.paired(res, "fp", cols[:1]),
            )
            self._plot(part, grid)
            out |= report.means(res, [cols[0], "diverged"], f"{part}/")
        return out

    def _mlp(self, setting: str, dequant: str, seed: int) -> dict[str, Any]:
        c = self.config
        act, weight = parse_setting(setting, dequant, c.block, c.lam)
        torch.manual_seed(seed)
        model = mlp(784, c.hidden, 10, act, weight)
        opt = torch.optim.Adam(model.parameters(), lr=c.mlp_lr)
        t0 = time.perf_counter()
        out = fit(model, opt, self.train_set, self.val, self.test, c.mlp_epochs, c.batch_size)
        final = accuracy(model, *self.test)
        return {
            "test_accuracy": out["test_accuracy"],
            "final_accuracy": final,
            "val_accuracy": out["val_accuracy"],
            "diverged": float(diverged(out["losses"])),
            "seconds": time.perf_counter() - t0,
            "curve": report.thin(out["losses"]),
        }

    def _gpt(self, setting: str, dequant: str, seed: int) -> dict[str, Any]:
        c = self.config
        act, weight = parse_setting(setting, dequant, c.block, c.lam)
        torch.manual_seed(seed)
        model = CharGPT(len(self.vocab), c.gpt_d, c.gpt_layers, c.gpt_heads, c.gpt_ctx, act, weight)
        opt = torch.optim.AdamW(model.parameters(), lr=c.gpt_lr, weight_decay=0.01)
        sched = warmup_cosine(opt, c.gpt_steps)
        losses, t0 = [], time.perf_counter()
        for _ in range(c.gpt_steps):
            xb, yb = _windows(self.text_train, c.gpt_batch, c.gpt_ctx)
            loss = F.cross_entropy(model(xb).flatten(0, 1), yb.flatten())
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
        g = torch.Generator().manual_seed(99)  # the same validation windows for every run
        xv, yv = _windows(self.text_val, c.gpt_eval_windows, c.gpt_ctx, g)
        with torch.no_grad():
            val = F.cross_entropy(model(xv).flatten(0, 1), yv.flatten()).item() / math.log(2)
        return {
            "val_bpc": val if math.isfinite(val) else float("nan"),
            "diverged": float(diverged(losses)),
            "seconds": time.perf_counter() - t0,
            "curve": report.thin(losses),
        }

    def _plot(self, part: str, grid) -> None:
        plt = pyplot()

        runs = grid.settings
        settings = list(dict.fromkeys(s for s, _ in runs))
        fig, axes = plt.subplots(1, len(settings), figsize=(3.4 * len(settings), 3.2), sharey=True, squeeze=False)
        for ax, s in zip(axes[0], settings):
            for d in dict.fromkeys(dd for ss, dd in runs if ss == s):
                for k, r in enumerate(grid.raw[(s, d)]):
                    curve = r["curve"]
                    ax.plot(
                        curve,
                        color={"ste": "C3", "ridge": "C0"}.get(d, "k"),
                        alpha=0.6,
                        label=(d if s != "fp" else "fp") if k == 0 else None,
                    )
            ax.set_title(s)
            ax.set_xlabel("training step (thinned)")
            ax.legend()
        axes[0][0].set_ylabel("training loss")
        fig.tight_layout()
        self.ctx.save_plot(fig, f"{part}_loss", f"{part.upper()} training loss per setting; each line one seed")

    def evaluate(self) -> dict[str, Any]:
        return {}


def _windows(ids: torch.Tensor, n: int, ctx: int, gen: torch.Generator | None = None):
    start = torch.randint(0, len(ids) - ctx - 1, (n,), generator=gen)
    w = torch.stack([ids[s : s + ctx + 1] for s in start.tolist()])
    return w[:, :-1], w[:, 1:]
