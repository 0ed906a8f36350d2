"""``agentkit bench agent``: agent rollouts per minute with HFEngine's prefix cache against re-encoding.

Three workloads, 32 tasks each, greedy, turns of at most ``tokens_per_turn`` tokens, with
few-shot demonstrations so the embedded model really calls its tool (``examples=False`` for a model trained
on the format, e.g. the output of ``models/sft`` of the ``toollight`` recipe):

- ``python``: suite (a) with the real python sandbox (short tool results);
- ``search``: suite (b) with BM25 search over the knowledge base (results of ~170 tokens, as search agents see);
- ``steps``: suite (a)'s ``steps`` kind, four dependent calculations with one python call each, so that every
  trajectory really takes the four tool turns (the other two mostly end after one call).

A trajectory has up to ``turns`` tool turns and ``turns + 1`` model turns (the last one answers).

Each runs three times, on the same weights:

- ``prefix-cache``: a turn continues from the stored keys/values and encodes only the tool result onwards;
- ``re-encode``: no prefix cache; every turn re-encodes each row's history, but the prompt prefix all rows
  share (system prompt, examples) is encoded once per call;
- ``re-encode-all``: no reuse of any kind; every turn encodes every row's whole history (the plain loop).

All three must produce identical trajectories; the bench checks.
"""

from __future__ import annotations

import json
import time

from agentkit.agent import AgentConfig, rollout
from agentkit.agent.loop import TIR_TOKENS_PER_TURN
from agentkit.agent.suites import agent_suite
from agentkit.argtypes import POS_INT
from agentkit.command import add_model_option, add_out_option
from agentkit.engines.base import SamplingParams
from agentkit.eval.bench import write_json
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.tools.sandbox import SandboxConfig

# workload -> built-in suite (agentkit.agent.suites)
SUITE_OF = {"python": "arithmetic", "search": "multihop", "steps": "steps"}
WORKLOADS = tuple(SUITE_OF)


def run(
    model: str = DEFAULT_CHAT_MODEL,
    tasks: int = 32,
    turns: int = 4,
    tokens_per_turn: int = TIR_TOKENS_PER_TURN,
    workloads: tuple[str, ...] = WORKLOADS,
    examples: bool = True,
) -> dict:
    from agentkit.engines.hf import HFEngine

    reuse = HFEngine(model)
    fresh = reuse.variant(prefix_cache_mb=0)
    plain = reuse.variant(prefix_cache_mb=0, share_prefix=False)
    res = {
        "model": model,
        "tasks": tasks,
        "max_tool_turns": turns,
        "tokens_per_turn": tokens_per_turn,
        "few_shot_examples": examples,
    }
    for wl in workloads:
        suite = agent_suite(SUITE_OF[wl], tasks, seed=7, few_shot=examples, sandbox=SandboxConfig(pool_size=4))
        work, tool = suite.tasks, suite.tool
        cfg = AgentConfig(
            max_turns=turns + 1,
            max_tool_calls=turns,
            max_total_tokens=(turns + 1) * (tokens_per_turn + 256),
            examples=suite.examples,
            sampling=SamplingParams(max_tokens=tokens_per_turn, temperature=0, seed=0, entropy=True),
        )
        rows, outs = {}, {}
        with suite:
            rollout(
                reuse,
                work[:2],
                [tool],
                AgentConfig(max_turns=1, sampling=SamplingParams(max_tokens=4, temperature=0.0, seed=0, entropy=True)),
            )  # warm-up
            reused0 = reuse.stats()["cached_prompt_tokens"]
            for name, engine in (("re-encode-all", plain), ("re-encode", fresh), ("prefix-cache", reuse)):
                before = engine.stats()
                t = time.perf_counter()
                trajs = rollout(engine, work, [tool], cfg)
                secs = time.perf_counter() - t
                after = engine.stats()
                outs[name] = [x.completion_ids for x in trajs]
                rows[name] = {
                    "seconds": round(secs, 2),
                    "trajectories_per_min": round(60 * len(trajs) / secs, 2),
                    "turns": sum(x.meta["turns"] for x in trajs),
                    "tool_calls": sum(x.tool_calls for x in trajs),
                    "completion_tokens": sum(len(x.completion_ids) for x in trajs),
                    "prefill_tokens": after["prefill_tokens"] - before["prefill_tokens"],  # the work the cache saves
                    "prefill_seconds": round(after["prefill_seconds"] - before["prefill_seconds"], 2),
                }
        res[wl] = {
            **rows,
            "identical_trajectories": outs["re-encode"] == outs["prefix-cache"] == outs["re-encode-all"],
            "speedup": round(rows["re-encode"]["seconds"] / rows["prefix-cache"]["seconds"], 2),
            "speedup_vs_re_encode_all": round(rows["re-encode-all"]["seconds"] / rows["prefix-cache"]["seconds"], 2),
            "reused_tokens": reuse.stats()["cached_prompt_tokens"] - reused0,
            # no prefix cache can beat the ablation by more than its prefill time: encoding for free would leave
            # the decoding, the tools and the loop
            "ablation_prefill_share": round(rows["re-encode"]["prefill_seconds"] / rows["re-encode"]["seconds"], 3),
            "ceiling_vs_ablation": round(
                rows["re-encode"]["seconds"] / (rows["re-encode"]["seconds"] - rows["re-encode"]["prefill_seconds"]), 2
            ),
        }
    return res


def main(
    model: str = DEFAULT_CHAT_MODEL,
    tasks: int = 32,
    turns: int = 4,
    tokens_per_turn: int = TIR_TOKENS_PER_TURN,
    out: str | None = None,
    workloads: str = ",".join(WORKLOADS),
    examples: bool = True,
) -> int:
    chosen = tuple(w.strip() for w in workloads.split(",") if w.strip())
    bad = [w for w in chosen if w not in WORKLOADS]
    if bad or not chosen:
        from agentkit.errors import AgentkitError

        raise AgentkitError(f"unknown workload(s) {bad or workloads!r}; choose from {', '.join(WORKLOADS)}")
    res = run(model, tasks, turns, tokens_per_turn, chosen, examples)
    print(json.dumps(res, indent=2))
    for wl in chosen:
        r = res[wl]
        print(
            f"\n{wl}: {tasks} tasks x up to {turns} tool turns, {r['prefix-cache']['tool_calls']} tool calls: "
            f"{r['prefix-cache']['trajectories_per_min']} trajectories/min with the prefix cache vs "
            f"{r['re-encode-all']['trajectories_per_min']} for the plain loop that re-encodes every history: "
            f"{r['speedup_vs_re_encode_all']}x; vs {r['re-encode']['trajectories_per_min']} re-encoding each row's "
            f"history with the shared prompt prefix encoded once per call: {r['speedup']}x "
            f"(identical trajectories: {r['identical_trajectories']})"
        )
    write_json(out, res)
    return 0


LOOPS = {
    "re-encode-all": "plain loop, re-encode everything",
    "re-encode": "re-encode history, shared prefix once",
    "prefix-cache": "prefix cache",
}


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``)."""
    lines = [
        "| workload | loop | seconds | of which prefill | trajectories/min | turns | tool calls | completion tokens |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for wl in WORKLOADS:
        if wl not in res:
            continue
        r = res[wl]
        for i, (key, name) in enumerate(LOOPS.items()):
            m = r[key]
            rate = f"{m['trajectories_per_min']}"
            if key == "prefix-cache":
                rate += f" (**{r['speedup_vs_re_encode_all']}× / {r['speedup']}×**)"
            lines.append(
                f"| {wl if i == 0 else ''} | {name} | {m['seconds']} | {m['prefill_seconds']} s | {rate} | "
                f"{m['turns']} | {m['tool_calls']} | {m['completion_tokens']} |"
            )
        notes.append(
            f"`{wl}`: {100 * r['ablation_prefill_share']:.0f} % of the ablation's time is prefill, so no cache can "
            f"beat it by more than {r['ceiling_vs_ablation']}×"
        )
    same = all(res[wl]["identical_trajectories"] for wl in WORKLOADS if wl in res)
    return (
        "\n".join(lines)
        + f"\n\nRatios: prefix cache against the plain loop / against the ablation. Identical trajectories in all "
        f"three loops: {'yes' if same else '**no**'}. " + "; ".join(notes) + "."
    )


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read (higher is better)."""
    out = {}
    for wl in WORKLOADS:
        if wl in res:
            out[f"{wl}: prefix cache / re-encode all"] = (res[wl]["speedup_vs_re_encode_all"], "higher")
            out[f"{wl}: prefix cache / shared-prefix ablation"] = (res[wl]["speedup"], "higher")
    return out


HELP = "agent rollouts/min with HFEngine's prefix cache against re-encoding"


def add_arguments(parser) -> None:
    """``agentkit bench agent``'s options: ``main``'s parameters."""
    add_model_option(parser)
    parser.add_argument("--tasks", type=POS_INT, default=32, help="trajectories per workload")
    parser.add_argument(
        "--turns", type=POS_INT, default=4, help="most tool turns per trajectory (model turns: one more)"
    )
    parser.add_argument(
        "--tokens-per-turn", type=POS_INT, default=TIR_TOKENS_PER_TURN, help="most tokens per model turn"
    )
    parser.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help="python (suite a, sandbox), search (suite b, BM25 over the knowledge base), steps (four "
        "dependent calculations, one python call each)",
    )
    parser.add_argument(
        "--no-examples",
        dest="examples",
        action="store_false",
        help="no few-shot examples (for a model trained on the tag format, e.g. the toollight recipe's models/sft)",
    )
    add_out_option(parser)
