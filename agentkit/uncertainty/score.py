"""``agentkit uncertainty score``: AU / EU / TU and the black-box baselines on saved generations, with labels,
metrics, a per-task breakdown, the confident-failure diagnostic, plots and ``report.md`` / ``metrics.json``."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from agentkit.config import Fraction, NonNegInt, PosInt
from agentkit.errors import AgentkitError
from agentkit.eval.metrics import exact_match, extract_answer, normalize_answer, numeric_match, token_f1
from agentkit.files import atomic_write
from agentkit.plots import pyplot
from agentkit.uncertainty.estimators import all_estimators
from agentkit.uncertainty.metrics import rejection_curve, reliability, summarize, to_confidence
from agentkit.uncertainty.schema import BadRow, GenerationRow, Skipped, iter_generations
from agentkit.uncertainty.similarity import pairwise_rouge_l, similarity_matrices, tokens

LABELS = ("auto", "em", "f1", "numeric", "contains")


@dataclass
class ScoreConfig:
    """How to score saved generations.

    reference_model: the model whose answers are judged (AU, baselines); default: the first model of the first
    row. models: the ensemble (reference + members); default: every model of the first row.
    similarity: embedding | rougeL | exact | nli. text: compare the ``full`` samples (the paper) or the
    extracted ``answer``. label: how correctness is judged against the reference: auto (numeric for numeric
    tasks, contains otherwise), em, f1 (≥ f1_threshold), numeric, contains. inter / clip_eu: see
    ``agentkit.uncertainty.estimators``. sets_threshold: similarity at which two samples share a semantic set.
    low_au_quantile / eu_flag_quantile: the confident-failure diagnostic (see ``confident_failures``).
    bootstrap: resamples of the questions for the 95 % intervals of AUROC, PRR and AURAC (0: none).
    """

    reference_model: str | None = None
    models: list[str] | None = None
    similarity: Literal["embedding", "rougeL", "exact", "nli"] = "embedding"
    text: Literal["full", "answer"] = "full"
    label: Literal["auto", "em", "f1", "numeric", "contains"] = "auto"
    f1_threshold: Fraction = 0.5
    inter: Literal["pooled", "member"] = "pooled"
    clip_eu: bool = False
    sets_threshold: Fraction | None = None
    nli_model: str | None = None
    embedder: str = "minilm-l6"
    low_au_quantile: Fraction = 0.5
    eu_flag_quantile: Fraction = 0.5
    skip_bad: bool = False
    bins: PosInt = 10
    bootstrap: NonNegInt = 1000


def answer_of(row: GenerationRow, model: str) -> str:
    """The answer a model is judged on: its greedy answer, else its first sample."""
    return row.greedy.get(model) or row.samples[model][0]


def judge(row: GenerationRow, prediction: str, label: str, f1_threshold: float) -> float:
    gold = row.reference or ""
    if label == "auto":
        label = "numeric" if row.metric == "numeric" else "contains"
    if label == "numeric":
        return numeric_match(prediction, gold)
    if label == "em":
        return exact_match(extract_answer(prediction), gold)
    if label == "f1":
        return float(token_f1(extract_answer(prediction), gold) >= f1_threshold)
    if label == "contains":
        g = normalize_answer(gold)
        return float(bool(g) and f" {g} " in f" {normalize_answer(prediction)} ")
    raise AgentkitError(f"unknown label {label!r}", f"choose from {', '.join(LABELS)}")


@dataclass
class Prepared:
    rows: list[GenerationRow]
    texts: list[str]
    index: np.ndarray  # [Q, N] into texts, -1 padding
    member: np.ndarray  # [Q, N]
    correct: np.ndarray  # [Q]
    models: list[str]
    reference: str
    skipped: Skipped


def prepare(path: str | Path, cfg: ScoreConfig) -> Prepared:
    """Stream the rows, check each against the ensemble, intern unique texts and judge the answers."""
    skipped = Skipped()
    rows: list[GenerationRow] = []
    models = list(cfg.models) if cfg.models else None
    ref = cfg.reference_model
    texts: dict[str, int] = {}
    slots: list[list[int]] = []
    members: list[list[int]] = []
    correct: list[float] = []
    for where, row in iter_generations(path, skip_bad=cfg.skip_bad, skipped=skipped):
        if models is None:
            models = list(row.samples)
            if ref and ref not in models:
                raise AgentkitError(
                    f"{where}: the reference model {ref!r} is not in the row's samples ({', '.join(models)})",
                    "pass --reference-model with one of them",
                )
        if ref is None:
            ref = models[0]
        if ref not in models:
            models = [ref, *models]
        if len(set(models)) < 2:
            raise AgentkitError(
                f"the ensemble is only the reference model {ref!r}",
                "cross-model EU needs a second model: name it in --models, or score a file with "
                "samples of several models",
            )
        try:
            for m in models:
                got = row.samples.get(m)
                if got is None:
                    raise BadRow(where, f"samples.{m}", "this model is missing from the row")
                need = 2 if m == ref else 1
                if len(got) < need:
                    raise BadRow(
                        where,
                        f"samples.{m}",
                        f"{len(got)} sample(s); the {'reference' if m == ref else 'member'}"
                        f" model needs at least {need}",
                    )
            if row.reference is None:
                raise BadRow(where, "reference", "missing: correctness cannot be judged")
        except BadRow as e:
            if not cfg.skip_bad:
                raise
            skipped.add(e)
            continue
        ids, mem = [], []
        for k, m in enumerate([ref] + [x for x in models if x != ref]):
            for t in row.samples[m]:
                t = extract_answer(t) if cfg.text == "answer" else t
                ids.append(texts.setdefault(t, len(texts)))
                mem.append(k)
        slots.append(ids)
        members.append(mem)
        correct.append(judge(row, answer_of(row, ref), cfg.label, cfg.f1_threshold))
        rows.append(row)
    if not rows:
        raise AgentkitError(
            f"{path}: no usable rows" + (f" ({skipped.count} skipped)" if skipped.count else ""), "check the file"
        )
    n = max(len(s) for s in slots)
    index = np.full((len(rows), n), -1, dtype=np.int64)
    member = np.full((len(rows), n), -1, dtype=np.int64)
    for q, (s, m) in enumerate(zip(slots, members)):
        index[q, : len(s)], member[q, : len(m)] = s, m
    return Prepared(rows, list(texts), index, member, np.array(correct), models or [], ref or "", skipped)


def compute_scores(p: Prepared, cfg: ScoreConfig, progress: bool = False) -> tuple[dict[str, np.ndarray], dict]:
    """Every estimator's scores on prepared generations.

    Args:
        p: the generations, judged and indexed (``prepare``).
        cfg: the similarity, the estimators' options.
        progress: progress bars while similarities are computed.

    Returns:
        ``(estimator name → scores [Q], seconds per stage and the unique-text count)``.
    """
    t0 = time.perf_counter()
    sim = similarity_matrices(
        p.texts, p.index, cfg.similarity, embedder=cfg.embedder, nli_model=cfg.nli_model, progress=progress
    )
    t1 = time.perf_counter()
    if cfg.similarity == "rougeL":
        lexical = sim
    else:  # ROUGE-L among the reference samples only (the lexical baseline needs nothing else)
        ref = p.member == 0
        upper = np.triu(np.ones((p.index.shape[1],) * 2, dtype=bool), 1)
        lexical = pairwise_rouge_l([tokens(t) for t in p.texts], p.index, ref[:, :, None] & ref[:, None, :] & upper)
    t2 = time.perf_counter()
    stats = {"sim": sim, "member": p.member, "lexical": lexical}
    thr = cfg.sets_threshold if cfg.sets_threshold is not None else {"exact": 1.0, "nli": 0.5}.get(cfg.similarity, 0.9)
    scores = {
        name: np.asarray(est(stats), dtype=float) for name, est in all_estimators(cfg.inter, cfg.clip_eu, thr).items()
    }
    t3 = time.perf_counter()
    return scores, {
        "similarity_s": round(t1 - t0, 3),
        "lexical_s": round(t2 - t1, 3),
        "estimators_s": round(t3 - t2, 3),
        "unique_texts": len(p.texts),
    }


def confident_failures(
    correct: np.ndarray, au: np.ndarray, eu: np.ndarray, low_au_q: float = 0.5, eu_q: float = 0.5
) -> dict[str, Any]:
    """Errors the self-consistency signal misses, and how many of them EU flags.

    Low AU: AU ≤ its ``low_au_q`` quantile over all questions (< when that quantile is the maximum, e.g. when
    most questions have AU 1, so that "low" never means "all"). EU flags: EU > its ``eu_q`` quantile. The flag
    rate among confident *failures* is compared with the rate among confident *correct* answers: EU helps
    when the first is higher.
    """
    thr = np.quantile(au, low_au_q)
    low = au < thr if thr >= au.max() else au <= thr
    flag = eu > np.quantile(eu, eu_q)
    fail, ok = low & (correct == 0), low & (correct == 1)
    err = correct == 0
    au_flag = ~low

    def rate(m):
        return float(flag[m].mean()) if m.any() else float("nan")

    return {
        "low_au_threshold": float(thr),
        "eu_flag_threshold": float(np.quantile(eu, eu_q)),
        "confident_failures": int(fail.sum()),
        "confident_failures_flagged_by_eu": int((fail & flag).sum()),
        "eu_flag_rate_confident_failures": rate(fail),
        "eu_flag_rate_confident_correct": rate(ok),
        "errors": int(err.sum()),
        "errors_flagged_by_eu_not_au": int((err & flag & ~au_flag).sum()),
        "share_errors_flagged_by_eu_not_au": float((err & flag & ~au_flag).sum() / max(err.sum(), 1)),
    }


def evaluate(p: Prepared, scores: dict[str, np.ndarray], cfg: ScoreConfig) -> dict[str, Any]:
    from scipy.stats import spearmanr

    c = p.correct
    per_task: dict[str, Any] = {}
    tasks = np.array([r.task or "all" for r in p.rows])
    for t in sorted(set(tasks)):
        m = tasks == t
        per_task[t] = {
            "n": int(m.sum()),
            "accuracy": float(c[m].mean()),
            **{name: summarize(c[m], s[m], cfg.bins)["auroc"] for name, s in scores.items()},
        }
    rho = spearmanr(scores["AU"], scores["EU"]).statistic
    model_accuracy = {  # each model's own answers judged as the reference's are (how far apart the ensemble is)
        m: float(np.mean([judge(r, answer_of(r, m), cfg.label, cfg.f1_threshold) for r in p.rows])) for m in p.models
    }
    return {
        "questions": len(c),
        "accuracy": float(c.mean()),
        "reference_model": p.reference,
        "models": p.models,
        "model_accuracy": model_accuracy,
        "similarity": cfg.similarity,
        "skipped": {"count": p.skipped.count, "reasons": dict(p.skipped.reasons), "examples": p.skipped.examples},
        "estimators": {name: summarize(c, s, cfg.bins, cfg.bootstrap) for name, s in scores.items()},
        "per_task_auroc": per_task,
        "au_eu_spearman": float(rho) if rho == rho else float("nan"),
        "confident_failures": confident_failures(
            c, scores["AU"], scores["EU"], cfg.low_au_quantile, cfg.eu_flag_quantile
        ),
        "au_eu": {"AU": scores["AU"].tolist(), "EU": scores["EU"].tolist(), "correct": c.tolist()},
        "curves": {
            name: {
                "rejection": rejection_curve(c, s).tolist(),
                "reliability": reliability(c, to_confidence(s), cfg.bins),
            }
            for name, s in scores.items()
        },
    }


def write_report(out: Path, res: dict[str, Any], cfg: ScoreConfig, source: str) -> None:
    plt = pyplot()

    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, cur in res["curves"].items():
        r = cur["rejection"]
        ax.plot(
            np.arange(len(r)) / len(r),
            r,
            label=f"{name} ({res['estimators'][name]['aurac']:.3f})",
            lw=2.2 if name in ("AU", "TU") else 1.2,
        )
    ax.axhline(res["accuracy"], color="grey", ls=":", label="random")
    ax.set_xlabel("rejection rate (most uncertain first)")
    ax.set_ylabel("accuracy of the kept answers")
    ax.set_title("Accuracy–rejection (AURAC in brackets)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "abstention.png", dpi=120)
    plt.close(fig)
    shown = [n for n in ("AU", "TU", "Degree") if n in res["curves"]]
    fig, axes = plt.subplots(1, len(shown), figsize=(3.2 * len(shown), 3.2), squeeze=False)
    for ax, name in zip(axes[0], shown):
        rel = res["curves"][name]["reliability"]
        ax.plot([0, 1], [0, 1], color="grey", ls=":")
        ax.bar(rel["centre"], rel["accuracy"], width=0.9 / cfg.bins, alpha=0.7, label="accuracy per bin")
        ax.plot(rel["confidence"], rel["accuracy"], "o", color="C1", ms=3, label="at mean confidence")
        ax.set_title(f"{name}: ECE {res['estimators'][name]['ece']:.3f}")
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "reliability.png", dpi=120)
    plt.close(fig)

    pts = res["au_eu"]
    fig, ax = plt.subplots(figsize=(4.6, 4))
    au, eu, ok = (np.asarray(pts[k], dtype=float) for k in ("AU", "EU", "correct"))
    for mask, label, color in ((ok == 1, "correct", "C2"), (ok == 0, "wrong", "C3")):
        ax.scatter(au[mask], eu[mask], s=10, alpha=0.6, color=color, label=f"{label} ({int(mask.sum())})")
    cf = res["confident_failures"]
    ax.axvline(cf["low_au_threshold"], color="grey", ls=":", lw=1)
    ax.axhline(cf["eu_flag_threshold"], color="grey", ls=":", lw=1)
    ax.set_xlabel("AU (1 − self-consistency)")
    ax.set_ylabel("EU (cross-model disagreement)")
    ax.set_title("Per question; dotted: the diagnostic's thresholds", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "au_eu.png", dpi=120)
    plt.close(fig)

    def f(x):
        return "–" if x != x else f"{x:.3f}"

    def ci(m, key):
        lo, hi = m.get(f"{key}_ci", (float("nan"), float("nan")))
        return f(m[key]) if lo != lo else f"{f(m[key])} [{lo:.2f}, {hi:.2f}]"

    lines = [
        f"# Uncertainty on `{source}`",
        "",
        f"{res['questions']} questions; reference model `{res['reference_model']}` (accuracy "
        f"{res['accuracy']:.1%}); ensemble {', '.join(f'`{m}`' for m in res['models'])}; similarity "
        f"`{res['similarity']}`." + (f" Skipped rows: {res['skipped']['count']}." if res["skipped"]["count"] else ""),
        "Each model's accuracy (its greedy answer, judged as the reference's): "
        + ", ".join(f"`{m}` {a:.1%}" for m, a in res.get("model_accuracy", {}).items())
        + ".",
        "",
        "| estimator | AUROC ↑ | PRR ↑ | AURAC ↑ | ECE ↓ |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {n} | {ci(m, 'auroc')} | {ci(m, 'prr')} | {ci(m, 'aurac')} | {f(m['ece'])} |"
        for n, m in res["estimators"].items()
    ]
    if cfg.bootstrap:
        lines += ["", f"Brackets: 95 % bootstrap intervals over {cfg.bootstrap} resamples of the questions."]
    cf = res["confident_failures"]
    lines += [
        "",
        "## Confident failures",
        "",
        f"Errors with low AU (AU ≤ {cf['low_au_threshold']:.3f}): **{cf['confident_failures']}**, of which EU "
        f"flags {cf['confident_failures_flagged_by_eu']} (flag rate {f(cf['eu_flag_rate_confident_failures'])}"
        f" vs {f(cf['eu_flag_rate_confident_correct'])} on confident correct answers). Errors flagged by EU "
        f"but not AU: {cf['errors_flagged_by_eu_not_au']} of {cf['errors']}. Spearman ρ(AU, EU) = "
        f"{f(res['au_eu_spearman'])}. Share of all errors caught by EU alone (EU above its flag threshold, AU "
        f"at or below its low threshold): {f(cf['share_errors_flagged_by_eu_not_au'])}.",
        "",
        "![AU against EU per question](au_eu.png)",
        "",
        "## AUROC per task",
        "",
    ]
    names = list(res["estimators"])
    lines += ["| task | n | accuracy | " + " | ".join(names) + " |", "|---" * (len(names) + 3) + "|"]
    lines += [
        f"| {t} | {v['n']} | {v['accuracy']:.2f} | " + " | ".join(f(v[n]) for n in names) + " |"
        for t, v in res["per_task_auroc"].items()
    ]
    lines += [
        "",
        "![accuracy-rejection](abstention.png)",
        "",
        "![reliability](reliability.png)",
        "",
        "## Config",
        "",
        "```json",
        json.dumps(asdict(cfg), indent=2),
        "```",
        "",
    ]
    atomic_write(out / "report.md", "\n".join(lines))
    atomic_write(out / "metrics.json", json.dumps(res, indent=2, default=float))


def score(path: str | Path, cfg: ScoreConfig, out: str | Path | None = None, progress: bool = True) -> dict:
    """Score a file of saved generations (``agentkit uncertainty score``).

    Args:
        path: the saved generations (JSONL, Parquet or a saved dataset; ``agentkit.uncertainty.schema``).
        cfg: the similarity, the label rule, the estimators' options.
        out: a folder for ``report.md``, ``metrics.json``, ``scores.jsonl`` and plots (None: nothing written).
        progress: progress bars.

    Returns:
        The metrics: each estimator's AUROC, PRR and AURAC (with intervals), the confident-failure analysis,
        the timing.

    Raises:
        AgentkitError: a malformed generations file (one line naming the row and field).
    """
    t0 = time.perf_counter()
    p = prepare(path, cfg)
    scores, timing = compute_scores(p, cfg, progress)
    res = evaluate(p, scores, cfg)
    res["timing"] = {**timing, "total_s": round(time.perf_counter() - t0, 3)}
    if out is not None:
        from agentkit.data.tasks import write_jsonl

        write_report(Path(out), res, cfg, str(path))
        write_jsonl(
            Path(out) / "scores.jsonl",
            [
                {
                    "id": r.id,
                    "task": r.task,
                    "correct": float(p.correct[q]),
                    **{n: float(s[q]) for n, s in scores.items()},
                }
                for q, r in enumerate(p.rows)
            ],
        )
    return res
