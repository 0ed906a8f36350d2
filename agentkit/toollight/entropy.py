"""Entropy analysis of tool-integrated trajectories (Tool-Light, arXiv 2509.23285, Sec. 2).

The paper's observations: reasoning entropy changes once a tool result arrives, and a chain's entropy varies
with its number of tool calls. With ``H_t = −Σ_v p_t(v) log p_t(v)`` the entropy of the t-th generated token
(exact, over the full vocabulary, from HFEngine; estimated from top-k logprobs on vLLM/OpenAI engines):

- **Boundary profile.** For every tool result in a trajectory, the model tokens just before the call's result
  (positions −k…−1: the end of the model turn that made the call) and just after it (+1…+k: the start of the
  next model turn). ``boundary_profile`` averages ``H`` at each relative position over all boundaries.
- **Chain entropy.** The mean ``H`` over a trajectory's model tokens; ``entropy_by_tool_calls`` groups it by the
  trajectory's number of tool calls.
- **Step score** (entropy-guided branching): a model segment after a tool result scores
  ``max_{n ∈ {10,20,30,40,50}} mean(H_1…H_n)``; the n that attains it marks where to branch.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from agentkit.agent.trajectory import Trajectory

KS = (10, 20, 30, 40, 50)


def step_score(entropies: list[float], ks: tuple[int, ...] = KS) -> tuple[float, int]:
    """A step's branching score: the highest mean entropy over its first n tokens.

    Args:
        entropies: the step's per-token entropies.
        ks: the prefix lengths n tried (capped at the step's length, so a short step scores its whole mean).

    Returns:
        ``(score, n)``: the highest mean and the n that gives it (the shortest on ties); ``(-inf, 0)`` when empty.

    >>> step_score([1.0] * 10 + [3.0] * 10, ks=(10, 20))
    (2.0, 20)
    """
    if not entropies:
        return float("-inf"), 0
    csum = np.cumsum(entropies)
    best = max(
        ((csum[min(n, len(entropies)) - 1] / min(n, len(entropies)), min(n, len(entropies))) for n in ks),
        key=lambda x: (x[0], -x[1]),
    )
    return float(best[0]), int(best[1])


def boundary_profile(trajectories: list[Trajectory], k: int = 20) -> dict[str, list[float]]:
    """Mean entropy at positions −k…−1 (before each tool result) and +1…+k (after it), with counts."""
    before, after = defaultdict(list), defaultdict(list)
    for t in trajectories:
        segs = t.segments
        for i, s in enumerate(segs):
            if s.kind != "tool":
                continue
            prev = next((p for p in reversed(segs[:i]) if p.kind == "model"), None)
            nxt = next((p for p in segs[i + 1 :] if p.kind == "model"), None)
            if prev is not None and prev.entropies:
                for j, h in enumerate(reversed(prev.entropies[-k:]), 1):
                    before[j].append(h)
            if nxt is not None and nxt.entropies:
                for j, h in enumerate(nxt.entropies[:k], 1):
                    after[j].append(h)

    def side(d):
        return [float(np.mean(d[j])) if d[j] else float("nan") for j in range(1, k + 1)], [
            len(d[j]) for j in range(1, k + 1)
        ]

    b, nb = side(before)
    a, na = side(after)
    return {"before": b[::-1], "before_count": nb[::-1], "after": a, "after_count": na}  # before: −k … −1


def window_means(profile: dict[str, list[float]], windows: tuple[int, ...] = (5, 10, 20)) -> dict[str, float]:
    """Count-weighted mean entropy of the last w tokens before and the first w tokens after a tool result."""
    out = {}
    for w in windows:
        for name, vals, counts in (
            ("before", profile["before"][::-1], profile["before_count"][::-1]),
            ("after", profile["after"], profile["after_count"]),
        ):
            v, c = np.array(vals[:w], dtype=float), np.array(counts[:w], dtype=float)
            ok = c > 0
            out[f"{name}_{w}"] = float((v[ok] * c[ok]).sum() / c[ok].sum()) if ok.any() else float("nan")
    return out


def chain_entropy(t: Trajectory) -> float:
    hs = [h for s in t.segments if s.kind == "model" and s.entropies for h in s.entropies]
    return float(np.mean(hs)) if hs else float("nan")


def entropy_by_tool_calls(trajectories: list[Trajectory]) -> dict[int, dict[str, float]]:
    """Number of tool calls -> mean, std and count of chain entropy."""
    groups = defaultdict(list)
    for t in trajectories:
        h = chain_entropy(t)
        if h == h:
            groups[t.tool_calls].append(h)
    return {n: {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)} for n, v in sorted(groups.items())}
