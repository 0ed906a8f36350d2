"""``agentkit bench uncertainty``: scoring saved generations, vectorised against a plain per-pair Python loop.

Synthetic generations (seeded): ``questions`` rows × 2 models × ``samples`` short answers in a few phrasings,
some right, some wrong. Both sides start from the same embeddings (each unique text embedded once) and compute
the same quantities: AU, EU, TU, the lexical ROUGE-L baseline, NumSemSets, EigValLaplacian and Degree. The loop
computes each pair's similarity and each formula in Python; ``agentkit.uncertainty`` does it in batched numpy
(and rapidfuzz for LCS); the results agree to float precision (reported). A second comparison includes the
similarity: a plain ``sim(a, b)`` that embeds its two texts for every pair, against embedding each unique text
once. The whole ``score`` run (reading, embedding, estimators, metrics, report) is timed too.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

import numpy as np

import agentkit.uncertainty.similarity as sim_mod
from agentkit.argtypes import POS_INT, number
from agentkit.command import add_out_option
from agentkit.eval.bench import write_json
from agentkit.models.catalog import resolve
from agentkit.uncertainty.score import ScoreConfig, compute_scores, prepare, score
from agentkit.uncertainty.similarity import embed_texts, tokens

_FORMS = ["{}", "The answer is {}.", "I think it is {}.", "{}, I believe.", "It's {}", "Answer: {}"]


def synthetic_rows(questions: int, samples: int, seed: int = 0) -> list[dict]:
    r = random.Random(seed)
    rows = []
    for q in range(questions):
        gold = str(r.randint(10, 999))
        wrong = [str(r.randint(10, 999)) for _ in range(3)]
        skill = {"ref": r.random(), "member": r.random()}
        out = {}
        for m, p in (("ref", skill["ref"]), ("member", skill["member"])):
            fixed = r.choice(wrong)  # a confident error repeats the same wrong answer
            out[m] = [
                r.choice(_FORMS).format(gold if r.random() < p else (fixed if r.random() < 0.6 else r.choice(wrong)))
                for _ in range(samples)
            ]
        rows.append(
            {
                "id": f"q{q}",
                "question": f"Question {q}?",
                "reference": gold,
                "task": f"t{q % 4}",
                "metric": "numeric",
                "samples": out,
            }
        )
    return rows


def _lcs(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def _cross_terms(out: dict, ref: list, oth: list, sim) -> None:
    """Append one question's AU, EU and TU, pair by pair."""
    intra = [sim(ref[i], ref[j]) for i in range(len(ref)) for j in range(i + 1, len(ref))]
    inter = [sim(a, b) for a in ref for b in oth]
    s_in, s_x = sum(intra) / len(intra), sum(inter) / len(inter)
    out["AU"].append(1 - s_in)
    out["EU"].append(s_in - s_x)
    out["TU"].append(1 - s_x)


def loop_scores(texts: list[str], E: np.ndarray, index: np.ndarray, member: np.ndarray, thr: float) -> dict:
    """The same estimators, one pair and one question at a time in Python."""
    out = {k: [] for k in ("AU", "EU", "TU", "Lexical(ROUGE-L)", "NumSemSets", "EigValLaplacian", "Degree")}
    for q in range(len(index)):
        ref = [int(i) for i, m in zip(index[q], member[q]) if m == 0]
        oth = [int(i) for i, m in zip(index[q], member[q]) if m >= 1]

        def sim(a, b):
            return 1.0 if a == b else max(0.0, min(1.0, float(np.dot(E[a], E[b]))))

        _cross_terms(out, ref, oth, sim)
        toks = [tokens(texts[i]) for i in ref]
        lex = [
            2 * _lcs(toks[i], toks[j]) / max(len(toks[i]) + len(toks[j]), 1)
            for i in range(len(ref))
            for j in range(i + 1, len(ref))
        ]
        out["Lexical(ROUGE-L)"].append(1 - sum(lex) / len(lex))
        k = len(ref)
        W = [[sim(ref[i], ref[j]) for j in range(k)] for i in range(k)]
        parent = list(range(k))

        def find(i, parent=parent):
            while parent[i] != i:
                i = parent[i]
            return i

        for i in range(k):
            for j in range(k):
                if W[i][j] >= thr:
                    parent[find(i)] = find(j)
        out["NumSemSets"].append(float(len({find(i) for i in range(k)})))
        deg = [sum(row) for row in W]
        L = np.array(
            [[(1.0 if i == j else 0.0) - W[i][j] / (deg[i] * deg[j]) ** 0.5 for j in range(k)] for i in range(k)]
        )
        out["EigValLaplacian"].append(sum(max(0.0, 1 - lam) for lam in np.linalg.eigvalsh(L)))
        out["Degree"].append(1 - sum(deg) / (k * k))
    return {k: np.array(v) for k, v in out.items()}


def naive_pair_scores(texts: list[str], index: np.ndarray, member: np.ndarray, encode) -> dict:
    """AU / EU / TU with ``sim(a, b)`` as a plain function of two texts: it embeds both, every pair."""
    out = {"AU": [], "EU": [], "TU": []}
    for q in range(len(index)):
        ref = [texts[i] for i, m in zip(index[q], member[q]) if m == 0]
        oth = [texts[i] for i, m in zip(index[q], member[q]) if m >= 1]

        def sim(a, b):
            ea, eb = encode([a, b])
            return max(0.0, min(1.0, float(np.dot(ea, eb))))

        _cross_terms(out, ref, oth, sim)
    return {k: np.array(v) for k, v in out.items()}


def run(questions: int = 2000, samples: int = 5, naive_questions: int = 100) -> dict:
    rows = synthetic_rows(questions, samples)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gens.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        cfg = ScoreConfig()
        t = time.perf_counter()
        res = score(path, cfg, Path(tmp) / "report", progress=False)
        total = time.perf_counter() - t
        p = prepare(path, cfg)
    t = time.perf_counter()
    E = embed_texts(p.texts)
    embed_s = time.perf_counter() - t
    # Vectorised, embeddings given: swap in a cached embedder so only the scoring stage is timed.

    real = sim_mod.embed_texts
    sim_mod.embed_texts = lambda texts, *a, **k: E
    try:
        t = time.perf_counter()
        fast, _ = compute_scores(p, cfg)
        fast_s = time.perf_counter() - t
    finally:
        sim_mod.embed_texts = real
    t = time.perf_counter()
    slow = loop_scores(p.texts, E, p.index, p.member, 0.9)
    loop_s = time.perf_counter() - t
    diff = max(float(np.max(np.abs(fast[k] - slow[k]))) for k in slow)
    # The plain pipeline, similarity included: sim(a, b) embeds its two texts, pair by pair. Too slow to run on
    # every question, so it runs on the first `naive_questions` and its time is scaled by questions (the rows
    # are alike); our side of that comparison is the measured embedding + scoring of all questions.
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(resolve("minilm-l6")), device="cpu")
    nq = min(naive_questions, questions)
    t = time.perf_counter()
    naive = naive_pair_scores(
        p.texts,
        p.index[:nq],
        p.member[:nq],
        lambda pair: model.encode(pair, normalize_embeddings=True, show_progress_bar=False),
    )
    naive_s = (time.perf_counter() - t) * questions / nq
    naive_diff = max(float(np.max(np.abs(naive[k] - fast[k][:nq]))) for k in naive)
    ours_s = embed_s + fast_s
    return {
        "questions": questions,
        "models": 2,
        "samples": samples,
        "unique_texts": len(p.texts),
        "embedding_s": round(embed_s, 2),
        "vectorised_s": round(fast_s, 3),
        "per_pair_loop_s": round(loop_s, 3),
        "speedup": round(loop_s / fast_s, 1),
        "max_abs_difference": diff,
        "naive_questions_run": nq,
        "naive_pipeline_s_scaled": round(naive_s, 1),
        "ours_embed_plus_score_s": round(ours_s, 2),
        "pipeline_speedup": round(naive_s / ours_s, 1),
        "naive_max_abs_difference": naive_diff,
        "whole_score_run_s": round(total, 2),
        "timing": res["timing"],
    }


def main(questions: int = 2000, samples: int = 5, out: str | None = None) -> int:
    res = run(questions, samples)
    print(json.dumps(res, indent=2))
    print(
        f"\n{questions} questions x 2 models x {samples} samples: estimators {res['vectorised_s']} s vectorised vs "
        f"{res['per_pair_loop_s']} s per-pair loop on the same embeddings ({res['speedup']}x; max |diff| "
        f"{res['max_abs_difference']:.1e})"
    )
    print(
        f"similarity included: embed each unique text once + vectorised {res['ours_embed_plus_score_s']} s vs a "
        f"per-pair sim(a, b) that embeds both texts {res['naive_pipeline_s_scaled']} s (run on "
        f"{res['naive_questions_run']} questions, scaled): {res['pipeline_speedup']}x"
    )
    print(f"whole score run {res['whole_score_run_s']} s (embedding {res['embedding_s']} s)")
    write_json(out, res)
    return 0


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``)."""
    return (
        "| what is timed | agentkit | per-pair Python loop | ratio |\n|---|---|---|---|\n"
        f"| the seven estimators, from the same embeddings | {res['vectorised_s']} s | {res['per_pair_loop_s']} s | "
        f"{res['speedup']}× |\n"
        f"| AU/EU/TU with the similarity: embed each unique text once + batched matmul vs `sim(a, b)` per pair "
        f"| {res['ours_embed_plus_score_s']} s | {res['naive_pipeline_s_scaled']:,} s | **{res['pipeline_speedup']}×** |\n"
        f"| the whole `score` run: read, embed, estimate, metrics, report | **{res['whole_score_run_s']} s** | | |\n\n"
        f"{res['questions']:,} questions × {res['models']} models × {res['samples']} samples, {res['unique_texts']:,} "
        f"unique texts. The estimators agree with the loop to {res['max_abs_difference']:.0e}, the pipeline with "
        f"per-pair `sim` to {res['naive_max_abs_difference']:.0e} (run on {res['naive_questions_run']} questions and "
        f"scaled by {res['questions'] // res['naive_questions_run']})."
    )


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read (higher is better)."""
    return {
        "estimators: per-pair loop / vectorised": (res["speedup"], "higher"),
        "with similarity: per-pair sim / embed once": (res["pipeline_speedup"], "higher"),
    }


HELP = "scoring 2,000 questions x 2 models x 5 samples: vectorised vs a per-pair loop"


def add_arguments(parser) -> None:
    """``agentkit bench uncertainty``'s options: ``main``'s parameters."""
    parser.add_argument("--questions", type=POS_INT, default=2000, help="questions scored")
    parser.add_argument("--samples", type=number(int, 2), default=5, help="samples per question and model (at least 2)")
    add_out_option(parser)
