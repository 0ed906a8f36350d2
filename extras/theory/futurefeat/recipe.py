"""extras.theory.futurefeat: "seemingly useless" features from future-token gradients. The paper's GPT-2 toy
runs on Majority and Conditioned-Majority in four variants (standard, myopic, untied, both); each step's gradient at
one input position's residual is split into shared, direct and pre-cached parts, each pushed through Adam, and each
part's influence on the probed feature summed over training; then what myopic training costs a language model."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from agentkit.extras import data, report
from agentkit.extras.sweep import product, sweep
from agentkit.extras.theory.futurefeat.config import FutureFeatConfig
from agentkit.extras.theory.futurefeat.gradients import (
    PARTS,
    AdamParts,
    flat_grad,
    probe_risk,
    set_grads,
    split_gradient,
)
from agentkit.extras.theory.futurefeat.model import LM
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

FEATURE = {"majority": "is_majority_k", "conditioned": "prev_is_k"}
INFLUENCE = [f"influence_{p}" for p in PARTS]
COLUMNS = ["output_acc", "probe_acc", "probe_acc_init", "probe_acc_inputs", *INFLUENCE, "risk_start"]


class FutureFeatRecipe(Recipe[FutureFeatConfig]):
    name = "extras.theory.futurefeat"
    config_cls = FutureFeatConfig
    description = "Shared / direct / pre-cached gradient parts and their influence on probed features; myopic cost"

    def train(self) -> dict[str, Any]:
        c = self.config
        settings = product(c.tasks, c.variants) + [("lm", v) for v in c.lm_variants]
        grid = sweep(self.ctx, settings, c.seeds, self._run, desc="tasks × variants × seeds")
        out: dict[str, Any] = {}
        parts = grid.split()
        for task in c.tasks:
            res = parts[task].results()
            self.ctx.add_section(
                f"{task}: feature {FEATURE[task]} at layer {c.track_layer}, position {c.track_position} "
                f"({c.seeds} seeds, {c.steps} steps)",
                f"output_acc: share of output positions whose argmax token is a running-majority one (held-out "
                f"sequences); probe_acc: a ridge probe's accuracy (thresholded at 0.5, mean over the {c.vocab} "
                f"features) on the final model's residual at layer {c.track_layer}, position {c.track_position}, "
                f"probe_acc_init the same probe fitted on the untrained model, and probe_acc_inputs the final one averaged "
                f"over input positions 2–{c.inputs - 1}; influence_<part>: "
                "the decrease of the feature's distance to its final value, R = ½‖w r − w r_final‖², that each "
                f"gradient part's Adam steps cause, summed over training (∇R taken every {c.track_every} steps); "
                "risk_start: R at initialisation (the parts sum to about it when the first-order sum is accurate)."
                "\n\n"
                + report.table(res, COLUMNS)
                + "\n\n"
                + report.paired(res, "standard", ["output_acc", "probe_acc", "probe_acc_inputs", *INFLUENCE]),
            )
            out |= report.means(res, COLUMNS, f"{task}/")
        if c.lm_variants:
            res = parts["lm"].results()
            self.ctx.add_section(
                f"Character language model (pydoc text, {c.lm_steps} steps, {c.seeds} seeds)",
                "val_loss: next-character cross-entropy (nats) on the held-out last tenth of the text. The paper's "
                "claim is that myopic training costs loss (TinyStories 3.29 vs 2.53).\n\n"
                + report.table(res, ["val_loss"])
                + "\n\n"
                + report.paired(res, "standard", ["val_loss"]),
            )
            out |= report.means(res, ["val_loss"], "lm/")
        self._plot(parts)
        return out

    # ---- one job ----------------------------------------------------------------------------------------------

    def _lm(self, variant: str, vocab: int, length: int, split: int | None) -> LM:
        c = self.config
        return LM(vocab, length, c.d, c.layers, c.heads, myopic="myopic" in variant, split=split)

    def _run(self, task: str, variant: str, seed: int) -> dict[str, Any]:
        if task == "lm":
            return self._run_lm(variant, seed)
        c = self.config
        cond = task == "conditioned"
        tokens, _, _ = data.majority(c.train_size, c.vocab, c.inputs, c.outputs, cond, seed)
        ev_tokens, ev_feat, ev_legal = data.majority(c.eval_size, c.vocab, c.inputs, c.outputs, cond, 10_000 + seed)
        train, ev = torch.tensor(tokens), torch.tensor(ev_tokens)
        torch.manual_seed(seed)
        lm = self._lm(variant, c.vocab + 1, train.shape[1], c.inputs if "untied" in variant else None)
        params = list(lm.parameters())
        opt = torch.optim.Adam(params, lr=c.lr)
        tracker = AdamParts(opt)
        stretches: list[tuple[torch.Tensor, dict[str, torch.Tensor]]] = []
        init = self._probes(lm, ev, ev_feat)[0]
        gen = torch.Generator().manual_seed(seed)
        for step in self.ctx.progress(range(c.steps), f"{task} {variant} (seed {seed})"):
            batch = train[torch.randint(0, len(train), (c.batch_size,), generator=gen)]
            parts = split_gradient(lm, batch, c.track_layer, c.track_position)
            if step % c.track_every == 0:
                stretches.append((parameters_to_vector(params).detach().clone(), {p: 0.0 for p in PARTS}))
            for name, delta in tracker.deltas(parts, parts["full"]).items():
                stretches[-1][1][name] = stretches[-1][1][name] + delta
            set_grads(params, parts["full"])
            opt.step()
        acc, w = self._probes(lm, ev, ev_feat)
        with torch.no_grad():
            pred = lm(ev)[0][:, :-1].argmax(-1).numpy()
        ok = np.take_along_axis(ev_legal, pred[..., None], -1)[..., 0]
        out = {
            "output_acc": float(ok[:, c.inputs :].mean()),
            "probe_acc": acc[c.track_position - 1],
            "probe_acc_init": init[c.track_position - 1],
            "probe_acc_inputs": float(np.mean(acc[1 : c.inputs - 1])),
            "probe_acc_by_position": [round(a, 4) for a in acc],
            "probe_acc_init_by_position": [round(a, 4) for a in init],
        }
        return out | self._influence(lm, params, stretches, ev, w)

    def _probes(self, lm: LM, ev: torch.Tensor, feat: np.ndarray) -> tuple[list[float], torch.Tensor]:
        """Ridge probes of the feature at every position 1… of layer ``track_layer`` (fitted on 70 % of the held-out
        sequences): their accuracy on the rest (thresholded at 0.5, mean over features), and the tracked
        position's weights ``[features, d]``."""
        from sklearn.linear_model import Ridge

        c = self.config
        with torch.no_grad():
            hidden = lm(ev)[1][c.track_layer]
        cut = int(0.7 * len(ev))
        acc, w = [], None
        for pos in range(1, ev.shape[1]):
            x = hidden[:, pos].numpy()
            ridge = Ridge(alpha=c.probe_alpha).fit(x[:cut], feat[:cut, pos])
            acc.append(float(((ridge.predict(x[cut:]) > 0.5) == (feat[cut:, pos] > 0.5)).mean()))
            if pos == c.track_position:
                w = torch.tensor(ridge.coef_, dtype=torch.float32)
        return acc, w

    def _influence(self, lm: LM, params, stretches, ev: torch.Tensor, w: torch.Tensor) -> dict[str, Any]:
        """Each part's influence per stretch: −⟨Σ Δθ_part, ∇R(θ_start)⟩ against the final model's feature."""
        c = self.config
        probe_batch = ev[: min(512, len(ev))]
        with torch.no_grad(), lm.attention("eager"):
            target = lm(probe_batch)[1][c.track_layer, :, c.track_position] @ w.T
        curves: dict[str, list[float]] = {p: [] for p in PARTS}
        risks = []
        final = parameters_to_vector(params).detach().clone()
        for theta, sums in stretches:
            vector_to_parameters(theta, params)
            risk = probe_risk(lm, probe_batch, c.track_layer, c.track_position, w, target)
            grad = flat_grad(risk, params, retain=False)
            risks.append(float(risk.detach()))
            for p in PARTS:
                curves[p].append(-float(torch.dot(sums[p], grad)))
        vector_to_parameters(final, params)
        out: dict[str, Any] = {f"influence_{p}": float(np.sum(curves[p])) for p in PARTS}
        out["risk_start"] = risks[0]
        out["influence_curves"] = {p: [round(v, 6) for v in np.cumsum(curves[p])] for p in PARTS}
        return out

    def _run_lm(self, variant: str, seed: int) -> dict[str, Any]:
        c = self.config
        text = data.char_corpus()
        chars = sorted(set(text))
        index = {ch: i for i, ch in enumerate(chars)}
        ids = torch.tensor([index[ch] for ch in text])
        cut = int(0.9 * len(ids))
        train, val = ids[:cut], ids[cut:]
        torch.manual_seed(seed)
        lm = self._lm(variant, len(chars), c.lm_context, None)
        opt = torch.optim.Adam(lm.parameters(), lr=c.lr)
        gen = torch.Generator().manual_seed(seed)

        def windows(src: torch.Tensor, n: int, g: torch.Generator) -> torch.Tensor:
            start = torch.randint(0, len(src) - c.lm_context, (n,), generator=g)
            return src[start[:, None] + torch.arange(c.lm_context)]

        for _ in self.ctx.progress(range(c.lm_steps), f"lm {variant} (seed {seed})"):
            loss = lm.loss(windows(train, c.batch_size, gen)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            batch = windows(val, 512, torch.Generator().manual_seed(0))
            return {"val_loss": float(torch.stack([lm.loss(b) for b in batch.split(64)]).mean())}

    # ---- plots --------------------------------------------------------------------------------------------------

    def _plot(self, parts) -> None:
        c = self.config
        plt = pyplot()
        fig, axes = plt.subplots(
            len(c.tasks), len(c.variants), figsize=(3.4 * len(c.variants), 3.0 * len(c.tasks)), squeeze=False
        )
        for row, task in zip(axes, c.tasks):
            for ax, variant in zip(row, c.variants):
                runs = parts[task].raw[(variant,)]
                n = len(runs[0]["influence_curves"]["shared"])
                xs = [c.track_every * (i + 1) for i in range(n)]
                for p, style in zip(PARTS, ("-", "--", ":")):
                    report.curve(ax, xs, [[r["influence_curves"][p][i] for r in runs] for i in range(n)], p, ls=style)
                ax.axhline(0, color="0.6", lw=0.8)
                ax.set_title(f"{task}: {variant}", fontsize=9)
                ax.set_xlabel("step")
            row[0].set_ylabel("cumulative influence")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(
            fig,
            "influence",
            f"Cumulative influence of each gradient part on the probed feature (layer {c.track_layer}, position "
            f"{c.track_position}) over training, per variant: mean ± std over seeds",
        )
        fig, axes = plt.subplots(1, len(c.tasks), figsize=(5.5 * len(c.tasks), 3.6), squeeze=False)
        for ax, task in zip(axes[0], c.tasks):
            for variant in c.variants:
                runs = parts[task].raw[(variant,)]
                n = len(runs[0]["probe_acc_by_position"])
                report.curve(
                    ax,
                    list(range(1, n + 1)),
                    [[r["probe_acc_by_position"][i] for r in runs] for i in range(n)],
                    variant,
                )
            ax.axvline(c.inputs + 0.5, color="0.6", lw=0.8)
            ax.set_title(f"{task}: probe accuracy of {FEATURE[task]} (layer {c.track_layer})", fontsize=9)
            ax.set_xlabel("position (inputs | outputs)")
        axes[0][0].set_ylabel("probe accuracy")
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "probes", "Ridge-probe accuracy of the feature at each position, per variant")

    def evaluate(self) -> dict[str, Any]:
        return {}
