"""``agentkit bench agent``: agent rollouts per minute with HFEngine's prefix cache against re-encoding.

The same 32 suite-(a) tasks run through the tag-style loop with the real python sandbox, greedy, up to
``turns`` model turns of at most ``tokens_per_turn`` tokens each: once with the prefix cache (a turn encodes only
the tool result and what follows) and once with it off (every turn re-encodes the whole history; shared-prefix
and length-grouped prefill still apply to both). Both must produce identical trajectories; the bench checks.
"""

from __future__ import annotations

import json
import time

from agentkit.eval.bench import write_json


def run(model: str = "smollm2-135m", tasks: int = 32, turns: int = 4, tokens_per_turn: int = 64) -> dict:
    from agentkit.agent import AgentConfig, rollout
    from agentkit.data import arithmetic_suite
    from agentkit.engines.hf import HFEngine
    from agentkit.tools.python import PythonTool
    from agentkit.tools.sandbox import SandboxConfig

    reuse = HFEngine(model)
    fresh = HFEngine(reuse.model, reuse.tokenizer, prefix_cache_mb=0)
    fresh.default_stop = reuse.default_stop
    work = arithmetic_suite(tasks, seed=7)
    cfg = AgentConfig(max_turns=turns, max_tool_calls=turns, max_tokens_per_turn=tokens_per_turn,
                      max_total_tokens=turns * (tokens_per_turn + 64), temperature=0)
    tool = PythonTool(SandboxConfig(pool_size=4))
    rows, outs = {}, {}
    try:
        rollout(reuse, work[:2], [tool], AgentConfig(max_turns=1, max_tokens_per_turn=4))  # warm-up
        for name, engine in (("re-encode", fresh), ("prefix-cache", reuse)):
            t = time.perf_counter()
            trajs = rollout(engine, work, [tool], cfg)
            secs = time.perf_counter() - t
            outs[name] = [x.completion_ids for x in trajs]
            rows[name] = {"seconds": round(secs, 2), "trajectories_per_min": round(60 * len(trajs) / secs, 2),
                          "turns": sum(x.meta["turns"] for x in trajs), "tool_calls": sum(x.tool_calls for x in trajs),
                          "completion_tokens": sum(len(x.completion_ids) for x in trajs)}
    finally:
        tool.close()
    return {"model": model, "tasks": tasks, "max_turns": turns, "tokens_per_turn": tokens_per_turn, **rows,
            "identical_trajectories": outs["re-encode"] == outs["prefix-cache"],
            "speedup": round(rows["re-encode"]["seconds"] / rows["prefix-cache"]["seconds"], 2),
            "reused_tokens": reuse.prefix_cache.reused_tokens}


def main(model: str = "smollm2-135m", tasks: int = 32, turns: int = 4, tokens_per_turn: int = 64,
         out: str | None = None) -> int:
    res = run(model, tasks, turns, tokens_per_turn)
    print(json.dumps(res, indent=2))
    print(f"\n{tasks} tasks x up to {turns} turns: {res['prefix-cache']['trajectories_per_min']} trajectories/min "
          f"with the prefix cache vs {res['re-encode']['trajectories_per_min']} re-encoding: {res['speedup']}x "
          f"(identical trajectories: {res['identical_trajectories']})")
    write_json(out, res)
    return 0
