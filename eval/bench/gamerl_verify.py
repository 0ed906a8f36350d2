"""``agentkit bench gamerl-verify``: rule-first verification throughput, beside reasoning-gym's own scorers and the
judge model Game-RL's official reward calls for every answer.

Workload (seeded): ``answers`` model-like outputs over every built-in game at all levels, fill-in and multiple
choice: the gold answer in varied wrappers (``<answer>``, ``\\boxed{}``, GameQA's ``###``, "The answer is …", a
bare last line), distractors, and prose no rule can read. Timed: ``verify`` on all of them (dataset generation
not included; answers that need the game's checker run its solver; parses and solver results are memoised, as in
training, where each gold is verified against G samples, and the caches start empty). Beside it, in the same process:

- reasoning-gym's ``score_answer`` on as many outputs for its own game datasets (the peer's rule path);
- the judge (``Judge`` on the embedded chat model, greedy, constrained to Yes / No) on ``judge_answers`` of the
  same outputs: what the official reward pays per answer, and how often a small judge agrees with the rules.
"""

from __future__ import annotations

import random
import time

from agentkit.argtypes import NONNEG_INT, POS_INT
from agentkit.command import add_model_option, add_out_option
from agentkit.eval.bench import write_json
from agentkit.gamerl import GAMES, create_dataset
from agentkit.gamerl.verifiers import Judge, clear_caches, verify, verify_batch

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


def _rg_workload(answers: int, seed: int) -> list[tuple] | None:
    try:
        import reasoning_gym as rg
    except ImportError:
        return None
    names = ["maze", "mini_sudoku", "tower_of_hanoi", "n_queens", "tsumego"]
    sets = {n: rg.create_dataset(n, size=20, seed=seed) for n in names}
    held = {n: list(ds) for n, ds in sets.items()}  # its entries are generated on access: once, untimed
    rng = random.Random(seed)
    triples = []
    for _ in range(answers):
        n = rng.choice(names)
        e = rng.choice(held[n])
        triples.append((sets[n], e["answer"] if rng.random() < 0.5 else "1", e))
    return triples


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
    rg = _rg_workload(answers, 0)
    if rg is not None:
        t0 = time.perf_counter()
        for ds, ans, e in rg:
            ds.score_answer(ans, e)
        peer = time.perf_counter() - t0
        result["reasoning_gym_answers_per_s"] = answers / peer
        print(f"reasoning-gym score_answer (its maze, mini_sudoku, hanoi, n-queens, tsumego): {answers / peer:,.0f}/s")
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


HELP = "Game-RL answer verification/s: rules vs reasoning-gym and a judge model"


def add_arguments(parser) -> None:
    """``agentkit bench gamerl-verify``'s options: ``main``'s parameters."""
    parser.add_argument("--answers", type=POS_INT, default=20000, help="model-like outputs verified by the rules")
    parser.add_argument(
        "--judge-answers", type=NONNEG_INT, default=32, help="of them, also judged by the model (0: skip)"
    )
    add_model_option(parser, "the judge")
    add_out_option(parser)
