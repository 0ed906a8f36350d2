"""``agentkit uncertainty generate|score``: black-box uncertainty on saved generations."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentkit.argtypes import NONNEG_FLOAT, NONNEG_INT, POS_INT, TOP_P, number
from agentkit.command import Command
from agentkit.errors import AgentkitError


class UncertaintyCommand(Command):
    name = "uncertainty"
    help = "black-box uncertainty (AU, cross-model EU, TU) on saved generations"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        u = parser.add_subparsers(dest="action", required=True)
        g = u.add_parser(
            "generate",
            help="sample K answers per question from several models",
            description=(
                "Sample --samples answers per question (plus one greedy answer, the one judged) from each model and save "
                "one row per question. Models: catalog names or paths (embedded engine), vllm:NAME, openai:NAME@URL "
                "(key from OPENAI_API_KEY), mixed; NAME=SPEC saves one under NAME; @ensemble.json stands for the models "
                "the uncertainty_ensemble recipe trained. Rerunning the same command resumes an interrupted run."
            ),
        )
        g.add_argument(
            "--models",
            required=True,
            help="comma-separated model specs, e.g. smollm2-135m,gemma3-270m, or @RUN/ensemble.json",
        )
        g.add_argument(
            "--tasks",
            required=True,
            help="FILE.jsonl (id, question, answer[, kind, metric]) or suites "
            "NAME[:N] joined by commas: arithmetic, arithmetic-easy, multihop, multihop-open",
        )
        g.add_argument(
            "--samples",
            type=number(int, 2),
            default=5,
            help="sampled answers per question and model (AU needs at least 2)",
        )
        g.add_argument("--temperature", type=NONNEG_FLOAT, default=0.7, help="sampling temperature")
        g.add_argument("--top-p", type=TOP_P, default=1.0, help="nucleus sampling mass")
        g.add_argument("--max-tokens", type=POS_INT, default=24, help="tokens per answer")
        g.add_argument("--seed", type=int, default=0, help="seed of the suites and of sampling")
        g.add_argument("--no-few-shot", action="store_true", help="do not show worked examples before each question")
        g.add_argument("--out", required=True, help="GENS.jsonl, GENS.parquet, or a directory for an HF dataset")
        s = u.add_parser(
            "score",
            help="AU / EU / TU and baselines, metrics and a report",
            description=(
                "Score saved generations (JSONL, Parquet or an HF dataset directory; see `agentkit.uncertainty.schema`). "
                "Writes report.md (tables, accuracy-rejection and reliability plots), metrics.json and scores.jsonl."
            ),
        )
        s.add_argument("generations", help="GENS.jsonl, GENS.parquet or a saved HF dataset directory")
        s.add_argument("--reference-model", help="the model whose answers are judged (default: the first in the file)")
        s.add_argument("--models", help="ensemble, comma-separated (default: every model in the file)")
        s.add_argument(
            "--similarity",
            default="embedding",
            choices=["embedding", "nli", "rougeL", "exact"],
            help="how two samples are compared",
        )
        s.add_argument("--nli-model", help="path or hub id of an NLI cross-encoder (for --similarity nli)")
        s.add_argument(
            "--text",
            default="full",
            choices=["full", "answer"],
            help="compare whole samples (the paper) or their extracted answers",
        )
        s.add_argument(
            "--label",
            default="auto",
            choices=["auto", "em", "f1", "numeric", "contains"],
            help="correctness against the reference (auto: numeric tasks numerically, else contains)",
        )
        s.add_argument("--inter", default="pooled", choices=["pooled", "member"], help="how cross-model pairs average")
        s.add_argument("--clip-eu", action="store_true", help="clip EU at 0")
        s.add_argument("--skip-bad", action="store_true", help="skip malformed rows (counted in the report)")
        s.add_argument(
            "--bootstrap",
            type=NONNEG_INT,
            default=1000,
            help="resamples of the questions for 95%% intervals of AUROC, PRR and AURAC; 0: none (default: 1000)",
        )
        s.add_argument("--out", help="report directory (default: GENERATIONS.uncertainty/)")
        s.add_argument(
            "--force", action="store_true", help="write into --out even if another command's files are there"
        )

    def run(self, args: argparse.Namespace) -> int:
        if args.action == "generate":
            from agentkit.engines.base import SamplingParams
            from agentkit.uncertainty.generate import generate, load_tasks

            out = generate(
                args.models.split(","),
                load_tasks(args.tasks, args.seed),
                args.out,
                SamplingParams(
                    n=args.samples,
                    temperature=args.temperature,
                    top_p=args.top_p,
                    max_tokens=args.max_tokens,
                    seed=args.seed,
                ),
                few_shot=not args.no_few_shot,
            )
            print(f"saved generations: {out}")
            return 0
        from agentkit.config import build_config
        from agentkit.uncertainty.score import ScoreConfig, score

        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
        if models is not None and len({*models, args.reference_model or models[0]}) < 2:
            raise AgentkitError(
                f"--models {args.models!r} is only the reference model",
                "cross-model EU needs a second model, e.g. --models smollm2-135m,gemma3-270m",
            )
        if not Path(args.generations).exists():
            raise AgentkitError(
                f"{args.generations} does not exist", "pass the file or directory `uncertainty generate` wrote"
            )
        cfg = build_config(
            ScoreConfig,
            {
                "reference_model": args.reference_model,
                "models": models,
                "similarity": args.similarity,
                "nli_model": args.nli_model,
                "text": args.text,
                "label": args.label,
                "inter": args.inter,
                "clip_eu": args.clip_eu,
                "skip_bad": args.skip_bad,
                "bootstrap": args.bootstrap,
            },
        )
        out = args.out or str(args.generations).rstrip("/") + ".uncertainty"
        from agentkit.files import claim_output_dir

        claim_output_dir(out, "uncertainty score", args.force)  # a re-score of the same file may write it again
        res = score(args.generations, cfg, out)
        print(
            f"{res['questions']} questions, reference {res['reference_model']} accuracy {res['accuracy']:.1%}"
            + (f", {res['skipped']['count']} rows skipped" if res["skipped"]["count"] else "")
        )
        print(f"{'estimator':18s} {'AUROC':>7s} {'PRR':>7s} {'AURAC':>7s} {'ECE':>7s}")
        for name, m in res["estimators"].items():
            print(f"{name:18s} " + " ".join(f"{m[k]:7.3f}" for k in ("auroc", "prr", "aurac", "ece")))
        print(f"report: {out}/report.md")
        return 0
