"""``agentkit bench tips-potentials``: TIPS potentials with each trajectory encoded once, against one forward
pass per (state, gold answer) as the official code does (one prompt-logprobs request each).

Workload: 32 three-hop questions of suite (b) answered by the ideal trajectory (three searches with the real
BM25 results, then the answer: 4 model turns, so 4 states s_0..s_3), two gold answers each, the embedded
model as teacher. Two ways, same weights, same process: ``packed`` (``PotentialScorer`` through
``HFEngine.score``: every trajectory's states in one packed pass) and ``per-pair`` (one ``score`` call per
(state, answer)). Reported: wall time, tokens run through the model, the largest difference between the
potentials. (All pairs in padded batches without sharing was slower still on the 2-core CPU: 2.3× per-pair at
8 trajectories, from padding.)
"""

from __future__ import annotations

import json
import time

from agentkit.argtypes import POS_INT
from agentkit.command import add_model_option, add_out_option
from agentkit.data.multihop import MultiHopKB
from agentkit.eval.bench import write_json
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.tips.potentials import PotentialScorer
from agentkit.toollight.sft_data import make_trajectories
from agentkit.tools.search import SearchTool


def workload(engine, n: int, seed: int = 11):
    """``n`` ideal three-search trajectories and two gold answers each."""
    kb = MultiHopKB.build(0)
    tasks = [t for t in kb.questions(8 * n, seed) if t.meta["hops"] == 3][:n]
    corpus = kb.corpus()
    titles = {d["id"]: d["title"] for d in corpus}
    tool = SearchTool(corpus, top_k=3)
    try:
        trajs = make_trajectories(tasks, engine.tokenizer, {"search": tool}, titles)
    finally:
        tool.close()
    return trajs, [[t.answer, f"The answer is {t.answer}"] for t in tasks]


def per_pair(engine, scorer: PotentialScorer, trajs, answers) -> list[list[float]]:
    """The potentials with one ``score`` call (one forward pass) per (state, answer), as the official code
    sends one request per pair."""
    contexts, conts, where = scorer.queries(trajs, answers)
    return scorer.reduce(where, [engine.score([c], [a])[0] for c, a in zip(contexts, conts)], len(trajs))


def run(model: str = DEFAULT_CHAT_MODEL, trajectories: int = 32) -> dict:
    from agentkit.engines.hf import HFEngine

    packed = HFEngine(model)
    plain = packed.variant(share_prefix=False)
    trajs, answers = workload(packed, trajectories)
    scorer = PotentialScorer(packed)
    pairs = len(scorer.queries(trajs, answers)[0])
    scorer.potentials(trajs[:2], answers[:2])  # warm-up: first-call allocations out of the timings
    sides: dict[str, dict] = {}

    def measure(name, engine, fn):
        before = engine.stats()["scored_tokens"]
        t0 = time.perf_counter()
        pots = fn()
        sides[name] = {
            "seconds": round(time.perf_counter() - t0, 2),
            "tokens": engine.stats()["scored_tokens"] - before,
        }
        return pots

    got = measure("packed", packed, lambda: scorer.potentials(trajs, answers))
    one = measure("per-pair", plain, lambda: per_pair(plain, scorer, trajs, answers))
    diff = max(abs(x - y) for p, q in zip(got, one) for x, y in zip(p, q))
    states = sum(len(p) for p in got)
    return {
        "model": model,
        "trajectories": len(trajs),
        "states": states,
        "answers_per_trajectory": 2,
        "pairs": pairs,
        "mean_trajectory_tokens": round(sum(len(t.prompt_ids) + len(t.completion_ids) for t in trajs) / len(trajs)),
        **sides,
        "time_ratio_vs_per_pair": round(sides["packed"]["seconds"] / sides["per-pair"]["seconds"], 3),
        "token_ratio_vs_per_pair": round(sides["packed"]["tokens"] / sides["per-pair"]["tokens"], 3),
        "max_abs_potential_diff": diff,
    }


def main(model: str = DEFAULT_CHAT_MODEL, trajectories: int = 32, out: str | None = None) -> int:
    res = run(model, trajectories)
    print(json.dumps(res, indent=2))
    p, o = res["packed"], res["per-pair"]
    print(
        f"\n{res['pairs']} (state, answer) pairs over {res['trajectories']} trajectories: packed {p['seconds']} s "
        f"({p['tokens']} tokens) vs one pass per pair {o['seconds']} s ({o['tokens']} tokens): "
        f"{res['time_ratio_vs_per_pair']}x; potentials agree to {res['max_abs_potential_diff']:.1e}"
    )
    write_json(out, res)
    return 0


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``)."""
    a, b = res["packed"], res["per-pair"]
    return (
        "| (state, answer) pairs | tokens through the model (shared / per pair) | wall time (shared / per pair) | "
        "largest difference in Φ |\n|---|---|---|---|\n"
        f"| {res['pairs']} | {a['tokens']:,} / {b['tokens']:,} (**{res['token_ratio_vs_per_pair']}×**) | "
        f"{a['seconds']} s / {b['seconds']} s (**{res['time_ratio_vs_per_pair']}×**) | "
        f"{res['max_abs_potential_diff']:.1e} |"
    )


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read (lower is better: shared / per pair)."""
    return {
        "potentials: time, shared / per pair": (res["time_ratio_vs_per_pair"], "lower"),
        "potentials: tokens, shared / per pair": (res["token_ratio_vs_per_pair"], "lower"),
    }


HELP = "TIPS potentials: each trajectory encoded once vs a pass per pair"


def add_arguments(parser) -> None:
    """``agentkit bench tips-potentials``'s options: ``main``'s parameters."""
    add_model_option(parser, "the teacher")
    parser.add_argument("--trajectories", type=POS_INT, default=32, help="three-search trajectories, 2 answers each")
    add_out_option(parser)
