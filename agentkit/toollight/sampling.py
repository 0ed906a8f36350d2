"""Entropy-guided branching (Tool-Light, arXiv 2509.23285; official ``entropy_guided_sample.py``).

A *step* is a model segment that follows a tool result. Each step is scored by ``step_score`` (the largest mean
entropy over its first n ∈ {10, 20, 30, 40, 50} tokens), and the ``top_b`` steps of a main chain become branch
points: ``branches`` new continuations restart from ``prompt + chain[: step start + n]`` (the official code
cuts at the same place, by characters). A branch's earlier turns and tool calls count against its budgets.

Unlike the official code, a branch does not re-encode its prefix: HFEngine's prefix cache still holds the main
chain's keys/values, and a branch prompt shares all but its last token with them (``PrefixCache.longest`` cuts
the stored sequence to the shared part). ``agentkit bench toollight-sampling`` measures the saving.
"""

from __future__ import annotations

import copy
from typing import Any

from agentkit.agent.loop import AgentConfig, continue_rollout, rollout
from agentkit.agent.trajectory import Trajectory
from agentkit.toollight.entropy import KS, step_score


def branch_points(traj: Trajectory, top_b: int = 3, ks: tuple[int, ...] = KS) -> list[tuple[int, int, float]]:
    """``(segment index, tokens kept, score)`` of the ``top_b`` highest-scoring steps, best first. At least one
    token of the step is left to regenerate."""
    points = []
    for i, seg in enumerate(traj.segments):
        if seg.kind == "model" and i > 0 and traj.segments[i - 1].kind == "tool" and seg.entropies:
            score, n = step_score(seg.entropies, ks)
            points.append((i, min(n, len(seg.token_ids) - 1), score))
    return sorted(points, key=lambda p: (-p[2], p[0]))[:top_b]


def cut(traj: Trajectory, seg_index: int, keep: int, engine) -> Trajectory:
    """A running copy of ``traj`` up to segment ``seg_index``, of which the first ``keep`` tokens stay (an open
    turn the loop continues)."""
    t = Trajectory(
        traj.task_id,
        traj.prompt,
        traj.prompt_ids,
        copy.deepcopy(traj.segments[:seg_index]),
        meta={k: v for k, v in traj.meta.items() if k != "open_turn"},
    )
    t.meta["turns"] = sum(s.kind == "model" for s in t.segments)
    if keep > 0:
        s = copy.deepcopy(traj.segments[seg_index])
        ids = s.token_ids[:keep]
        s.token_ids, s.text = ids, engine.decode(ids)
        s.logprobs = (s.logprobs or [])[:keep]
        s.entropies = s.entropies[:keep] if s.entropies else None
        t.segments.append(s)
        t.meta["open_turn"] = True
    return t


def entropy_guided_rollouts(
    engine,
    tasks: list[Any],
    tools,
    config: AgentConfig,
    top_b: int = 3,
    branches: int = 3,
    main: list[Trajectory] | None = None,
) -> tuple[list[Trajectory], list[Trajectory]]:
    """One main chain per task (or ``main``, already sampled), then ``branches`` continuations at each of its
    ``top_b`` branch points. Returns ``(main chains, branches)``; a branch's ``meta`` names its origin."""
    cfg = config.with_sampling(n=1)
    main = main if main is not None else rollout(engine, tasks, tools, cfg)
    cuts = [(m, p) for m in main for p in branch_points(m, top_b)]
    out: list[Trajectory] = []
    for b in range(branches):  # one batched continuation per branch index; each gets its own seed
        starts = []
        for m, (seg, keep, score) in cuts:
            t = cut(m, seg, keep, engine)
            t.meta.update(
                {
                    "branch_of": m.task_id,
                    "branch_segment": seg,
                    "branch_keep": keep,
                    "branch_score": score,
                    "branch": b,
                    "sample": b,
                }
            )
            starts.append(t)
        seed = None if cfg.sampling.seed is None else cfg.sampling.seed + 1009 * (b + 1)
        out += continue_rollout(engine, starts, tools, cfg.with_sampling(seed=seed))
    return main, out
