"""toollight_analyze: Tool-Light's entropy analysis. Samples trajectories with exact per-token entropies, then
reports the entropy profile around tool results and chain entropy against the number of tool calls."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from agentkit.agent import rollout
from agentkit.agent.suites import agent_suite
from agentkit.agent.trajectory import Trajectory, to_dataset
from agentkit.plots import pyplot
from agentkit.recipe import Recipe
from agentkit.recipes.toollight_analyze.config import ToolLightAnalyzeConfig
from agentkit.toollight.entropy import boundary_profile, chain_entropy, entropy_by_tool_calls, window_means


class ToolLightAnalyzeRecipe(Recipe[ToolLightAnalyzeConfig]):
    name = "toollight_analyze"
    config_cls = ToolLightAnalyzeConfig
    description = "Tool-Light entropy analysis: entropy around tool results, chain entropy vs tool calls"

    def setup(self) -> None:
        self.engine = self.config.engine.build()

    def evaluate(self) -> dict[str, Any]:
        c = self.config

        def sample(suite: str) -> list[dict[str, Any]]:
            with agent_suite(suite, c.num_tasks, c.seed, few_shot=c.few_shot, top_k=c.search_top_k) as work:
                agent = c.agent
                cfg = replace(agent, examples=agent.examples or work.examples).with_sampling(entropy=True)
                return [t.to_dict() for t in rollout(self.engine, work.tasks, [work.tool], cfg)]

        done = self.ctx.each("trajectories", [(suite,) for suite in c.suites], sample, desc="suites")
        trajs = {suite: [Trajectory.from_dict(d) for d in done[suite]] for suite in c.suites}
        to_dataset([t for ts in trajs.values() for t in ts]).save_to_disk(str(self.ctx.run_dir / "trajectories"))
        return self._analyse(trajs)

    def _analyse(self, trajs) -> dict[str, Any]:
        plt = pyplot()

        c = self.config
        metrics: dict[str, Any] = {}
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
        rows = []
        for n, (suite, ts) in enumerate(trajs.items()):
            prof = boundary_profile(ts, c.boundary_k)
            k = c.boundary_k
            a1.plot(range(-k, 0), prof["before"], marker=".", color=f"C{n}", label=f"{suite}: end of the calling turn")
            a1.plot(
                range(1, k + 1), prof["after"], marker=".", color=f"C{n}", ls="--", label=f"{suite}: after the result"
            )
            w = window_means(prof, (5, 10, k))
            groups = entropy_by_tool_calls(ts)
            xs = sorted(groups)
            a2.errorbar(
                xs,
                [groups[x]["mean"] for x in xs],
                yerr=[groups[x]["std"] for x in xs],
                marker="o",
                capsize=3,
                color=f"C{n}",
                label=suite,
            )
            calls = [t.tool_calls for t in ts]
            chains = [chain_entropy(t) for t in ts]
            metrics.update(
                {
                    f"{suite}/trajectories": len(ts),
                    f"{suite}/mean_tool_calls": float(np.mean(calls)),
                    f"{suite}/boundaries": int(max(prof["after_count"] + prof["before_count"] + [0])),
                    f"{suite}/chain_entropy": float(np.nanmean(chains)),
                    **{f"{suite}/entropy_{key}": v for key, v in w.items()},
                }
            )
            rows += [f"| {suite} | {n} | {g['n']} | {g['mean']:.3f} ± {g['std']:.3f} |" for n, g in groups.items()]
        a1.axvline(0, color="grey", ls=":")
        a1.set_xlabel("token position relative to the tool result")
        a1.set_ylabel("mean entropy (nats)")
        a1.set_title("Entropy around tool results")
        a1.legend(fontsize=7)
        a2.set_xlabel("tool calls in the trajectory")
        a2.xaxis.get_major_locator().set_params(integer=True)
        a2.set_ylabel("chain entropy (mean over model tokens)")
        a2.set_title("Chain entropy vs tool calls")
        a2.legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(
            fig,
            "entropy",
            "Left: token entropy aligned at tool-result boundaries. Right: chain "
            "entropy by number of tool calls (mean ± std)",
        )
        self.ctx.add_section(
            "Chain entropy by tool calls",
            "| suite | tool calls | trajectories | chain entropy |\n|---|---|---|---|\n" + "\n".join(rows),
        )
        return metrics
