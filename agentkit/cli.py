"""The ``agentkit`` command. Bad input prints one ``error:`` line with the fix and exits 2 (``--debug``: traceback)."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from agentkit.ace import cli as ace_cli
from agentkit.agent.loop import TIR_TOKENS_PER_TURN
from agentkit.argtypes import NONNEG_FLOAT, NONNEG_INT, PORT, POS_FLOAT, POS_INT, TOP_P, number
from agentkit.config import build_config, describe
from agentkit.engines import make_engine
from agentkit.errors import AgentkitError
from agentkit.gamerl import cli as gamerl_cli
from agentkit.models.catalog import CATALOG, DEFAULT_CHAT_MODEL, _is_complete, materialize
from agentkit.revela import cli as revela_cli
from agentkit.runner import RECIPES, resolve_spec, run_recipe
from agentkit.tools import build_tools

EPILOG = """examples:
  agentkit run quickstart                          the embedded model on seeded arithmetic problems
  agentkit run quickstart --preset tiny --set num_problems=8
  agentkit run my_run.yaml --set engine.max_batch_size=32 --output-dir outputs/x
  agentkit run quickstart --resume                 continue the latest run that is not complete
  accelerate launch --config_file configs/accelerate/cpu.yaml -m agentkit run quickstart
  agentkit models list
  agentkit serve --model smollm2-135m --agent tir --tools python --api-key KEY
  agentkit tool-server python --port 8100 --api-key KEY
  agentkit bench engine
  agentkit bench sandbox
  agentkit bench agent
  agentkit bench serve
  agentkit bench structured
  agentkit bench tips-potentials
  agentkit bench rl-step
  agentkit bench ace
  agentkit bench revela
  agentkit bench gamerl-verify
  agentkit uncertainty generate --models smollm2-135m,gemma3-270m --tasks multihop-open:200 --out gens.jsonl
  agentkit uncertainty score gens.jsonl --similarity embedding
  agentkit revela eval debian --retriever DIR       nDCG@10 / Recall@100 / MRR of a retriever (or bm25)
  agentkit ace history playbook.json                every version of an ACE playbook; `ace rollback --to N`
  agentkit gamerl export maze,sokoban --images --out DIR     game questions as an HF dataset (GameQA schema)
  agentkit gamerl code2logic examples/code2logic/nim.py --out DIR    a new game's code → validated tasks
"""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``error: agentkit serve: argument --port: ... (see `agentkit serve --help`)``,
    exit 2 (argparse prints the whole usage first)."""

    def error(self, message: str):  # type: ignore[override]
        print(f"error: {self.prog}: {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


def _int_list(text: str) -> str:
    """A comma-separated list of positive integers (kept as text; the command splits it)."""
    for part in text.split(","):
        POS_INT(part.strip())
    return text


class _RunHelp(argparse.Action):
    """``agentkit run RECIPE --help``: the command's help, then every config key of RECIPE (nested ones dotted)
    with its type, its default (after the recipe's default.yaml) and its doc, as TRL's parser prints them."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.print_help()
        if getattr(namespace, "recipe", None):
            try:
                print("\n" + recipe_help(namespace.recipe))
            except AgentkitError as e:
                parser.error(str(e))
        parser.exit()


def recipe_help(spec: str) -> str:
    name, cls, layer = resolve_spec(spec)
    cfg = build_config(cls.config_cls, layer)
    lines = [f"config of recipe {name!r} (KEY: TYPE = DEFAULT; defaults < the recipe's YAML < --set KEY=VALUE):"]
    for key, tp, value, doc in describe(cfg):
        lines.append(f"  {key}: {tp} = {value!r}")
        if doc:
            lines += textwrap.wrap(doc, 110, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="agentkit",
        description="LLM agents and reasoning training.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser(
        "run",
        help="run a recipe",
        add_help=False,
        description=(
            "Run a recipe by name (config: the dataclass defaults < the recipe's default.yaml or --preset < --set) or "
            "from a YAML file whose 'recipe:' key names it. Writes outputs/<recipe>/<timestamp>/: config.yaml, "
            "metrics.jsonl, report.md with plots, state/ (checkpoints and finished work for --resume)."
        ),
    )
    r.add_argument(
        "-h",
        "--help",
        action=_RunHelp,
        nargs=0,
        help="show this help; after a recipe, also its config keys with types, defaults and docs",
    )
    r.add_argument("recipe", help="recipe name (see `agentkit recipes list`) or FILE.yaml")
    r.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, dotted for nested ones (repeatable)",
    )
    r.add_argument("--preset", help="use <recipe>/<PRESET>.yaml instead of default.yaml (e.g. tiny)")
    r.add_argument("--output-dir", help="the run directory (default outputs/<recipe>/<timestamp>)")
    r.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        metavar="RUN_DIR",
        help="continue an interrupted run: RUN_DIR, --output-dir, or the latest run of the recipe",
    )
    r.add_argument(
        "--force",
        action="store_true",
        help="with --resume: accept --set values that change the run's config (recorded in the run)",
    )
    r.add_argument("--quiet", action="store_true", help="no progress bars")

    rl = sub.add_parser("recipes", help="list recipes").add_subparsers(dest="action", required=True)
    rl.add_parser("list", help="registered recipes (built-in and from the agentkit.recipes entry point)")

    m = sub.add_parser("models", help="the model catalog").add_subparsers(dest="action", required=True)
    m.add_parser("list", help="name, family, parameters, installed or not, path")
    mp = m.add_parser("prepare", help="convert a catalog model into the safetensors cache now")
    mp.add_argument("name", help="catalog name (see `agentkit models list`)")

    sv = sub.add_parser(
        "serve",
        help="OpenAI-compatible API over an engine and agents",
        description=(
            "Serve GET /v1/models, POST /v1/chat/completions (streaming, tools, logprobs), POST /v1/completions and "
            "vLLM's POST /tokenize and /detokenize. With --agent tir, the model 'agentkit/tir' runs the tool loop "
            "server-side. Binds to 127.0.0.1 unless --host says otherwise; with --api-key (or AGENTKIT_API_KEY) every "
            "route but /health needs 'Authorization: Bearer KEY'."
        ),
    )
    sv.add_argument("--model", default=DEFAULT_CHAT_MODEL, help="catalog name, local dir or hub id")
    sv.add_argument(
        "--engine",
        default="hf",
        choices=["hf", "vllm", "openai"],
        help="hf: the embedded transformers engine; vllm: vLLM in this process (make setup-vllm); "
        "openai: another OpenAI-compatible server (--upstream) runs the model (default: hf)",
    )
    sv.add_argument(
        "--upstream",
        help="openai engine: the upstream's base URL, e.g. http://127.0.0.1:8001/v1 (its key: $OPENAI_API_KEY)",
    )
    sv.add_argument(
        "--tokenizer",
        help="openai engine: a local tokenizer of the upstream's model (default: the "
        "upstream's /tokenize and /detokenize)",
    )
    sv.add_argument(
        "--agent",
        choices=["tir", "ace"],
        help="also serve an agent: tir (the tool-using agent, 'agentkit/tir') or ace (answers with a playbook, "
        "'agentkit/ace'; needs --playbook)",
    )
    sv.add_argument("--playbook", help="ace: the playbook's JSON file (created empty with --learn)")
    sv.add_argument("--learn", action="store_true", help="ace: update the playbook from feedback in requests")
    sv.add_argument("--top-k", type=NONNEG_INT, default=0, help="ace: send the k nearest bullets (0: all)")
    sv.add_argument("--tools", default="python", help="agent tools, comma-separated: python,search")
    sv.add_argument("--corpus", help="search tool: JSONL of {id, title, text}")
    sv.add_argument("--host", default="127.0.0.1", help="interface to bind (loopback unless you say otherwise)")
    sv.add_argument("--port", type=PORT, default=8000, help="TCP port")
    sv.add_argument("--api-key", default=None, help="required bearer key (default: $AGENTKIT_API_KEY, else none)")
    from agentkit.server.serving import ServeLimits

    for f in dataclasses.fields(ServeLimits):  # one flag per limit, its help and default from the dataclass
        kind = (NONNEG_FLOAT if f.name == "hold_s" else POS_FLOAT) if f.type in (float, "float") else POS_INT
        sv.add_argument(
            "--" + f.name.replace("_", "-"),
            type=kind,
            default=f.default,
            help=f"{f.metadata['help']} (default: %(default)s)",
        )

    ts = sub.add_parser(
        "tool-server",
        help="serve a tool over HTTP (FastAPI; loopback by default)",
        description=(
            "Serve one tool over HTTP: GET /health, GET /v1/tool (schema), POST /v1/call {arguments, session_id}. "
            "OpenAPI at /openapi.json. Binds to 127.0.0.1 unless --host says otherwise; with --api-key (or "
            "AGENTKIT_API_KEY) every route but /health needs 'Authorization: Bearer KEY'."
        ),
    )
    ts.add_argument("name", choices=["python", "search"], help="the tool to serve")
    ts.add_argument("--host", default="127.0.0.1", help="interface to bind (loopback unless you say otherwise)")
    ts.add_argument("--port", type=PORT, default=8100, help="TCP port")
    ts.add_argument("--api-key", default=None, help="required bearer key (default: $AGENTKIT_API_KEY, else none)")
    ts.add_argument("--max-concurrency", type=POS_INT, default=8, help="calls run at once; more wait, up to 64")
    ts.add_argument("--corpus", help="search: JSONL of {id, title, text}")
    ts.add_argument(
        "--mode",
        default=None,
        choices=["bm25", "dense", "hybrid"],
        help="search: retrieval mode (bm25; dense with --retriever)",
    )
    ts.add_argument("--retriever", default=None, help="search: a retriever trained by the revela recipe (a directory)")
    ts.add_argument("--top-k", type=POS_INT, default=3, help="search: passages per query")
    ts.add_argument("--cpu-s", type=POS_FLOAT, default=5.0, help="python: CPU seconds per call")
    ts.add_argument("--wall-s", type=POS_FLOAT, default=10.0, help="python: wall seconds per call")
    ts.add_argument("--memory-mb", type=POS_INT, default=1024, help="python: memory limit per call")
    ts.add_argument(
        "--isolation",
        default="kernel",
        choices=["kernel", "rlimits-only"],
        help="python: bubblewrap namespaces, or (by name only) the weaker rlimits-only mode",
    )

    b = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="target", required=True)
    be = b.add_parser("engine", help="HFEngine tokens/s against model.generate, per prompt and batched")
    be.add_argument("--model", default=DEFAULT_CHAT_MODEL, help="catalog name, directory or hub id")
    be.add_argument("--batch-sizes", type=_int_list, default="1,8,32,64", help="comma-separated batch sizes to measure")
    be.add_argument("--max-tokens", type=POS_INT, default=64, help="tokens generated per row")
    be.add_argument("--no-vllm", action="store_true", help="skip the vLLM column (run when vLLM is installed)")
    be.add_argument("--out", help="also write the results as JSON here")
    ba = b.add_parser("agent", help="agent rollouts/min with HFEngine's prefix cache against re-encoding")
    ba.add_argument("--model", default=DEFAULT_CHAT_MODEL, help="catalog name, directory or hub id")
    ba.add_argument("--tasks", type=POS_INT, default=32, help="trajectories per workload")
    ba.add_argument("--turns", type=POS_INT, default=4, help="most tool turns per trajectory (model turns: one more)")
    ba.add_argument("--tokens-per-turn", type=POS_INT, default=TIR_TOKENS_PER_TURN, help="most tokens per model turn")
    ba.add_argument(
        "--workloads",
        default="python,search,steps",
        help="python (suite a, sandbox), search (suite b, BM25 over the knowledge base), steps (four "
        "dependent calculations, one python call each)",
    )
    ba.add_argument(
        "--no-examples",
        action="store_true",
        help="no few-shot examples (for a model trained on the tag format, e.g. the toollight recipe's models/sft)",
    )
    ba.add_argument("--out", help="also write the results as JSON here")
    bv = b.add_parser("serve", help="load on agentkit serve: concurrent clients vs one by one")
    bv.add_argument("--model", default=DEFAULT_CHAT_MODEL, help="catalog name, directory or hub id")
    bv.add_argument("--requests", type=POS_INT, default=200, help="requests per side")
    bv.add_argument("--clients", type=POS_INT, default=16, help="concurrent client threads")
    bv.add_argument("--max-tokens", type=POS_INT, default=16, help="tokens per answer")
    bv.add_argument("--peer", choices=["vllm"], help="also load vLLM's own server the same way (make setup-vllm)")
    bv.add_argument("--out", help="also write the results as JSON here")
    bc = b.add_parser("structured", help="constrained decoding: grammar libraries, HFEngine constrained vs free")
    bc.add_argument("--model", default=DEFAULT_CHAT_MODEL, help="catalog name, directory or hub id")
    bc.add_argument("--batch-sizes", type=_int_list, default="1,32", help="comma-separated batch sizes to measure")
    bc.add_argument("--max-tokens", type=POS_INT, default=64, help="tokens per row (the natural workload: up to twice)")
    bc.add_argument("--skip-libraries", action="store_true", help="only HFEngine constrained vs free")
    bc.add_argument("--out", help="also write the results as JSON here")
    bt = b.add_parser("toollight-sampling", help="entropy-guided branching: prefix cache vs re-encoding each prefix")
    bt.add_argument("--model", default=DEFAULT_CHAT_MODEL, help="catalog name, directory or hub id")
    bt.add_argument("--tasks", type=POS_INT, default=16, help="questions whose main chains are branched")
    bt.add_argument("--top-b", type=POS_INT, default=3, help="branch points per main chain")
    bt.add_argument("--branches", type=POS_INT, default=3, help="continuations per branch point")
    bt.add_argument("--no-examples", action="store_true", help="no few-shot examples (a tool-trained model)")
    bt.add_argument(
        "--workload", default="python", choices=["python", "search"], help="python (suite a) or search (suite b)"
    )
    bt.add_argument("--out", help="also write the results as JSON here")
    bu = b.add_parser(
        "uncertainty", help="scoring 2,000 questions x 2 models x 5 samples: vectorised vs a per-pair loop"
    )
    bu.add_argument("--questions", type=POS_INT, default=2000, help="questions scored")
    bu.add_argument("--samples", type=number(int, 2), default=5, help="samples per question and model (at least 2)")
    bu.add_argument("--out", help="also write the results as JSON here")
    bp = b.add_parser("tips-potentials", help="TIPS potentials: each trajectory encoded once vs a pass per pair")
    bp.add_argument("--model", default=DEFAULT_CHAT_MODEL, help="catalog name, directory or hub id (the teacher)")
    bp.add_argument("--trajectories", type=POS_INT, default=32, help="three-search trajectories, 2 answers each")
    bp.add_argument("--out", help="also write the results as JSON here")
    br = b.add_parser("rl-step", help="one multi-turn GRPO step: agentkit.rl vs TRL's GRPOTrainer(tools=...)")
    br.add_argument("--model", default=DEFAULT_CHAT_MODEL, help="catalog name, directory or hub id")
    br.add_argument("--questions", type=POS_INT, default=8, help="questions per step")
    br.add_argument("--group", type=number(int, 2), default=4, help="trajectories per question (G, at least 2)")
    br.add_argument(
        "--warm-start",
        type=NONNEG_INT,
        default=96,
        help="SFT questions that first teach the model the format (0: none)",
    )
    br.add_argument("--out", help="also write the results as JSON here")
    bk = b.add_parser("ace", help="100 deltas into a 10,000-bullet playbook with de-duplication and the budget")
    bk.add_argument("--bullets", type=POS_INT, default=10_000, help="bullets in the playbook")
    bk.add_argument("--steps", type=POS_INT, default=5, help="batches of 100 deltas timed (median reported)")
    bk.add_argument("--out", help="also write the results as JSON here")
    bv = b.add_parser("revela", help="a Revela step on 16 chunks vs a plain LM step and a per-pair implementation")
    bv.add_argument("--batch", type=number(int, 2), default=16, help="chunks per batch")
    bv.add_argument("--tokens", type=POS_INT, default=64, help="LM tokens per chunk (at most)")
    bv.add_argument("--repeats", type=POS_INT, default=5, help="timed rounds (medians reported)")
    bv.add_argument("--out", help="also write the results as JSON here")
    bg = b.add_parser("gamerl-verify", help="Game-RL answer verification/s: rules vs reasoning-gym and a judge model")
    bg.add_argument("--answers", type=POS_INT, default=20000, help="model-like outputs verified by the rules")
    bg.add_argument("--judge-answers", type=NONNEG_INT, default=32, help="of them, also judged by the model (0: skip)")
    bg.add_argument("--model", default=DEFAULT_CHAT_MODEL, help="the judge: catalog name, directory or hub id")
    bg.add_argument("--out", help="also write the results as JSON here")
    bs = b.add_parser("sandbox", help="python sandbox latency (pre-warmed pool) against a fresh `python -c`")
    bs.add_argument("-n", type=POS_INT, default=50, help="calls per side")
    bs.add_argument("--out", help="also write the results as JSON here")
    _uncertainty_parser(sub)
    ace_cli.add_parser(sub)
    revela_cli.add_parser(sub)
    gamerl_cli.add_parser(sub)
    _show_defaults(p)
    return p


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """Every option's ``--help`` line ends with ``(required)`` or its default, ``0`` and empty lists included (set
    here once, not on each ``add_argument``); flags (``store_true``) and options without a default say nothing."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _show_defaults(child)
            continue
        if not action.option_strings or action.default is argparse.SUPPRESS or "default:" in (action.help or ""):
            continue
        if action.required:
            shown = "required"
        elif action.default is None or action.default is False or isinstance(action, argparse._StoreTrueAction):
            continue
        else:
            shown = f"default: {_shown(action.default)}".replace("%", "%%")
        action.help = f"{action.help} ({shown})" if action.help else shown


def _shown(value: Any) -> str:
    """A default as a user types it: lists and tuples comma-joined (``[]`` when empty)."""
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) if value else "[]"
    return str(value)


def _uncertainty_parser(sub) -> None:
    u = sub.add_parser(
        "uncertainty", help="black-box uncertainty (AU, cross-model EU, TU) on saved generations"
    ).add_subparsers(dest="action", required=True)
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
    s.add_argument("--force", action="store_true", help="write into --out even if another command's files are there")


def _cmd_uncertainty(a) -> int:
    if a.action == "generate":
        from agentkit.uncertainty.generate import generate, load_tasks

        out = generate(
            a.models.split(","),
            load_tasks(a.tasks, a.seed),
            a.out,
            samples=a.samples,
            temperature=a.temperature,
            top_p=a.top_p,
            max_tokens=a.max_tokens,
            seed=a.seed,
            few_shot=not a.no_few_shot,
        )
        print(f"saved generations: {out}")
        return 0
    from agentkit.uncertainty.score import ScoreConfig, score

    models = [m.strip() for m in a.models.split(",") if m.strip()] if a.models else None
    if models is not None and len({*models, a.reference_model or models[0]}) < 2:
        raise AgentkitError(
            f"--models {a.models!r} is only the reference model",
            "cross-model EU needs a second model, e.g. --models smollm2-135m,gemma3-270m",
        )
    if not Path(a.generations).exists():
        raise AgentkitError(
            f"{a.generations} does not exist", "pass the file or directory `uncertainty generate` wrote"
        )
    cfg = build_config(
        ScoreConfig,
        {
            "reference_model": a.reference_model,
            "models": models,
            "similarity": a.similarity,
            "nli_model": a.nli_model,
            "text": a.text,
            "label": a.label,
            "inter": a.inter,
            "clip_eu": a.clip_eu,
            "skip_bad": a.skip_bad,
            "bootstrap": a.bootstrap,
        },
    )
    out = a.out or str(a.generations).rstrip("/") + ".uncertainty"
    from agentkit.files import claim_output_dir

    claim_output_dir(out, "uncertainty score", a.force)  # a re-score of the same file may write it again
    res = score(a.generations, cfg, out)
    print(
        f"{res['questions']} questions, reference {res['reference_model']} accuracy {res['accuracy']:.1%}"
        + (f", {res['skipped']['count']} rows skipped" if res["skipped"]["count"] else "")
    )
    print(f"{'estimator':18s} {'AUROC':>7s} {'PRR':>7s} {'AURAC':>7s} {'ECE':>7s}")
    for name, m in res["estimators"].items():
        print(f"{name:18s} " + " ".join(f"{m[k]:7.3f}" for k in ("auroc", "prr", "aurac", "ece")))
    print(f"report: {out}/report.md")
    return 0


def _cmd_run(a) -> int:
    metrics, run_dir = run_recipe(
        a.recipe, a.sets, output_dir=a.output_dir, resume=a.resume, preset=a.preset, quiet=a.quiet, force=a.force
    )
    print(f"run directory: {run_dir}")
    for k, v in metrics.items():
        print(f"  {k}: {v:.4g}" if isinstance(v, float) else f"  {k}: {v}")
    return 0


def _cmd_recipes(a) -> int:
    for name in RECIPES.names():
        try:
            desc = RECIPES.get(name).description
        except Exception as e:  # a broken third-party plugin must not hide the others
            desc = f"(cannot import: {e})"
        print(f"{name:28s} {desc}")
    return 0


def _cmd_models(a) -> int:
    if a.action == "prepare":
        if a.name not in CATALOG:
            from agentkit.errors import did_you_mean

            raise AgentkitError(f"unknown model {a.name!r}", did_you_mean(a.name, CATALOG))
        print(materialize(CATALOG[a.name]))
        return 0
    print(f"{'name':14s} {'family':18s} {'kind':9s} {'params':7s} {'installed':10s} path")
    for info in CATALOG.values():
        ok = info.installed()
        if info.name == "minilm-l6" and ok:
            from agentkit.models.catalog import _minilm_dir

            path = str(_minilm_dir(None))  # type: ignore[arg-type]
        else:
            d = info.cache_dir()
            path = str(d) + ("" if _is_complete(d) else "  (converted on first use)")
        print(
            f"{info.name:14s} {info.family:18s} {info.kind:9s} {info.params:7s} {'yes' if ok else 'no':10s} "
            f"{path if ok else info.install_hint}"
        )
    return 0


def _server_logging() -> None:
    """Server processes log with time and level (an engine failure's traceback once, see serving.Batcher)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _cmd_serve(a) -> int:
    import uvicorn

    _server_logging()
    from agentkit.server import create_app
    from agentkit.server.serving import ServeLimits

    key = a.api_key or os.environ.get("AGENTKIT_API_KEY")
    if a.host not in ("127.0.0.1", "localhost", "::1") and not key:
        print(f"warning: serving on {a.host} without an API key", file=sys.stderr)
    options = {
        "hf": {},
        "vllm": {"gpu_memory_utilization": 0.85},
        "openai": {"base_url": a.upstream, "tokenizer": a.tokenizer},
    }[a.engine]
    if a.engine == "openai" and not a.upstream:
        raise AgentkitError("--engine openai needs --upstream URL", "the base URL of the server that runs the model")
    if a.engine == "openai":
        from agentkit.engines.openai import check_base_url

        check_base_url(a.upstream, "--upstream, the base URL of the server that runs the model")
    if a.agent != "tir" and (a.tools != "python" or a.corpus):
        raise AgentkitError("--tools and --corpus need --agent tir", "add --agent tir to serve the tool-using agent")
    if (a.playbook or a.learn or a.top_k) and a.agent != "ace":
        raise AgentkitError("--playbook, --learn and --top-k need --agent ace", "add --agent ace")
    if a.agent == "ace" and not a.playbook:
        raise AgentkitError("--agent ace needs --playbook FILE", "a playbook JSON file (with --learn it may be new)")
    if a.agent == "ace" and not a.learn and not Path(a.playbook).is_file():
        raise AgentkitError(f"{a.playbook} does not exist", "pass an existing playbook, or --learn to start one")
    store = _ace_store(Path(a.playbook)) if a.agent == "ace" else None  # a bad playbook: one line, no model loaded
    tools = _agent_tools(a) if a.agent == "tir" else None  # every argument is checked before the model loads
    if a.engine == "vllm":
        import torch

        if not torch.cuda.is_available():
            options = {}  # vLLM on CPU: VLLMEngine's defaults (bf16, eager)
    engine = make_engine(a.engine, a.model, **options)
    services = {"agentkit/ace": _ace_service(a, engine, store)} if a.agent == "ace" else None
    limits = ServeLimits(**{f.name: getattr(a, f.name) for f in dataclasses.fields(ServeLimits)})
    app = create_app(engine, a.model, api_key=key, tools=tools, services=services, limits=limits)
    extra = " and agentkit/tir" if tools else " and agentkit/ace" if services else ""
    print(f"serving {a.model}{extra} on http://{a.host}:{a.port}/v1", flush=True)
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning")
    return 0


def _ace_store(path: Path):
    """The playbook store ``serve --agent ace`` will use, opened (and so checked) before any model loads; a new
    one is created only where none exists."""
    from agentkit.ace.store import PlaybookStore

    if path.is_dir():
        raise AgentkitError(f"--playbook {path} is a directory", "give the playbook's JSON file")
    return PlaybookStore(path) if path.exists() else PlaybookStore.create(path)


def _ace_service(a, engine, store):
    from agentkit.ace.refine import RefineConfig, Refiner
    from agentkit.ace.roles import RoleConfig
    from agentkit.ace.serve import AceService

    refiner = Refiner(RefineConfig(top_k=a.top_k), lambda text: len(engine.tokenize(text)))
    return AceService(store, refiner, RoleConfig(), learn=a.learn, top_k=a.top_k)


def _agent_tools(a) -> dict:
    try:
        return build_tools([t.strip() for t in a.tools.split(",") if t.strip()], a.corpus, corpus_option="--corpus")
    except AgentkitError as e:
        raise AgentkitError(f"--tools {a.tools!r}: {e.message}", e.hint) from None


def _cmd_tool_server(a) -> int:
    import uvicorn

    _server_logging()
    key = a.api_key or os.environ.get("AGENTKIT_API_KEY")
    if a.host not in ("127.0.0.1", "localhost", "::1") and not key:
        print(f"warning: serving on {a.host} without an API key", file=sys.stderr)
    if a.name == "python":
        from agentkit.tool_servers.python_sandbox import create_app
        from agentkit.tools.sandbox import SandboxConfig

        app = create_app(
            SandboxConfig(
                cpu_s=a.cpu_s,
                wall_s=a.wall_s,
                memory_mb=a.memory_mb,
                isolation=a.isolation,
                pool_size=max(2, a.max_concurrency // 2),
            ),
            key,
            a.max_concurrency,
        )
    else:
        if not a.corpus:
            raise AgentkitError("the search server needs --corpus FILE", "a JSONL file of {id, title, text}")
        from agentkit.tool_servers.search import create_app

        mode = a.mode or ("dense" if a.retriever else "bm25")
        app = create_app(a.corpus, mode, a.top_k, key, a.max_concurrency, retriever=a.retriever)
    isolation = f" (sandbox isolation: {a.isolation})" if a.name == "python" else ""
    print(f"serving the {a.name} tool on http://{a.host}:{a.port}{isolation}", flush=True)
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning")
    return 0


def _cmd_bench(a) -> int:
    if a.target == "agent":
        from agentkit.eval.bench.agent import main as bench_agent

        return bench_agent(
            model=a.model,
            tasks=a.tasks,
            turns=a.turns,
            tokens_per_turn=a.tokens_per_turn,
            out=a.out,
            workloads=a.workloads,
            examples=not a.no_examples,
        )
    if a.target == "structured":
        from agentkit.eval.bench.structured import main as bench_structured

        return bench_structured(
            model=a.model,
            batch_sizes=[int(x) for x in a.batch_sizes.split(",")],
            max_tokens=a.max_tokens,
            skip_libraries=a.skip_libraries,
            out=a.out,
        )
    if a.target == "serve":
        from agentkit.eval.bench.serve import main as bench_serve

        return bench_serve(
            model=a.model, requests=a.requests, clients=a.clients, max_tokens=a.max_tokens, out=a.out, peer=a.peer
        )
    if a.target == "toollight-sampling":
        from agentkit.eval.bench.toollight_sampling import main as bench_tl

        return bench_tl(
            model=a.model,
            tasks=a.tasks,
            top_b=a.top_b,
            branches=a.branches,
            examples=not a.no_examples,
            out=a.out,
            workload=a.workload,
        )
    if a.target == "uncertainty":
        from agentkit.eval.bench.uncertainty import main as bench_uncertainty

        return bench_uncertainty(questions=a.questions, samples=a.samples, out=a.out)
    if a.target == "rl-step":
        from agentkit.eval.bench.rl_step import main as bench_rl

        return bench_rl(model=a.model, questions=a.questions, group=a.group, warm_start=a.warm_start, out=a.out)
    if a.target == "tips-potentials":
        from agentkit.eval.bench.tips_potentials import main as bench_tips

        return bench_tips(model=a.model, trajectories=a.trajectories, out=a.out)
    if a.target == "ace":
        from agentkit.eval.bench.ace import main as bench_ace

        return bench_ace(bullets=a.bullets, steps=a.steps, out=a.out)
    if a.target == "revela":
        from agentkit.eval.bench.revela import main as bench_revela

        return bench_revela(batch=a.batch, tokens=a.tokens, repeats=a.repeats, out=a.out)
    if a.target == "gamerl-verify":
        from agentkit.eval.bench.gamerl_verify import main as bench_gamerl

        return bench_gamerl(answers=a.answers, judge_answers=a.judge_answers, model=a.model, out=a.out)
    if a.target == "sandbox":
        from agentkit.eval.bench.sandbox import main as bench_sandbox

        return bench_sandbox(n=a.n, out=a.out)
    from agentkit.eval.bench.engine import main as bench_engine

    return bench_engine(
        model=a.model,
        batch_sizes=[int(x) for x in a.batch_sizes.split(",")],
        max_tokens=a.max_tokens,
        out=a.out,
        vllm=not a.no_vllm,
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handlers = {
        "run": _cmd_run,
        "recipes": _cmd_recipes,
        "models": _cmd_models,
        "bench": _cmd_bench,
        "tool-server": _cmd_tool_server,
        "serve": _cmd_serve,
        "uncertainty": _cmd_uncertainty,
        "ace": ace_cli.run,
        "revela": revela_cli.run,
        "gamerl": gamerl_cli.run,
    }
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt as e:
        print(f"interrupted{f': {e}' if str(e) else ''}", file=sys.stderr)
        return 128 + getattr(e, "signum", 2)  # 130 for Ctrl-C, 143 for SIGTERM
    except BrokenPipeError:  # `agentkit ace show FILE | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    except Exception as e:
        if args.debug:
            raise
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2 if isinstance(e, (AgentkitError, OSError)) else 1


def _one_line(e: Exception) -> str:
    """An exception as the CLI's one line: a user error as it is, a file error with its path, anything else
    (a bug, not bad input) with its type and how to see the traceback."""
    if isinstance(e, AgentkitError):
        text = str(e)
    elif isinstance(e, OSError) and e.filename:
        text = f"{e.filename}: {e.strerror or e}"
    elif isinstance(e, OSError):
        text = str(e)
    else:
        text = f"{type(e).__name__}: {e} (unexpected; `agentkit --debug ...` shows the traceback)"
    return " ".join(text.split())


if __name__ == "__main__":
    raise SystemExit(main())
