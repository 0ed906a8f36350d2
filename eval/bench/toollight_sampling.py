"""``agentkit bench toollight-sampling``: entropy-guided branching with the prefix cache against re-encoding.

Main chains are sampled once (SmolLM2 with few-shot examples on suite (a) with python or suite (b) with
search, at the official sampling settings: temperature 1, top_p 0.8, top_k 20), then the same
branches (top-B steps × M continuations, seeded) are generated twice from the same cut points: by an engine
whose prefix cache still holds the main chains (a branch encodes only its last prefix token onwards), and by
an engine without it (each branch re-encodes its whole prefix, as the official code does with vLLM). Same
weights, same process; the bench checks the branches are identical and reports the prompt tokens each side
ran through the model and its wall time.
"""

from __future__ import annotations

import copy
import json
import time

from agentkit.agent import AgentConfig, rollout
from agentkit.agent.loop import TIR_TOKENS_PER_TURN
from agentkit.agent.suites import agent_suite
from agentkit.argtypes import POS_INT
from agentkit.command import add_model_option, add_out_option
from agentkit.engines.base import SamplingParams
from agentkit.eval.bench import write_json
from agentkit.eval.bench.agent import SUITE_OF, WORKLOADS
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.toollight.sampling import entropy_guided_rollouts
from agentkit.tools.sandbox import SandboxConfig


def run(
    model: str = DEFAULT_CHAT_MODEL,
    tasks: int = 16,
    top_b: int = 3,
    branches: int = 3,
    examples: bool = True,
    tokens_per_turn: int = TIR_TOKENS_PER_TURN,
    workload: str = "python",
) -> dict:
    from agentkit.engines.hf import HFEngine

    cached = HFEngine(model)
    naive = cached.variant(prefix_cache_mb=0)
    suite = agent_suite(SUITE_OF[workload], tasks, seed=7, few_shot=examples, sandbox=SandboxConfig(pool_size=4))
    work, tool = suite.tasks, suite.tool
    cfg = AgentConfig(
        max_turns=4,
        max_tool_calls=4,
        max_total_tokens=4 * (tokens_per_turn + 256),
        examples=suite.examples,
        sampling=SamplingParams(max_tokens=tokens_per_turn, temperature=1.0, top_p=0.8, top_k=20, seed=0, entropy=True),
    )
    with suite:
        main = rollout(cached, work, [tool], cfg)
        res = {
            "model": model,
            "workload": workload,
            "tasks": tasks,
            "top_b": top_b,
            "branches": branches,
            "main_tool_calls": sum(t.tool_calls for t in main),
        }
        outs = {}
        for name, engine in (("re-encode", naive), ("prefix-cache", cached)):
            before = engine.stats()["prefill_tokens"]
            t = time.perf_counter()
            _, br = entropy_guided_rollouts(engine, work, [tool], cfg, top_b, branches, main=copy.deepcopy(main))
            secs = time.perf_counter() - t
            outs[name] = [x.completion_ids for x in br]
            res[name] = {
                "seconds": round(secs, 2),
                "prompt_tokens_encoded": engine.stats()["prefill_tokens"] - before,
                "branches": len(br),
                "branch_tool_calls": sum(x.tool_calls for x in br),
            }
    r, c = res["re-encode"], res["prefix-cache"]
    res.update(
        {
            "identical_branches": outs["re-encode"] == outs["prefix-cache"],
            "token_ratio": round(c["prompt_tokens_encoded"] / max(1, r["prompt_tokens_encoded"]), 3),
            "time_ratio": round(c["seconds"] / r["seconds"], 3),
        }
    )
    return res


def main(
    model: str = DEFAULT_CHAT_MODEL,
    tasks: int = 16,
    top_b: int = 3,
    branches: int = 3,
    examples: bool = True,
    out: str | None = None,
    workload: str = "python",
) -> int:
    if workload not in WORKLOADS:
        from agentkit.errors import AgentkitError

        raise AgentkitError(f"unknown workload {workload!r}", f"choose from {', '.join(WORKLOADS)}")
    res = run(model, tasks, top_b, branches, examples, workload=workload)
    print(json.dumps(res, indent=2))
    print(
        f"\n{res['prefix-cache']['branches']} branches: the prefix cache encodes "
        f"{res['prefix-cache']['prompt_tokens_encoded']} prompt tokens vs {res['re-encode']['prompt_tokens_encoded']}"
        f" ({res['token_ratio']}x) in {res['prefix-cache']['seconds']} s vs {res['re-encode']['seconds']} s "
        f"({res['time_ratio']}x); identical branches: {res['identical_branches']}"
    )
    write_json(out, res)
    return 0


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``)."""
    r, c = res["re-encode"], res["prefix-cache"]
    return (
        "| branches | prompt tokens encoded (cache / re-encode) | wall time (cache / re-encode) |\n|---|---|---|\n"
        f"| {c['branches']} | {c['prompt_tokens_encoded']:,} / {r['prompt_tokens_encoded']:,} "
        f"(**{res['token_ratio']}×**) | {c['seconds']} s / {r['seconds']} s (**{res['time_ratio']}×**) |\n\n"
        f"Identical branches: {'yes' if res['identical_branches'] else '**no**'}."
    )


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read (lower is better: the cache's share)."""
    return {
        "branches: prompt tokens, cache / re-encode": (res["token_ratio"], "lower"),
        "branches: time, cache / re-encode": (res["time_ratio"], "lower"),
    }


HELP = "entropy-guided branching: prefix cache vs re-encoding each prefix"


def add_arguments(parser) -> None:
    """``agentkit bench toollight-sampling``'s options: ``main``'s parameters."""
    add_model_option(parser)
    parser.add_argument("--tasks", type=POS_INT, default=16, help="questions whose main chains are branched")
    parser.add_argument("--top-b", type=POS_INT, default=3, help="branch points per main chain")
    parser.add_argument("--branches", type=POS_INT, default=3, help="continuations per branch point")
    parser.add_argument(
        "--no-examples", dest="examples", action="store_false", help="no few-shot examples (a tool-trained model)"
    )
    parser.add_argument(
        "--workload", default="python", choices=["python", "search"], help="python (suite a) or search (suite b)"
    )
    add_out_option(parser)
