"""extras.vision.crd: concept–rule decomposition on RAVEN-style matrices. A noisy programmatic proposer names
concepts and reads their values; GP rule functions (deep kernels, one per rule family) score each concept;
Metropolis–Hastings picks K concepts, steered by the proposer's logits; the answer is the candidate the chosen rules
find most likely. Against proposer-only top-K, random K, all concepts and the proposer answering alone, as the
proposer's reading noise ρ grows."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentkit.extras import data, report
from agentkit.extras.sweep import stage, sweep
from agentkit.extras.vision.crd.config import CRDConfig
from agentkit.extras.vision.crd.model import FAMILIES, RuleSpace, family, mh_select, scale, set_f1
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

LABELS = {
    "crd": "CRD (MH)",
    "topk": "proposer top-K",
    "random": "random K",
    "all": "all concepts",
    "proposer": "proposer answers",
    "oracle": "true rule concepts",
}
CHOOSES_K = ("crd", "topk", "random")


class CRDRecipe(Recipe[CRDConfig]):
    name = "extras.vision.crd"
    config_cls = CRDConfig
    description = "CRD: GP rule scores + MH concept selection vs proposer top-K, random, all concepts; RAVEN-style"

    def setup(self) -> None:
        data.require("gpytorch", "vision", "the extras.vision.crd recipe needs GPyTorch")

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, [(r,) for r in c.rhos], c.seeds, self._run, desc="ρ × seeds (every method)")
        acc: report.Results = {}
        f1: report.Results = {}
        for (rho,), runs in zip(grid.settings, (grid.raw[s] for s in grid.settings)):
            for r in runs:
                for m in c.methods:
                    report.add(acc, LABELS[m], {f"ρ={rho:g}": r[m]["accuracy"]})
                    if "rule_f1" in r[m]:
                        report.add(f1, LABELS[m], {f"ρ={rho:g}": r[m]["rule_f1"]})
        cols = [f"ρ={r:g}" for r in c.rhos]
        base = LABELS["topk"] if "topk" in c.methods else next(iter(acc))
        ks = {
            LABELS[m]: [f"ρ={rho:g}: " + "/".join(str(r[m]["k"]) for r in grid.raw[(rho,)]) for rho in c.rhos]
            for m in c.methods
            if m in CHOOSES_K
        }
        self.ctx.add_section(
            f"answer accuracy: {c.test_puzzles} test puzzles, {c.seeds} seeds",
            f"Each puzzle: 8 candidates (chance 0.125), I-RAVEN-balanced. The proposer names the 5 attributes and "
            f"{c.spurious} spurious concepts, reads every value wrong with probability ρ, and gives calibrated logits "
            f"(sharpness {c.sharpness}). K is chosen on {c.val_puzzles} validation puzzles per method, ρ and seed "
            "(chosen K per seed: "
            + "; ".join(f"{m} {', '.join(v)}" for m, v in ks.items())
            + ").\n\n"
            + report.table(acc, cols)
            + "\n\n"
            + report.paired(acc, base, cols),
        )
        self.ctx.add_section(
            "rule F1: the chosen concepts against the rule-governed ones",
            "The proposer answering alone chooses no concepts.\n\n"
            + report.table(f1, cols)
            + "\n\n"
            + report.paired(f1, base, cols),
        )
        self._plot(grid, acc, f1, cols)
        out = report.means(acc, cols, "accuracy/")
        out |= report.means(f1, cols, "rule_f1/")
        return out

    # ---- the rule functions (the frozen stage) ----------------------------------------------------------------
    def _space(self, seed: int) -> RuleSpace:
        c = self.config

        def build() -> dict[str, Any]:
            torch.manual_seed(seed)
            levels = np.array(list(data.RAVEN_LEVELS.values()))
            by_family: dict[str, list[torch.Tensor]] = {}
            for p in data.raven(c.train_puzzles, seed=1000 * seed + 1):
                y = scale(p.grid.reshape(9, -1).T, levels)
                for j, attr in enumerate(data.RAVEN_LEVELS):
                    if p.rules[attr] is not None:
                        by_family.setdefault(family(*p.rules[attr]), []).append(y[j])
            space = RuleSpace(list(FAMILIES), c.gp_hidden, c.gp_features)
            losses = space.fit({f: torch.stack(v) for f, v in by_family.items()}, c.gp_steps, c.gp_lr)
            return {"state": space.state_dict(), "losses": losses}

        space = RuleSpace(list(FAMILIES), c.gp_hidden, c.gp_features)
        space.load_state_dict(stage(self.ctx, f"seed{seed}-rule-gps", build)["state"])
        return space.eval()

    # ---- one (ρ, seed) --------------------------------------------------------------------------------------
    def _run(self, rho: float, seed: int) -> dict[str, Any]:
        c = self.config
        space = self._space(seed)
        val = self._evaluate(space, data.raven(c.val_puzzles, seed=1000 * seed + 2), rho, 10_000 * seed + 1)
        test = self._evaluate(space, data.raven(c.test_puzzles, seed=1000 * seed + 3), rho, 10_000 * seed + 2)
        out: dict[str, Any] = {}
        for m in c.methods:
            if m in CHOOSES_K:
                k = max(c.ks, key=lambda k: (np.mean(val[m][k]["correct"]), -k))
                r = test[m][k]
                out[m] = {"accuracy": float(np.mean(r["correct"])), "k": k}
                out[m] |= {"rule_f1": float(np.mean(r["f1"]))} if r["f1"] else {}
            else:
                r = test[m][0]
                out[m] = {"accuracy": float(np.mean(r["correct"]))} | (
                    {"rule_f1": float(np.mean(r["f1"]))} if r["f1"] else {}
                )
        if seed == 0 and "example" in test:
            out["example"] = test["example"] | {"k": out["crd"]["k"] if "crd" in out else None}
        return out

    def _evaluate(self, space: RuleSpace, puzzles: list, rho: float, base_seed: int) -> dict[str, Any]:
        """Every method on ``puzzles``: per method and K, whether each puzzle was answered right and the F1 of the
        concepts chosen; plus the first puzzle's concepts, scores and choices (the report's example)."""
        c = self.config
        rng = np.random.default_rng(base_seed)
        res: dict[str, Any] = {m: {} for m in c.methods}
        named = self._engine_proposer(puzzles) if c.proposer_model else None
        for i, p in enumerate(puzzles):
            q = named[i] if named else data.raven_proposer(p, rho, c.spurious, c.sharpness, seed=base_seed + i)
            if q is None:  # the model's reply listed no concept: every method misses this puzzle
                for m in c.methods:
                    for k in c.ks if m in CHOOSES_K else [0]:
                        res[m].setdefault(k, {"correct": [], "f1": []})["correct"].append(0)
                continue
            y = scale(q.values, q.levels)
            theta, pred = (t.numpy() for t in space.score(y[:, :8], y[:, 8:]))
            sets: dict[tuple[str, int], frozenset[int]] = {}
            for k in c.ks:
                if "crd" in c.methods:
                    sets["crd", k] = mh_select(theta, q.logits, k, c.mh_steps, rng)[0]
                if "topk" in c.methods:
                    sets["topk", k] = frozenset(np.argsort(-q.logits)[:k].tolist())
                if "random" in c.methods:
                    sets["random", k] = frozenset(rng.choice(len(theta), k, replace=False).tolist())
            if "all" in c.methods:
                sets["all", 0] = frozenset(range(len(theta)))
            if "oracle" in c.methods:
                sets["oracle", 0] = frozenset(np.flatnonzero(q.is_rule).tolist())
            for (m, k), chosen in sets.items():
                r = res[m].setdefault(k, {"correct": [], "f1": []})
                r["correct"].append(int(np.argmax(pred[sorted(chosen)].sum(0)) == p.answer))
                r["f1"].append(set_f1(chosen, q.is_rule))
            if "proposer" in c.methods:
                r = res["proposer"].setdefault(0, {"correct": [], "f1": []})
                r["correct"].append(int(np.argmax(_shortcut(q)) == p.answer))
            if i == 0:
                k = c.ks[len(c.ks) // 2]
                res["example"] = {
                    "names": q.names,
                    "theta": np.round(theta, 2).tolist(),
                    "logits": np.round(q.logits, 2).tolist(),
                    "is_rule": q.is_rule.tolist(),
                    "chosen": sorted(sets.get(("crd", k), frozenset())),
                    "picked": int(np.argmax(pred[sorted(sets.get(("crd", k), frozenset(range(len(theta)))))].sum(0))),
                    "answer": p.answer,
                    "rules": {a: list(r) if r else None for a, r in p.rules.items()},
                }
        return res

    def _engine_proposer(self, puzzles: list) -> list:
        """The concepts a vision-language model names for each puzzle (``proposer_model``), asked once per puzzle
        list (they do not depend on ρ)."""
        from agentkit.engines import make_engine
        from agentkit.extras.vision.crd.proposer import EngineProposer

        if not hasattr(self, "_vlm"):
            self._vlm = EngineProposer(make_engine("hf", self.config.proposer_model))
            self._named: dict[int, list] = {}
        key = hash(tuple(p.values.tobytes() for p in puzzles))
        if key not in self._named:
            self._named[key] = self._vlm(puzzles)
        return self._named[key]

    # ---- report -----------------------------------------------------------------------------------------------
    def _plot(self, grid, acc, f1, cols) -> None:
        c = self.config
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, res, what in ((axes[0], acc, "answer accuracy"), (axes[1], f1, "rule F1")):
            for m, per in res.items():
                report.curve(ax, list(c.rhos), [per[col] for col in cols], m)
            ax.set_xlabel("proposer reading noise ρ")
            ax.set_ylabel(what)
            if res is acc:
                ax.axhline(0.125, color="0.6", ls=":", label="chance")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(
            fig,
            "accuracy",
            "Answer accuracy and rule F1 against the proposer's reading noise ρ (mean ± std over seeds)",
        )
        rho = c.rhos[len(c.rhos) // 2]
        ex = grid.raw[(rho,)][0].get("example")
        if not ex:
            return
        puzzle = data.raven(1, seed=3)[0]  # seed 0's first test puzzle (raven draws puzzles in order)
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 6), gridspec_kw={"width_ratios": [1.1, 1]})
        left.imshow(np.asarray(data.raven_render(puzzle)), cmap="gray")
        left.set_axis_off()
        left.set_title(f"answer: candidate {ex['answer'] + 1}; CRD picks {ex['picked'] + 1}", fontsize=9)
        lines = [f"ρ = {rho:g}, K = {ex['k']}", "", f"{'concept':<10} {'θ':>7} {'logit':>6}  chosen  true rule"]
        for i, name in enumerate(ex["names"]):
            rule = ex["rules"].get(name)
            lines.append(
                f"{name:<10} {ex['theta'][i]:>7.2f} {ex['logits'][i]:>6.2f}  {'  ✓' if i in ex['chosen'] else '   '}     "
                + (rule[0] + (f" {rule[1]:+d}" if rule[0] != "constant" else "") if rule else "—")
            )
        right.text(0, 1, "\n".join(lines), family="monospace", fontsize=8, va="top")
        right.set_axis_off()
        fig.tight_layout()
        self.ctx.save_plot(
            fig,
            "puzzle",
            "The first test puzzle (seed 0): each concept's rule score θ, the proposer's logit, CRD's choice and the rule that truly governs it",
        )

    def evaluate(self) -> dict[str, Any]:
        return {}


def _shortcut(q) -> np.ndarray:
    """The proposer answering alone: each candidate scores how many other candidates share its read value of each
    concept, weighted by σ(the concept's logit): the answer-set majority that I-RAVEN's balanced candidates defeat
    (what a holistic model that ignores the matrix falls back on)."""
    w = 1 / (1 + np.exp(-q.logits))
    cand = q.values[:, 8:]  # [C, 8]
    same = (cand[:, :, None] == cand[:, None, :]).sum(2) - 1  # [C, 8]: other candidates with the same value
    return (w[:, None] * same).sum(0)
