"""toollight: Tool-Light's whole training workflow (arXiv 2509.23285) as one resumable recipe.

    base ─ SFT ─ dpo-1 (pre-aligned, Criterion 1) ─ dpo-2 … (self-evolved, Criterion 2: resample with the
    latest model, whose frozen copy is the next reference)

After every stage its weights go to ``models/<stage>/`` and the greedy agent is evaluated on the held-out
questions; a stage and its evaluation are recorded once finished, so ``--resume`` restarts at the first
unfinished one (a round whose samples were saved does not resample). Each round's samples and pairs are saved
as HF datasets under ``rounds/<stage>/`` (pairs in TRL's conversational prompt / chosen / rejected form, plus
the ids and tool masks DPO trains on).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from agentkit.agent.trajectory import from_dataset, load_jsonl, to_dataset
from agentkit.data.tasks import load_task_file, split_held_out
from agentkit.eval.metrics import necessity
from agentkit.eval.stats import mcnemar_exact, paired_delta
from agentkit.files import atomic_dir, atomic_write, save_pretrained_dir
from agentkit.models import load_model
from agentkit.plots import pyplot
from agentkit.recipe import Recipe
from agentkit.recipes.toollight.config import ToolLightConfig
from agentkit.toollight.dpo import load_pairs, to_dpo_dataset, train_dpo
from agentkit.toollight.rounds import Group, build_pairs, evaluate, is_correct, mine_sources, sample, summarise
from agentkit.toollight.sft import to_sft_dataset, train_sft
from agentkit.toollight.sft_data import make_trajectories
from agentkit.tools import build_tools


def suite_groups(kb, tools: dict, n_arith: int, n_easy: int, n_mh: int, seed: int) -> list[Group]:
    """The seeded suites as the recipe's two groups: ``n_arith`` hard and ``n_easy`` easy arithmetic questions with
    the python tool, ``n_mh`` multi-hop questions over ``kb`` (a ``MultiHopKB``) with the search tool."""
    from agentkit.data.suites import suite_tasks

    arith = suite_tasks("arithmetic", n_arith, seed) + suite_tasks("arithmetic-easy", n_easy, seed)
    return [
        Group("arithmetic", arith, [tools["python"]]),
        Group("multihop", suite_tasks("multihop", n_mh, seed, kb), [tools["search"]]),
    ]


class ToolLightRecipe(Recipe[ToolLightConfig]):
    name = "toollight"
    config_cls = ToolLightConfig
    description = "Tool-Light: SFT + pre-aligned and self-evolved DPO for efficient tool use; agent after each stage"

    def setup(self) -> None:
        c = self.config
        self._questions()
        self.model, self.tokenizer = load_model(c.model)
        self.model_stage = "base"
        self.engine = None

    def _questions(self) -> None:
        """Tools, and the SFT / pool / test question groups."""
        c = self.config
        self.titles: dict[str, str] = {}
        if c.questions is None:
            from agentkit.data.multihop import MultiHopKB

            kb = MultiHopKB.build(c.kb_seed)
            corpus = kb.corpus()
            self.titles = {d["id"]: d["title"] for d in corpus}
            self.tools = build_tools(["python", "search"], corpus, top_k=c.search_top_k)

            self.test = suite_groups(kb, self.tools, c.test_arithmetic, 0, c.test_multihop, c.test_seed)
            held = [t for g in self.test for t in g.tasks]
            # no test question in SFT or in the DPO pool (two seeds over one world can draw the same question)
            self.sft_groups = [
                Group(g.name, split_held_out(g.tasks, held)[0], g.tools)
                for g in suite_groups(kb, self.tools, c.train_arithmetic, c.train_easy, c.train_multihop, c.train_seed)
            ]
            self.pool = [
                Group(g.name, split_held_out(g.tasks, held)[0], g.tools)
                for g in suite_groups(kb, self.tools, c.pool_arithmetic, c.pool_easy, c.pool_multihop, c.pool_seed)
            ]
            return

        self.tools = build_tools(c.tools, c.corpus, top_k=c.search_top_k)  # (corpus checked with the config)
        tasks = load_task_file(c.questions)
        if c.test_questions:
            test = load_task_file(c.test_questions)
        else:
            import random

            random.Random(c.pool_seed).shuffle(tasks)
            cut = max(1, int(len(tasks) * c.test_fraction))
            tasks, test = tasks[cut:], tasks[:cut]
        tools = list(self.tools.values())
        self.sft_groups = []
        self.pool = [Group("questions", tasks, tools)]
        self.test = [Group("questions", test, tools)]

    # ---- the outer loop -----------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        c = self.config
        metrics = self._evaluate("base")
        stages: list[tuple[str, Any]] = []
        if c.sft.epochs > 0 and (self.sft_groups or c.sft_data):
            stages.append(("sft", self._sft))
        kinds = (["pre_aligned"] if c.pre_aligned else []) + ["self_evolved"] * c.self_evolved_rounds
        stages += [
            (f"dpo-{k}", lambda k=k, kind=kind: self._dpo_round(f"dpo-{k}", kind)) for k, kind in enumerate(kinds, 1)
        ]
        prev = "base"
        for stage, run in stages:
            if not self.ctx.done("stages").get(stage):
                self._load_stage(prev)  # after a resume: start from the last finished stage's weights
                history = run()
                self._save_model(stage)
                self.ctx.record("stages", {stage: {"history": history}})
            metrics.update(self._evaluate(stage))
            prev = stage
        self._report(["base"] + [s for s, _ in stages], metrics)
        return metrics

    def _load_stage(self, stage: str) -> None:
        """Make ``stage``'s weights the current policy (after a resume, they are on disk)."""
        if self.model_stage == stage:
            return

        del self.model
        self.model, _ = load_model(str(self._model_dir(stage)))
        self.model_stage = stage
        self._engine_changed()

    def _model_dir(self, stage: str) -> Path:
        return self.ctx.run_dir / "models" / stage

    def _adapter_dir(self, stage: str) -> Path | None:
        """Where a LoRA stage's adapter is saved (``models/STAGE-lora``, main process only), servable on the
        model the stage started from: ``agentkit serve --model RUN/models/PREVIOUS --lora NAME=RUN/models/STAGE-lora``."""
        return self._model_dir(stage + "-lora") if self.ctx.is_main else None

    def _save_model(self, stage: str) -> None:
        """Weights + tokenizer, loadable by any engine (``agentkit serve --model RUN/models/dpo-2``); written to a
        temporary directory and renamed, so a crash never leaves half a model."""
        self.model_stage = stage
        if not self.ctx.is_main:
            return
        final = self._model_dir(stage)
        save_pretrained_dir(final, self.model, self.tokenizer)
        if not self.config.keep_models:
            for old in final.parent.iterdir():
                if old.name not in (stage, "sft", f"{stage}-lora", "sft-lora") and old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)

    def _sampler(self):
        """The engine that samples and evaluates the current policy (hf: the policy object itself samples;
        vllm: a copy of its weights)."""
        if self.engine is None:
            self.engine = self.config.engine.build(self.model, tokenizer=self.tokenizer, name=self.config.model)
        return self.engine

    def _engine_changed(self) -> None:
        if self.engine is not None:
            self.engine.load_weights(model=self.model)

    # ---- stages -------------------------------------------------------------------------------------------
    def _sft(self) -> list[dict[str, Any]]:
        c = self.config
        trajs = self._sft_trajectories()
        ds = to_sft_dataset(trajs, c.sft.max_length)
        self.ctx.log(
            {"sft_examples": len(ds), "sft_trained_tokens": sum(sum(t != -100 for t in x) for x in ds["labels"])}
        )
        history, self.model = train_sft(
            self.model,
            self.tokenizer,
            ds,
            c.sft,
            self.ctx.run_dir / "state" / "trainer",
            progress=not self.ctx.quiet,
            adapter_dir=self._adapter_dir("sft"),
        )
        self._engine_changed()
        return history

    def _sft_trajectories(self):
        c = self.config
        if c.sft_data:
            p = Path(c.sft_data)
            if p.is_dir():
                import datasets

                return from_dataset(datasets.load_from_disk(str(p)))
            return load_jsonl(p)
        trajs = [
            t
            for g in self.sft_groups
            for t in make_trajectories(g.tasks, self.tokenizer, {x.name: x for x in g.tools}, self.titles)
        ]
        if self.ctx.is_main:
            _save(to_dataset(trajs), self.ctx.run_dir / "sft-trajectories")
        return trajs

    def _dpo_round(self, stage: str, kind: str) -> list[dict[str, Any]]:
        import datasets

        c = self.config
        where = self.ctx.run_dir / "rounds" / stage
        if not (where / "summary.json").exists() and self.ctx.is_main:  # written last: the round is complete
            if stage == "dpo-1" and c.pairs:
                self._bring_pairs(where)
            else:
                self._sample_and_select(stage, kind, where)
        self.ctx.state.wait_for_everyone()  # on every process, whatever it read (as in _evaluate)
        n = json.loads((where / "summary.json").read_text())["pairs"]
        self.ctx.log({f"{stage}/pairs": n})
        if n == 0:
            self.ctx.add_section(f"{stage}: no pairs", "No question gave a pair under the rules; the model is kept.")
            return []
        pairs = datasets.load_from_disk(str(where / "pairs"))
        history, self.model = train_dpo(
            self.model,
            self.tokenizer,
            pairs,
            c.dpo,
            self.ctx.run_dir / "state" / "trainer",
            progress=not self.ctx.quiet,
            adapter_dir=self._adapter_dir(stage),
        )
        self._engine_changed()
        return history

    def _sample_and_select(self, stage: str, kind: str, where: Path) -> None:
        c = self.config
        engine = self._sampler()
        seed = c.sampling.agent.sampling.seed + 1000 * int(stage.split("-")[1])
        sources = self._sources(engine)
        if (where / "samples").exists():  # sampled before an interruption: select from the saved samples
            import datasets

            saved = from_dataset(datasets.load_from_disk(str(where / "samples")))
            vanilla = [t for t in saved if t.meta["source"] == "vanilla"]
            guided = [t for t in saved if t.meta["source"] == "guided"]
        else:
            vanilla, guided = [], []
            for g in self.ctx.progress(sources, desc=f"{stage}: sampling per suite"):
                v, gd = sample(engine, [g], c.sampling, seed=seed)
                vanilla, guided = vanilla + v, guided + gd
            _save(to_dataset(vanilla + guided), where / "samples")
        tasks = {t.id: t for g in sources for t in g.tasks}
        sft = None
        if kind == "pre_aligned" and self.titles:  # the ideal trajectory stands in when no sample is correct
            from agentkit.toollight.sft_data import make_trajectories

            sft = {
                t.task_id: t
                for g in sources
                for t in make_trajectories(g.tasks, self.tokenizer, {x.name: x for x in g.tools}, self.titles)
            }
        available: dict[str, int] = {}
        pairs = build_pairs(kind, vanilla, guided, tasks, c.rules, sft, seed=seed, stats=available)
        if pairs:  # (datasets cannot load back a dataset of no rows)
            _save(to_dpo_dataset(pairs), where / "pairs")
        stats = {**_sample_stats(vanilla, guided, pairs, tasks), **available}
        self.ctx.log({f"{stage}/{k}": v for k, v in stats.items()})
        atomic_write(where / "summary.json", json.dumps({"kind": kind, "pairs": len(pairs), **stats}))

    def _bring_pairs(self, where: Path) -> None:
        """The first round trains on the user's pairs (ours, or TRL-style text pairs) instead of sampling."""
        pairs = load_pairs(self.config.pairs, self.tokenizer)
        _save(pairs, where / "pairs")
        atomic_write(
            where / "summary.json", json.dumps({"kind": "given", "pairs": len(pairs), "from": str(self.config.pairs)})
        )

    def _sources(self, engine) -> list[Group]:
        """The pool questions the SFT model answers wrongly without tools, mined once and kept for every round."""
        c = self.config
        path = self.ctx.run_dir / "rounds" / "sources.json"
        if path.exists():
            keep = set(json.loads(path.read_text())["sources"])
        else:
            groups, rates = mine_sources(engine, self.pool, c.sampling, seed=c.sampling.agent.sampling.seed)
            keep = {t.id for g in groups for t in g.tasks}
            atomic_write(path, json.dumps({"sources": sorted(keep), "no_tool_correct_rate": rates}))
            n = sum(len(g.tasks) for g in self.pool)
            self.ctx.log(
                {"sources": len(keep), "pool": n, "pool_no_tool_accuracy": sum(rates.values()) / max(len(rates), 1)}
            )
        return [Group(g.name, [t for t in g.tasks if t.id in keep], g.tools) for g in self.pool]

    # ---- evaluation and report ----------------------------------------------------------------------------
    def _evaluate(self, stage: str) -> dict[str, Any]:
        c = self.config
        rows = self.ctx.done(f"eval_{stage}")
        if not rows and self.ctx.is_main:
            self._load_stage(stage)
            rows = evaluate(self._sampler(), self.test, c.eval)
            self.ctx.record(f"eval_{stage}", rows)
        # every process waits here, whatever it read: one that read the main process's fresh record would
        # otherwise skip this barrier and pair with the next, and the two would wait for each other for ever
        self.ctx.state.wait_for_everyone()
        rows = self.ctx.done(f"eval_{stage}") or rows
        out = summarise(rows, stage)
        self.ctx.log(out)
        return out

    def _report(self, stages: list[str], metrics: dict[str, Any]) -> None:
        """The stage × suite table (from the per-stage ``metrics`` already summarised) with Necessity, whose pool
        is this run's stages, and the plots."""
        evals = {s: self.ctx.done(f"eval_{s}") for s in stages}
        suites = sorted({r["suite"] for rows in evals.values() for r in rows.values()})
        nec = {
            suite: necessity(
                {
                    s: {q: (r["correct"], r["tool_calls"]) for q, r in rows.items() if r["suite"] == suite}
                    for s, rows in evals.items()
                }
            )
            for suite in suites
        }
        lines = [
            "| stage | suite | accuracy | tool calls | Efficiency | Necessity (pool: these stages) | tokens/answer |",
            "|---|---|---|---|---|---|---|",
        ]
        for s in stages:
            for suite in suites:
                k = f"{s}/{suite}"
                lines.append(
                    f"| {s} | {suite} | {metrics[k + '/accuracy']:.3f} | {metrics[k + '/tool_calls']:.2f} | "
                    f"{metrics[k + '/efficiency']:.3f} | {nec[suite][s]['normalised']:.2f} | "
                    f"{metrics[k + '/tokens_per_answer']:.0f} |"
                )
                self.ctx.log({f"{k}/necessity": nec[suite][s]["normalised"]})
        self.ctx.add_section("Agent after each stage (held-out questions, greedy)", "\n".join(lines))
        if "sft" in evals:
            self._paired("sft", [s for s in stages if s.startswith("dpo-")], evals, suites)
        self._plot(stages, suites, metrics)
        hist = self.ctx.done("stages")
        self._plot_losses({s: h["history"] for s, h in hist.items()})

    def _paired(self, base: str, stages: list[str], evals: dict, suites: list[str]) -> None:
        """Each stage against ``base``, question by question: questions gained and lost, the accuracy difference
        with its 95 % bootstrap interval over questions, and the exact McNemar p-value."""
        lines = [
            f"| stage | suite | gained | lost | accuracy − {base} | 95 % interval (questions) | exact McNemar p |",
            "|---|---|---|---|---|---|---|",
        ]
        for s in stages:
            for suite in suites:
                qs = [q for q, r in evals[base].items() if r["suite"] == suite and q in evals[s]]
                after = [float(evals[s][q]["correct"]) for q in qs]
                before = [float(evals[base][q]["correct"]) for q in qs]
                gained = sum(a > b for a, b in zip(after, before))
                lost = sum(a < b for a, b in zip(after, before))
                d, lo, hi = paired_delta(after, before)
                p = mcnemar_exact(gained, lost)
                k = f"{s}/{suite}/vs_{base}"
                self.ctx.log({f"{k}/gained": gained, f"{k}/lost": lost, f"{k}/delta": d, f"{k}/mcnemar_p": p})
                lines.append(f"| {s} | {suite} | {gained} | {lost} | {d:+.3f} | [{lo:+.3f}, {hi:+.3f}] | {p:.3f} |")
        self.ctx.add_section(f"Each DPO stage against {base}, question by question", "\n".join(lines))

    def _plot(self, stages, suites, metrics) -> None:
        plt = pyplot()

        fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
        for suite in suites:
            acc = [metrics[f"{s}/{suite}/accuracy"] for s in stages]
            calls = [metrics[f"{s}/{suite}/tool_calls"] for s in stages]
            axes[0].plot(stages, acc, marker="o", label=suite)
            axes[1].plot(stages, calls, marker="o", label=suite)
        axes[0].set_ylabel("accuracy")
        axes[1].set_ylabel("mean tool calls")
        for ax in axes:
            ax.legend()
        fig.tight_layout()
        self.ctx.save_plot(fig, "stages", "Held-out accuracy and tool calls after each stage")

    def _plot_losses(self, histories: dict[str, list[dict[str, Any]]]) -> None:
        plt = pyplot()

        curves = {s: [(h["step"], h["loss"]) for h in hs if "loss" in h] for s, hs in histories.items()}
        curves = {s: c for s, c in curves.items() if c}
        if not curves:
            return
        fig, axes = plt.subplots(1, len(curves), figsize=(3.2 * len(curves), 3), squeeze=False)
        for ax, (s, pts) in zip(axes[0], curves.items()):
            ax.plot(*zip(*pts), marker="o")
            ax.set_title(s)
            ax.set_xlabel("step")
        axes[0][0].set_ylabel("loss (model tokens only)")
        fig.tight_layout()
        self.ctx.save_plot(fig, "losses", "Training loss per stage (SFT: CE; DPO: sigmoid loss, β from config)")

    def evaluate(self) -> dict[str, Any]:
        if "python" in self.tools:
            self.tools["python"].close()
        return {}


def _sample_stats(vanilla, guided, pairs, tasks) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, trajs in (("vanilla", vanilla), ("guided", guided)):
        if trajs:
            out[f"{name}_samples"] = len(trajs)
            out[f"{name}_accuracy"] = sum(is_correct(tasks[t.task_id], t) for t in trajs) / len(trajs)
            out[f"{name}_tool_calls"] = sum(t.tool_calls for t in trajs) / len(trajs)
    for p in pairs:
        key = f"pairs_{p.rule}_{p.difficulty}"
        out[key] = out.get(key, 0) + 1
    if pairs:
        out["chosen_calls"] = sum(p.chosen.tool_calls for p in pairs) / len(pairs)
        out["rejected_calls"] = sum(p.rejected.tool_calls for p in pairs) / len(pairs)
    return out


def _save(dataset, path: Path) -> None:
    atomic_dir(path, lambda tmp: dataset.save_to_disk(str(tmp)))
