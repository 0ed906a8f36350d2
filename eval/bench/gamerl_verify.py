"""``agentkit bench gamerl-verify``: rule-first verification throughput, beside reasoning-gym's own scorers and the
judge model Game-RL's official reward calls for every answer.

Workload (seeded): ``answers`` model-like outputs over every built-in game at all levels, fill-in and multiple
choice: the gold answer in varied wrappers (``<answer>``, ``\\boxed{}``, GameQA's ``###``, "The answer is …", a
bare last line), distractors, and prose no rule can read. Timed: ``verify`` on all of them (dataset generation
not included; answers that need the game's checker run its solver; parses and solver results are memoised, as in
training, where each gold is verified against G samples, and the caches start empty). Beside it, in the same process:

- reasoning-gym on the same answers (``against_reasoning_gym``): as many outputs for its games whose answers a
  rule kind here reads (maze: int, mini-sudoku and n-queens: grid, every valid board accepted, tsumego: text),
  its ``score_answer`` against ``decide`` on the answers ``extract`` read, and its whole path (``extract_answer``,
  which reads ``<answer>`` tags only, then ``score_answer``) against ``verify``; interleaved rounds, median;
- the judge (``Judge`` on the embedded chat model, greedy, constrained to Yes / No) on ``judge_answers`` of the
  same outputs: what the official reward pays per answer, and how often a small judge agrees with the rules.
"""

from __future__ import annotations

import random
import statistics
import time

from agentkit.argtypes import NONNEG_INT, POS_INT
from agentkit.command import add_model_option, add_out_option
from agentkit.eval.bench import write_json
from agentkit.gamerl import GAMES, create_dataset
from agentkit.gamerl.verifiers import Judge, clear_caches, decide, extract_for, path_counts, verify, verify_batch

WRAPPERS = (
    "<answer>{}</answer>",
    "Reasoning step by step... so the result follows.\n<answer>{}</answer>",
    "The final value is \\boxed{{{}}}.",
    "analysis of the board\n### {}",
    "After checking each option, the answer is {}",
    "Let me think.\n{}",
)


def workload(answers: int, seed: int = 0) -> tuple[list[str], list[dict]]:
    rng = random.Random(seed)
    per_game = max(1, answers // (len(GAMES.names()) * 3))
    entries = [
        e
        for name in GAMES.names()
        for i, level in enumerate(("Easy", "Medium", "Hard"))
        for e in create_dataset(name, size=per_game, seed=seed + i, level=level, format="mixed")
    ]
    outputs, picked = [], []
    while len(outputs) < answers:
        e = rng.choice(entries)
        m = e["metadata"]
        roll = rng.random()
        if roll < 0.5:
            body = e["answer"]
        elif roll < 0.85 and m["options"]:
            body = rng.choice("ABCDEFGH"[: len(m["options"])])
        elif roll < 0.85:
            body = str(rng.randint(0, 20))
        else:
            body = "I am not sure, it depends on the board"
        outputs.append(rng.choice(WRAPPERS).format(body))
        picked.append(e)
    return outputs, picked


# reasoning-gym's games whose answers a rule kind here reads as its scorer does: a number, a board, a move
RG_KINDS = ("maze", "mini_sudoku", "n_queens", "tsumego")


def rg_spec(name: str, entry: dict) -> dict:
    """The rule that reads a reasoning-gym game's answer here (every valid board of n-queens accepted)."""
    if name == "maze":
        return {"kind": "int"}
    if name == "tsumego":
        return {"kind": "text"}
    rows = len(entry["answer"].strip().splitlines())
    spec = {"kind": "grid", "rows": rows, "cols": rows}
    if name == "n_queens":
        spec["accept"] = list(entry["metadata"]["valid_answers"])
    return spec


def rg_workload(answers: int, seed: int = 0) -> list[tuple] | None:
    """``(dataset, output, its entry, the entry with our spec)`` over ``RG_KINDS``: model-like outputs as in
    ``workload`` (the gold, another entry's answer, or prose, in the same wrappers)."""
    try:
        import reasoning_gym as rg
    except ImportError:
        return None
    sets = {n: rg.create_dataset(n, size=50, seed=seed) for n in RG_KINDS}
    held = {n: list(ds) for n, ds in sets.items()}  # its entries are generated on access: once, untimed
    rng = random.Random(seed)
    rows = []
    for _ in range(answers):
        n = rng.choice(RG_KINDS)
        e = rng.choice(held[n])
        roll = rng.random()
        body = (
            e["answer"]
            if roll < 0.5
            else rng.choice(held[n])["answer"]
            if roll < 0.85
            else "I am not sure, it depends on the board"
        )
        ours = {"question": e["question"], "answer": e["answer"], "metadata": {"verify": rg_spec(n, e)}}
        rows.append((sets[n], rng.choice(WRAPPERS).format(body), e, ours))
    return rows


def against_reasoning_gym(answers: int, rounds: int = 5, seed: int = 0) -> dict | None:
    """Both sides on the same answers, interleaved ``rounds`` times (memoised parses cleared each round; the
    median round is reported). The scorers: reasoning-gym's ``score_answer`` and ``decide`` here, each given the
    answer ``extract_for`` read from the output. The pipelines: reasoning-gym's ``extract_answer`` (``<answer>`` tags
    only) then ``score_answer``, and ``verify`` here (every wrapper). Agreement: on the same extracted answers,
    how often both give full credit or both do not."""
    rows = rg_workload(answers, seed)
    if rows is None:
        return None
    from reasoning_gym.utils import extract_answer

    extracted = [extract_for(out, ours) for _, out, _, ours in rows]
    runs: dict[str, list[float]] = {k: [] for k in ("rg_score", "ours_decide", "rg_pipeline", "ours_verify")}
    for _ in range(rounds):
        clear_caches()
        t = time.perf_counter()
        ours_v = [decide(a, src, ours) for (a, src), (_, _, _, ours) in zip(extracted, rows)]
        runs["ours_decide"].append(time.perf_counter() - t)
        t = time.perf_counter()
        rg_v = [ds.score_answer(a, e) for (a, _), (ds, _, e, _) in zip(extracted, rows)]
        runs["rg_score"].append(time.perf_counter() - t)
        clear_caches()
        t = time.perf_counter()
        for _, out, _, ours in rows:
            verify(out, ours)
        runs["ours_verify"].append(time.perf_counter() - t)
        t = time.perf_counter()
        rg_read = [extract_answer(out) for _, out, _, _ in rows]
        for (ds, _, e, _), a in zip(rows, rg_read):
            ds.score_answer(a, e)
        runs["rg_pipeline"].append(time.perf_counter() - t)
    per_s = {k: answers / statistics.median(v) for k, v in runs.items()}
    ratios = {
        "decide_vs_rg_score": statistics.median(r / o for r, o in zip(runs["rg_score"], runs["ours_decide"])),
        "verify_vs_rg_pipeline": statistics.median(r / o for r, o in zip(runs["rg_pipeline"], runs["ours_verify"])),
    }
    return {
        "rg_games": list(RG_KINDS),
        "rg_answers": answers,
        "rg_rounds": rounds,
        **{f"{k}_answers_per_s": round(v) for k, v in per_s.items()},
        **{k: round(v, 2) for k, v in ratios.items()},
        "rg_paths": path_counts(ours_v),
        "full_credit_agreement": round(sum((v.score == 1.0) == (r == 1.0) for v, r in zip(ours_v, rg_v)) / answers, 4),
        "answers_read": {
            "rg_extract_answer": round(sum(a is not None for a in rg_read) / answers, 4),
            "ours": round(sum(v.path != "none" for v in ours_v) / answers, 4),
        },
    }


def main(answers: int = 20000, judge_answers: int = 32, model: str | None = None, out: str | None = None) -> int:
    outputs, entries = workload(answers)
    for o, e in zip(outputs[:200], entries[:200]):  # imports and regexes, then the caches emptied: timed cold
        verify(o, e)
    clear_caches()
    t0 = time.perf_counter()
    verdicts = [verify(o, e) for o, e in zip(outputs, entries)]
    ours = time.perf_counter() - t0
    paths = {p: sum(v.path == p for v in verdicts) for p in ("rule", "game", "none")}
    result = {
        "answers": answers,
        "ours_answers_per_s": answers / ours,
        "paths": paths,
        "correct_rate": sum(v.score for v in verdicts) / answers,
    }
    print(f"agentkit rules: {answers} answers in {ours:.2f} s = {answers / ours:,.0f}/s; paths {paths}")
    rg = against_reasoning_gym(answers)
    if rg is not None:
        result.update(rg)
        print(
            f"on the same {answers} answers to reasoning-gym's {', '.join(RG_KINDS)} ({rg['rg_rounds']} rounds, "
            f"median): its score_answer {rg['rg_score_answers_per_s']:,}/s, decide here "
            f"{rg['ours_decide_answers_per_s']:,}/s ({rg['decide_vs_rg_score']}x); whole outputs: its extract_answer "
            f"+ score_answer {rg['rg_pipeline_answers_per_s']:,}/s (reads {rg['answers_read']['rg_extract_answer']:.0%} "
            f"of them), verify here {rg['ours_verify_answers_per_s']:,}/s ({rg['verify_vs_rg_pipeline']}x, reads "
            f"{rg['answers_read']['ours']:.0%}); full credit agrees on {rg['full_credit_agreement']:.1%}"
        )
    if judge_answers:
        from agentkit.engines.hf import HFEngine
        from agentkit.models.catalog import DEFAULT_CHAT_MODEL

        engine = HFEngine(model or DEFAULT_CHAT_MODEL)
        judge = Judge(engine)
        sample = list(range(judge_answers))
        items = [(entries[i]["question"], entries[i]["answer"], verdicts[i].extracted) for i in sample]
        judge(items[:2])  # warm-up
        t0 = time.perf_counter()
        said = judge(items)
        secs = time.perf_counter() - t0
        decided = [
            (ok, verdicts[i].score) for ok, i in zip(said, sample) if ok is not None and verdicts[i].path != "none"
        ]
        agree = sum(float(ok) == s for ok, s in decided) / max(1, len(decided))
        result.update(
            judge_model=model or DEFAULT_CHAT_MODEL,
            judge_answers_per_s=judge_answers / secs,
            judge_agreement_with_rules=agree,
            rules_vs_judge_speedup=(answers / ours) / (judge_answers / secs),
        )
        print(
            f"judge ({model or DEFAULT_CHAT_MODEL}, batched, greedy Yes/No): {judge_answers / secs:.1f}/s; agrees with "
            f"the rules on {agree:.0%} of {len(decided)}; rules are {result['rules_vs_judge_speedup']:,.0f}× faster"
        )
        engine.close()
    write_json(out, result)
    return 0


__all__ = ["main", "verify_batch", "workload"]


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``)."""
    read = res["answers_read"]
    out = (
        f"All 12 games, {res['answers']:,} model-like outputs: **{res['ours_answers_per_s']:,.0f} answers/s** from "
        f"empty caches ({res['paths']['rule']:,} decided by the rules, {res['paths']['game']:,} by a game's checker, "
        f"{res['paths']['none']:,} by nothing).\n\n"
    )
    if "decide_vs_rg_score" in res:
        out += (
            f"The same {res['rg_answers']:,} answers to reasoning-gym's {', '.join(res['rg_games'])} "
            f"({res['rg_rounds']} interleaved rounds, median):\n\n"
            "| what runs | reasoning-gym | agentkit | agentkit / reasoning-gym |\n|---|---|---|---|\n"
            f"| the scorer, on the answer `extract` read | {res['rg_score_answers_per_s']:,}/s | "
            f"{res['ours_decide_answers_per_s']:,}/s | **{res['decide_vs_rg_score']}×** |\n"
            f"| the whole output | {res['rg_pipeline_answers_per_s']:,}/s | {res['ours_verify_answers_per_s']:,}/s | "
            f"{res['verify_vs_rg_pipeline']}× |\n"
            f"| outputs whose answer was read | {read['rg_extract_answer']:.1%} | {read['ours']:.1%} | |\n\n"
            f"Full credit agrees on {res['full_credit_agreement']:.1%} of the answers."
        )
    if "judge_answers_per_s" in res:
        out += (
            f" The judge ({res['judge_model']}): {res['judge_answers_per_s']:.1f} answers/s, agreeing with the rules on "
            f"{res['judge_agreement_with_rules']:.0%}; the rules are {res['rules_vs_judge_speedup']:,.0f}× faster."
        )
    return out


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read (higher is better)."""
    out = {}
    if "decide_vs_rg_score" in res:
        out["same answers: rules here / reasoning-gym's scorers"] = (res["decide_vs_rg_score"], "higher")
        out["whole outputs: verify / reasoning-gym's pipeline"] = (res["verify_vs_rg_pipeline"], "higher")
    if "rules_vs_judge_speedup" in res:
        out["rules / judge model (answers/s)"] = (res["rules_vs_judge_speedup"], "higher")
    return out


HELP = "Game-RL answer verification/s: rules vs reasoning-gym and a judge model"


def add_arguments(parser) -> None:
    """``agentkit bench gamerl-verify``'s options: ``main``'s parameters."""
    parser.add_argument("--answers", type=POS_INT, default=20000, help="model-like outputs verified by the rules")
    parser.add_argument(
        "--judge-answers", type=NONNEG_INT, default=32, help="of them, also judged by the model (0: skip)"
    )
    add_model_option(parser, "the judge")
    add_out_option(parser)
