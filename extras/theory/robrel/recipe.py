"""extras.theory.robrel: Rob-ReL's minimax estimate of a reward functional against single feasible rewards (what IRL
returns), on seeded random MDPs; worst-case error over the truly feasible rewards as demonstrations grow."""

from __future__ import annotations

from typing import Any

import numpy as np

from agentkit.extras import report
from agentkit.extras.sweep import product, sweep
from agentkit.extras.theory.robrel.bounds import Feedback, exact_bounds, feasible_reward, primal_dual_bound
from agentkit.extras.theory.robrel.config import RobReLConfig, parse_size
from agentkit.extras.theory.robrel.mdp import MDP, estimate, greedy, occupancy, random_policy, sample
from agentkit.plots import pyplot
from agentkit.recipe import Recipe

NAMES = {"robrel": "Rob-ReL (midpoint)", "irl_margin": "IRL: max-margin reward", "irl_vertex": "IRL: random vertex"}


class RobReLRecipe(Recipe[RobReLConfig]):
    name = "extras.theory.robrel"
    config_cls = RobReLConfig
    description = "Rob-ReL vs single IRL rewards: worst-case error of a reward functional over the feasible set"

    def train(self) -> dict[str, Any]:
        c = self.config
        grid = sweep(self.ctx, product(c.sizes, c.samples), c.seeds, self._run, desc="MDPs")
        out: dict[str, Any] = {}
        plt = pyplot()
        fig, axes = plt.subplots(1, len(c.sizes), figsize=(5.5 * len(c.sizes), 3.6), squeeze=False)
        for ax, (size, part) in zip(axes[0], grid.split().items()):
            cols = [f"n={n}" for (n,) in part.settings]
            res: report.Results = {}
            for (n,), rows in part.raw.items():
                for r in rows:
                    for m in c.methods:
                        report.add(res, NAMES[m], {f"n={n}": r[f"{m}/err"]})
                    report.add(res, "certificate I (true)", {f"n={n}": r["I"]})
                    if "robrel" in c.methods:
                        report.add(res, "certificate Î (estimated)", {f"n={n}": r["I_hat"]})
                        report.add(res, "Rob-ReL err_x = abs(x̂ − x*)", {f"n={n}": r["midpoint_err"]})
            S, A, H = parse_size(size)
            baseline = NAMES["irl_margin"] if "irl_margin" in c.methods else ""
            self.ctx.add_section(
                f"S, A, H = {S}, {A}, {H}: worst-case error of the estimate ({c.seeds} MDPs)",
                "Each column: the number of expert trajectories (P̂ and d̂^πE are estimated from them). Error: the "
                "largest |x − ⟨c, r⟩| over every reward the true feedback leaves feasible, i.e. max(x − m, M − x) "
                "with m, M from the exact LP on the true MDP. A single feasible reward can be up to 2I off; the "
                "midpoint x* of the exact range is I off, the least any estimate can guarantee. err_x: how far "
                "Rob-ReL's sample-based midpoint is from x* (the paper's err_x).\n\n"
                + report.table(res, cols, label="estimate")
                + (
                    "\n\n" + report.paired({NAMES[m]: res[NAMES[m]] for m in c.methods}, baseline, cols)
                    if baseline
                    else ""
                ),
            )
            for name, per in res.items():
                style = "--" if name.startswith("certificate") else "-"
                report.curve(ax, [int(k[2:]) for k in cols], [per[k] for k in cols], name, ls=style)
            ax.set_xscale("log")
            ax.set_xlabel("expert trajectories")
            ax.set_ylabel("worst-case error")
            ax.set_title(f"S, A, H = {S}, {A}, {H}")
            ax.legend(fontsize=7)
            out |= report.means(res, cols, f"{size}/")
        fig.tight_layout()
        self.ctx.save_plot(
            fig, "worst_case_error", "Worst-case error against the number of demonstrations (mean ± std)"
        )
        return out

    def _run(self, size: str, n: int, seed: int) -> dict[str, float]:
        """One MDP: true reward, optimal expert, n demonstrations, comparisons; every method's worst-case error."""
        c = self.config
        S, A, H = parse_size(size)
        rng = np.random.default_rng(seed)
        mdp = MDP.random(S, A, H, seed)
        r_true = rng.random((H, S, A))
        _, expert = greedy(mdp, r_true)
        P, mu, d_hat = estimate(sample(mdp, expert, n, seed), S, A)
        est = MDP(P, mu)
        uniform = np.full((H, S, A), 1.0 / A)
        pairs = sample(mdp, uniform, 2 * c.comparisons, seed + 1)
        comparisons = [self._compare(pairs[2 * k], pairs[2 * k + 1], r_true, (H, S, A)) for k in range(c.comparisons)]
        p1, p2 = random_policy(mdp, seed + 2), random_policy(mdp, seed + 3)
        target, target_hat = occupancy(mdp, p1) - occupancy(mdp, p2), occupancy(est, p1) - occupancy(est, p2)
        m, M = exact_bounds(mdp, Feedback(occupancy(mdp, expert), c.slack, comparisons), target)
        feedback = Feedback(d_hat, c.slack, comparisons)
        out = {"I": (M - m) / 2, "m": m, "M": M}
        estimates = {}
        if "robrel" in c.methods:
            lo = primal_dual_bound(est, feedback, target_hat, False, c.steps, c.lr)
            hi = primal_dual_bound(est, feedback, target_hat, True, c.steps, c.lr)
            estimates["robrel"], out["I_hat"] = (lo + hi) / 2, (hi - lo) / 2
            out["midpoint_err"] = abs(estimates["robrel"] - (m + M) / 2)  # the paper's err_x
        if "irl_margin" in c.methods:  # the expert's largest margin over the uniform policy
            r = feasible_reward(est, feedback, -(d_hat - occupancy(est, uniform)))
            estimates["irl_margin"] = float((target_hat * r).sum())
        if "irl_vertex" in c.methods:
            r = feasible_reward(est, feedback, np.random.default_rng(seed + 4).normal(size=(H, S, A)))
            estimates["irl_vertex"] = float((target_hat * r).sum())
        for name, x in estimates.items():
            out[f"{name}/err"] = max(abs(x - m), abs(M - x))
        return out

    @staticmethod
    def _compare(t1: np.ndarray, t2: np.ndarray, r: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
        """φ(τ₁) − φ(τ₂) (visit counts), oriented so the trajectory with the higher true return comes first."""
        phi = []
        for t in (t1, t2):
            counts = np.zeros(shape)
            counts[np.arange(shape[0]), t[:, 0], t[:, 1]] = 1.0
            phi.append(counts)
        g = phi[0] - phi[1]
        return g if float((g * r).sum()) >= 0 else -g

    def evaluate(self) -> dict[str, Any]:
        return {}
