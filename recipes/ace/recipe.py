"""ace: ACE (arXiv 2510.04618) against the base prompt and a Dynamic-Cheatsheet baseline, as one resumable recipe.

Runs, one per method and seed, all with ``engine``'s model in every role:

- ``base``: the generator with an empty context (once: greedy decoding does not depend on the seed);
- ``eval``: eval-only, the generator with a fixed playbook file (``playbook``), once;
- ``dc``: the cheatsheet rewritten whole after each training batch (``agentkit.ace.cheatsheet``), then test;
- ``ace_offline``: playbook adaptation over the training questions (``epochs``), validated every
  ``eval_every`` steps, the best version on validation restored, then test;
- ``ace_online``: the test questions in windows: answer a window (its accuracy is the score), then adapt on it.

Each step is recorded as it finishes (``state/steps-<run>.jsonl``) and each playbook keeps its own delta log
(``playbooks/<run>.json``), so ``--resume`` continues mid-run. Each run's test answers are kept in
``answers/<run>.jsonl`` (id, gold, answer, verdict, value verdict), and its accuracies are their means. The report: test accuracy (mean ± std over
seeds), context size (tokens in the generator's tokenizer) over the steps — the collapse / bloat comparison —
and cost (model calls and tokens of every role).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from dataclasses import replace
from typing import Any

from agentkit.ace.adapt import AdaptConfig, Adapter, SelfConsistency, checker_feedback, summary
from agentkit.ace.cheatsheet import Cheatsheet
from agentkit.ace.playbook import Playbook
from agentkit.ace.refine import EmbeddingCache, Refiner
from agentkit.ace.roles import Curator, Generator, Reflector, Sample
from agentkit.ace.store import PlaybookStore
from agentkit.ace.toolgen import ToolGenerator
from agentkit.agent.suites import suite_tool
from agentkit.data.suites import suite_tasks
from agentkit.data.tasks import split_held_out
from agentkit.eval.metrics import value_match
from agentkit.eval.stats import mean_std
from agentkit.files import atomic_write
from agentkit.plots import pyplot
from agentkit.recipe import Recipe
from agentkit.recipes.ace.config import AceConfig
from agentkit.tools.base import Tool


class AceRecipe(Recipe[AceConfig]):
    name = "ace"
    config_cls = AceConfig
    description = "ACE playbooks vs the base prompt and Dynamic Cheatsheet: accuracy, context size, cost"

    def setup(self) -> None:
        c = self.config
        self.fixed = Playbook.load(c.playbook) if c.playbook else None  # a bad file fails before the model loads
        self.test = suite_tasks(c.suite, c.test_questions, seed=0)
        self.val = split_held_out(suite_tasks(c.suite, c.val_questions, seed=2000), self.test)[0]
        self.engine = c.engine.build()
        self.cache = EmbeddingCache(c.refine.embedder)
        self.tools: dict[str, Tool] = {}
        if c.tool:
            tool, examples = suite_tool(c.suite)
            self.tools = {tool.name: tool}
            self.agent = replace(c.agent, examples=c.agent.examples or examples)

    def count(self, text: str) -> int:
        return len(self.engine.tokenize(text))

    # ---- the outer loop -----------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        c = self.config
        runs = [(m, s) for m in c.methods for s in (c.seeds[:1] if m in ("base", "eval") else c.seeds)]
        results = self.ctx.done("runs")
        for method, seed in runs:
            key = f"{method}-s{seed}"
            if key not in results:
                t0 = time.perf_counter()
                results[key] = {**getattr(self, f"_{method}")(key, seed), "minutes": (time.perf_counter() - t0) / 60}
                self.ctx.record("runs", {key: results[key]})
        return self._compare(runs, results)

    def _train_tasks(self, seed: int) -> list[Any]:
        c = self.config
        tasks = split_held_out(suite_tasks(c.suite, c.train_questions, seed=1000 + seed), self.test)[0]
        return split_held_out(tasks, self.val)[0]

    def _batches(self, tasks: list[Any], seed: int, epochs: int) -> list[tuple[int, list[Any]]]:
        bs, out = self.config.batch_size, []
        for epoch in range(epochs):
            order = list(tasks)
            random.Random(f"{seed}-{epoch}").shuffle(order)
            out += [order[i : i + bs] for i in range(0, len(order), bs)]
        return list(enumerate(out))

    def _roles(self) -> tuple[Generator | ToolGenerator, Reflector, Curator]:
        r = self.config.roles
        gen = ToolGenerator(self.engine, self.tools, self.agent) if self.tools else Generator(self.engine, r)
        return gen, Reflector(self.engine, r), Curator(self.engine, r)

    def _adapter(self, key: str, store: PlaybookStore | None = None) -> Adapter:
        c = self.config
        path = self.ctx.run_dir / "playbooks" / f"{key}.json"
        store = store or (PlaybookStore(path) if path.exists() else PlaybookStore.create(path, overwrite=True))
        refiner = Refiner(c.refine, self.count, self.cache)
        cfg = AdaptConfig(labels=c.labels, max_rounds=c.max_rounds, top_k=c.top_k)
        gen, reflector, curator = self._roles()
        return Adapter(gen, reflector, curator, store, refiner, cfg, self._feedback(gen))

    def _feedback(self, gen):
        """The adaptation's judge: the checker with labels (or label_free=checker); label-free, self-consistency
        among fresh answers sampled at consistency_temperature, their cost counted as the generator's."""
        c = self.config
        if c.labels or c.label_free == "checker":
            return checker_feedback
        if self.tools:
            twin = ToolGenerator(
                self.engine, self.tools, self.agent.with_sampling(temperature=c.consistency_temperature)
            )
        else:
            r = c.roles
            twin = Generator(
                self.engine, replace(r, sampling=replace(r.sampling, temperature=c.consistency_temperature))
            )
        twin.stats = gen.stats
        return SelfConsistency(twin, c.consistency_samples)

    def _steps(self, key: str, jobs: list[tuple[int, list[Any]]], run_step, desc: str) -> list[dict[str, Any]]:
        """``run_step(step, tasks) -> metrics`` for every step not yet recorded; all steps' metrics, in order."""
        done = self.ctx.done(f"steps-{key}")
        for step, tasks in self.ctx.progress([j for j in jobs if str(j[0]) not in done], desc=desc):
            m = run_step(step, tasks)
            done[str(step)] = m
            self.ctx.record(f"steps-{key}", {str(step): m})
            self.ctx.log({f"{key}/{k}": v for k, v in m.items() if isinstance(v, (int, float))}, step=step)
        return [done[str(s)] for s, _ in jobs if str(s) in done]

    # ---- the methods --------------------------------------------------------------------------------------
    def _base(self, key: str, seed: int) -> dict[str, Any]:
        dc = Cheatsheet(self._roles()[0], self.engine, self.config.roles)
        test = self._test(key, dc.answer(self.test))  # before the cost is read
        return {**self._cost(dc.usage), **test, "context_tokens": 0}

    def _eval(self, key: str, seed: int) -> dict[str, Any]:
        path = self.ctx.run_dir / "playbooks" / f"{key}.json"
        ace = self._adapter(key, PlaybookStore.create(path, self.fixed, overwrite=True))
        m = self._test(key, ace.answer(self.test))
        return {**self._cost(ace.usage), **m, "bullets": len(self.fixed), "context_tokens": self._tokens(ace)}

    def _dc(self, key: str, seed: int) -> dict[str, Any]:
        c = self.config
        gen = self._roles()[0]
        done = self.ctx.done(f"steps-{key}")
        last = max(done, key=int) if done else None
        text = done[last]["text"] if last else ""
        dc = Cheatsheet(
            gen, self.engine, c.roles, c.labels, self._feedback(gen), text=text, max_tokens=c.refine.budget_tokens
        )

        def step(i: int, tasks: list[Any]) -> dict[str, Any]:
            before = self._cost(dc.usage)
            m = dc.step(tasks, i)
            return {**m, "text": dc.text, "context_tokens": self.count(dc.text), **_minus(self._cost(dc.usage), before)}

        hist = self._steps(key, self._batches(self._train_tasks(seed), seed, c.epochs), step, key)
        test = self._test(key, dc.answer(self.test))
        return {**_sums(hist), **test, "context_tokens": self.count(dc.text)}

    def _ace_offline(self, key: str, seed: int) -> dict[str, Any]:
        c = self.config
        ace = self._adapter(key)
        jobs = self._batches(self._train_tasks(seed), seed, c.epochs)

        def step(i: int, tasks: list[Any]) -> dict[str, Any]:
            if i <= ace.last_step():  # its batch is in the playbook already (a crash came before the record)
                return {"step": i, "resumed": True}
            before = self._cost(ace.usage)
            m = ace.step(tasks, i)
            if (c.eval_every and (i + 1) % c.eval_every == 0) or i == len(jobs) - 1:
                v = ace.evaluate(self.val)
                m["val_accuracy"], m["val_value_accuracy"] = v["accuracy"], v["value_accuracy"]
            m["context_tokens"] = self._tokens(ace)
            return {**m, **_minus(self._cost(ace.usage), before)}

        hist = self._steps(key, jobs, step, key)
        validated = [h for h in hist if "val_accuracy" in h]
        # the first of equals (the smaller playbook); the value accuracy breaks ties of the task's accuracy
        best = max(validated, key=lambda h: (h["val_accuracy"], h.get("val_value_accuracy", 0)), default=None)
        if best and best["version"] != ace.store.playbook.version:
            ace.store.rollback(best["version"])  # recorded as a new version; the later ones stay in the log
        return {
            **_sums(hist),
            **self._test(key, ace.answer(self.test)),
            "val_best": best["val_accuracy"] if best else None,
            "version_kept": ace.store.playbook.version,
            "bullets": len(ace.store.playbook),
            "context_tokens": self._tokens(ace),
        }

    def _ace_online(self, key: str, seed: int) -> dict[str, Any]:
        c = self.config
        ace = self._adapter(key)
        order = list(self.test)
        random.Random(f"online-{seed}").shuffle(order)
        windows = [order[i : i + c.window] for i in range(0, len(order), c.window)]

        def window(i: int, tasks: list[Any]) -> dict[str, Any]:
            before = self._cost(ace.usage)
            # the window's score is recorded before adapting on it, so a resumed window is not scored again
            # with a playbook that has already seen part of it
            scored = self.ctx.done(f"online-{key}")
            if str(i) not in scored:
                samples = ace.answer(tasks)
                scored[str(i)] = {**summary(samples), "answers": [_answer_row(s) for s in samples]}
                self.ctx.record(f"online-{key}", {str(i): scored[str(i)]})
            m = {"window": i, "online": {k: v for k, v in scored[str(i)].items() if k != "answers"}, "n": len(tasks)}
            for j in range(0, len(tasks), c.batch_size):
                if i * 1000 + j > ace.last_step():  # not yet in the playbook
                    ace.step(tasks[j : j + c.batch_size], i * 1000 + j)
            m["context_tokens"] = self._tokens(ace)
            m["version"] = ace.store.playbook.version
            return {**m, **_minus(self._cost(ace.usage), before)}

        hist = self._steps(key, list(enumerate(windows)), window, key)
        scored = self.ctx.done(f"online-{key}")
        rows = [row for i in range(len(windows)) for row in scored[str(i)]["answers"]]
        return {
            **_sums(hist),
            **self._save_answers(key, rows),
            "bullets": len(ace.store.playbook),
            "context_tokens": self._tokens(ace),
        }

    def _test(self, key: str, samples: list[Sample]) -> dict[str, float]:
        """The run's test answers, saved, and the accuracies computed from them."""
        return self._save_answers(key, [_answer_row(s) for s in samples])

    def _save_answers(self, key: str, rows: list[dict[str, Any]]) -> dict[str, float]:
        """``answers/<key>.jsonl`` (one row per test question: id, gold, answer, verdict, value verdict); the test
        accuracy is the mean of the verdicts given (a question without one is left out), the value accuracy the
        mean of the value verdicts."""
        if self.ctx.is_main:
            atomic_write(self.ctx.run_dir / "answers" / f"{key}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        judged = [r["correct"] for r in rows if r["correct"] is not None]
        return {
            "test_accuracy": sum(map(bool, judged)) / len(judged) if judged else 0.0,
            "test_value_accuracy": sum(r["value_correct"] for r in rows) / len(rows) if rows else 0.0,
        }

    def _tokens(self, ace: Adapter) -> int:
        return ace.refiner.tokens.playbook(ace.store.playbook)

    # ---- cost, comparison, report -------------------------------------------------------------------------
    @staticmethod
    def _cost(usage: dict[str, dict[str, int]]) -> dict[str, int]:
        return {
            "calls": sum(u["calls"] for u in usage.values()),
            "tokens": sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage.values()),
            "json_failures": sum(u.get("failed", 0) for u in usage.values()),
        }

    def _compare(self, runs: list[tuple[str, int]], results: dict[str, Any]) -> dict[str, Any]:
        c = self.config
        out: dict[str, Any] = {}
        lines = [
            "| method | runs | test accuracy (mean ± std) | value accuracy | context tokens at the end | model calls "
            "| tokens | JSON failures |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for method in c.methods:
            rs = [results[f"{m}-s{s}"] for m, s in runs if m == method]
            acc = [r["test_accuracy"] for r in rs]
            val = [r.get("test_value_accuracy", 0.0) for r in rs]
            (acc_m, acc_s), (val_m, val_s) = mean_std(acc), mean_std(val)
            out[f"{method}/accuracy_mean"], out[f"{method}/accuracy_std"] = acc_m, acc_s
            out[f"{method}/value_accuracy_mean"] = val_m
            out[f"{method}/context_tokens"] = statistics.mean(r["context_tokens"] for r in rs)
            lines.append(
                f"| {method} | {len(rs)} | {acc_m:.3f} ± {acc_s:.3f} | {val_m:.3f} ± {val_s:.3f} | "
                f"{out[f'{method}/context_tokens']:.0f} | {statistics.mean(r.get('calls', 0) for r in rs):.0f} | "
                f"{statistics.mean(r.get('tokens', 0) for r in rs):,.0f} | "
                f"{statistics.mean(r.get('json_failures', 0) for r in rs):.1f} |"
            )
        minutes = sum(r.get("minutes", 0.0) for r in results.values())
        self.ctx.add_section(
            f"Held-out accuracy on {c.suite} ({len(self.test)} test questions)",
            "\n".join(lines) + f"\n\nOne model in every role: {c.engine.model}. Labels: {c.labels}. Batch "
            f"{c.batch_size}, {c.epochs} epoch(s), budget {c.refine.budget_tokens} tokens, de-duplication "
            f"{c.refine.dedup} at {c.refine.dedup_threshold}. ace_online's accuracy is the windows' accuracy before "
            f"adapting on each. Value accuracy: the number right to the reference's decimals, whatever the format. Wall time of all runs: {minutes:.0f} min.",
        )
        # the curves come from the step records, not the run records, so a report regenerated with --resume
        # plots every field the steps recorded
        curves = {k: _curve(self.ctx.done(f"steps-{k}")) for k in results}
        self._plot({k: h for k, h in curves.items() if h})
        return out

    def _plot(self, curves: dict[str, list[dict[str, Any]]]) -> None:
        if not curves:
            return
        plt = pyplot()
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.4))
        colors = {"dc": "tab:red", "ace_offline": "tab:blue", "ace_online": "tab:green"}
        for key, h in sorted(curves.items()):
            method = key.rsplit("-s", 1)[0]
            a1.plot(
                [p["x"] for p in h], [p["context_tokens"] for p in h], color=colors.get(method), alpha=0.7, label=method
            )
            for field, style, name in (("val_accuracy", "-", ""), ("val_value_accuracy", "--", " (value)")):
                val = [(p["x"], p[field]) for p in h if p.get(field) is not None]
                if val:
                    a2.plot(*zip(*val), style, color=colors.get(method), marker="o", alpha=0.7, label=method + name)
        a1.set_title("context size (tokens) over steps")
        a2.set_title("validation accuracy, exact and value (ace_offline)")
        for ax in (a1, a2):
            ax.set_xlabel("step")
            handles = {h.get_label(): h for h in ax.get_lines()}
            if handles:
                ax.legend(handles.values(), handles.keys())
        fig.tight_layout()
        self.ctx.save_plot(
            fig, "context", "Context size over adaptation steps (collapse / bloat) and validation accuracy"
        )


def _answer_row(s: Sample) -> dict[str, Any]:
    """One test question's outcome as ``answers/<run>.jsonl`` keeps it."""
    return {
        "id": s.task.id,
        "gold": s.task.answer,
        "answer": s.answer,
        "correct": s.correct,
        "value_correct": value_match(s.answer, s.task.answer),
    }


def _minus(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a[k] - b.get(k, 0) for k in a}


def _sums(hist: list[dict[str, Any]]) -> dict[str, int]:
    return {k: sum(h.get(k, 0) for h in hist) for k in ("calls", "tokens", "json_failures")}


def _curve(steps: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    hist = [steps[k] for k in sorted(steps, key=int)]
    return [
        {
            "x": i,
            "context_tokens": h.get("context_tokens", 0),
            "val_accuracy": h.get("val_accuracy"),
            "val_value_accuracy": h.get("val_value_accuracy"),
        }
        for i, h in enumerate(hist)
        if not h.get("resumed")
    ]
