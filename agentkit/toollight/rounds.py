"""The pieces of Tool-Light's outer loop (arXiv 2509.23285, Sec. 3): source mining, vanilla and entropy-guided
sampling, labelling, pair building, and agent evaluation. ``recipes/toollight`` chains them:

    SFT model → mine sources → sample → pre-aligned pairs → DPO → [resample → self-evolved pairs → DPO] × K

Questions come in *groups*: a list of tasks with the tools they may use (suite (a) with python, suite (b) with
search, or a user's questions with the configured tools).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any, ClassVar

import annotated_types as at

from agentkit.agent.loop import TIR_TOKENS_PER_TURN, AgentConfig, rollout
from agentkit.agent.trajectory import Trajectory
from agentkit.config import NonNegInt, PosInt, option
from agentkit.data.tasks import Task
from agentkit.engines.base import SamplingParams
from agentkit.eval.metrics import efficiency, score_task
from agentkit.toollight.pairs import (
    Candidate,
    Pair,
    PairRules,
    mix,
    pre_aligned_guided,
    pre_aligned_vanilla,
    self_evolved,
)
from agentkit.toollight.sampling import entropy_guided_rollouts

# Source mining asks for a direct answer: the model may not call anything (the paper's "inference without tools").
NO_TOOL_PROMPT = (
    "Answer the question directly, without tools. Give the final answer between <answer> and "
    "</answer>, e.g. <answer>42</answer>."
)


@dataclass
class Group:
    name: str
    tasks: list[Task]
    tools: list[Any]


@dataclass
class SamplingSettings:
    """How each round samples (paper defaults in brackets in each key's help)."""

    RENAMED: ClassVar[dict[str, str]] = {
        "temperature": "agent.sampling.temperature",
        "top_p": "agent.sampling.top_p",
        "max_turns": "agent.max_turns",
        "max_tokens_per_turn": "agent.sampling.max_tokens",
        "max_total_tokens": "agent.max_total_tokens",
        "seed": "agent.sampling.seed",
    }

    mine_samples: PosInt = option(5, "direct answers per question when mining DPO sources [5]")
    mine_keep_below: Annotated[float, at.Interval(gt=0, le=1)] = option(
        1.0,
        "a question is a source when its share of correct direct answers is below this (1.0: one wrong) [y_inf ≠ y]",
    )
    vanilla: NonNegInt = option(8, "independent rollouts per source question [10]")
    top_b: NonNegInt = option(3, "entropy-guided branch points per main chain [3]")
    branches: NonNegInt = option(3, "continuations sampled from each branch point [3]")
    tool_budget: NonNegInt = option(4, "calls of each tool per trajectory [4 python, 4 search]")
    agent: AgentConfig = option(
        AgentConfig(
            max_turns=5,
            max_total_tokens=768,
            sampling=SamplingParams(temperature=1.0, top_p=0.95, max_tokens=TIR_TOKENS_PER_TURN, seed=0, entropy=True),
        ),
        "the sampling agent [temperature 1.0, top_p 0.95]; its seed is the base seed each round offsets; "
        "max_tool_calls and max_calls_per_tool come from tool_budget",
    )

    def for_tools(self, tools: list[Any], n: int = 1, seed: int = 0) -> AgentConfig:
        """The agent that samples with ``tools``: ``n`` trajectories per question, ``tool_budget`` calls of each."""
        budget = {t.name: self.tool_budget for t in tools}
        cfg = replace(self.agent, max_tool_calls=self.tool_budget * max(1, len(tools)), max_calls_per_tool=budget)
        return cfg.with_sampling(n=n, seed=seed)


def is_correct(task: Task, traj: Trajectory) -> bool:
    return bool(traj.answer) and score_task(task.metric, traj.answer, task.answer)["correct"] == 1.0


def mine_sources(
    engine, groups: list[Group], s: SamplingSettings, seed: int = 0
) -> tuple[list[Group], dict[str, float]]:
    """Questions the model gets wrong without tools: ``(groups of sources, no-tool correct rate per question)``."""
    cfg = replace(
        s.for_tools([], n=s.mine_samples, seed=seed), system_prompt=NO_TOOL_PROMPT, max_turns=1, max_tool_calls=0
    )
    rates: dict[str, float] = {}
    out = []
    for g in groups:
        by_id = {t.id: t for t in g.tasks}
        trajs = rollout(engine, g.tasks, {}, cfg)
        for t in g.tasks:
            mine = [x for x in trajs if x.task_id == t.id]
            rates[t.id] = sum(is_correct(t, x) for x in mine) / len(mine)
        out.append(Group(g.name, [by_id[i] for i in by_id if rates[i] < s.mine_keep_below], g.tools))
    return out, rates


def sample(
    engine, groups: list[Group], s: SamplingSettings, seed: int = 0
) -> tuple[list[Trajectory], list[Trajectory]]:
    """``(vanilla rollouts, entropy-guided main chains + branches)`` over every group; each trajectory's
    ``meta["source"]`` says which."""
    vanilla, guided = [], []
    for g in groups:
        if not g.tasks:
            continue
        v = rollout(engine, g.tasks, g.tools, s.for_tools(g.tools, n=s.vanilla, seed=seed))
        main, branches = entropy_guided_rollouts(
            engine, g.tasks, g.tools, s.for_tools(g.tools, seed=seed + 1), top_b=s.top_b, branches=s.branches
        )
        for t in v:
            t.meta["source"] = "vanilla"
        for t in main + branches:
            t.meta["source"] = "guided"
        vanilla += v
        guided += main + branches
    return vanilla, guided


def candidates(trajs: list[Trajectory], tasks: dict[str, Task]) -> dict[str, list[Candidate]]:
    """Samples grouped by question, each labelled correct or wrong by the question's scorer."""
    out: dict[str, list[Candidate]] = {}
    for t in trajs:
        out.setdefault(t.task_id, []).append(Candidate(t, is_correct(tasks[t.task_id], t)))
    return out


def build_pairs(
    stage: str,
    vanilla: list[Trajectory],
    guided: list[Trajectory],
    tasks: dict[str, Task],
    rules: PairRules,
    sft: dict[str, Trajectory] | None = None,
    seed: int = 0,
    stats: dict[str, int] | None = None,
) -> list[Pair]:
    """``stage="pre_aligned"``: Criterion 1 on each source (vanilla and guided apart), then the 2:1 / 13:7 mix
    (``stats``, if given, receives the pairs available before mixing). ``stage="self_evolved"``: Criterion 2 on
    all samples of each question."""
    v, g = candidates(vanilla, tasks), candidates(guided, tasks)
    if stage == "pre_aligned":
        sft = sft or {}
        vp = [p for c in v.values() if (p := pre_aligned_vanilla(c, rules))]
        gp = [p for q, c in g.items() if (p := pre_aligned_guided(c, rules, _same_prompt(sft.get(q), c)))]
        if stats is not None:
            for src, pairs in (("vanilla", vp), ("guided", gp)):
                for lvl in ("hard", "easy"):
                    stats[f"available_{src}_{lvl}"] = sum(p.difficulty == lvl for p in pairs)
        return mix(vp, gp, rules, seed)
    if stage == "self_evolved":
        return [p for q in sorted({*v, *g}) if (p := self_evolved(v.get(q, []) + g.get(q, []), rules))]
    raise ValueError(f"unknown stage {stage!r} (pre_aligned or self_evolved)")


def _same_prompt(sft: Trajectory | None, cands: list[Candidate]) -> Trajectory | None:
    """The SFT trajectory stands in as chosen only if it was written for the same prompt tokens."""
    return sft if sft is not None and cands and sft.prompt_ids == cands[0].traj.prompt_ids else None


def evaluate(engine, groups: list[Group], cfg: AgentConfig) -> dict[str, dict[str, Any]]:
    """Greedy agent runs on every group: one row per question (suite, correct, tool calls, model tokens, finish)."""
    rows = {}
    for g in groups:
        trajs = rollout(engine, g.tasks, g.tools, cfg.with_sampling(n=1))
        for t, tr in zip(g.tasks, trajs):
            rows[f"{g.name}/{t.id}"] = {
                "suite": g.name,
                "correct": float(is_correct(t, tr)),
                "tool_calls": tr.tool_calls,
                "tokens": int(sum(tr.mask)),
                "finish": tr.finish,
                "text": tr.text[-300:],
            }
    return rows


def summarise(rows: dict[str, dict[str, Any]], stage: str) -> dict[str, float]:
    """Per suite: accuracy, Efficiency (math skips zero-call answers, QA counts them as one call, as the official
    scorer does), mean tool calls, model tokens per answer, share that reached an answer."""
    out = {}
    for suite in sorted({r["suite"] for r in rows.values()}):
        rs = [r for r in rows.values() if r["suite"] == suite]
        zero = "skip" if suite == "arithmetic" else "as_one"
        out[f"{stage}/{suite}/accuracy"] = sum(r["correct"] for r in rs) / len(rs)
        out[f"{stage}/{suite}/efficiency"] = efficiency([r["correct"] for r in rs], [r["tool_calls"] for r in rs], zero)
        out[f"{stage}/{suite}/tool_calls"] = sum(r["tool_calls"] for r in rs) / len(rs)
        out[f"{stage}/{suite}/tokens_per_answer"] = sum(r["tokens"] for r in rs) / len(rs)
        out[f"{stage}/{suite}/answered"] = sum(r["finish"] == "answer" for r in rs) / len(rs)
    return out
