"""quickstart: the embedded chat model answers suite-(a) arithmetic problems; accuracy, tokens/s, examples.

It is the toolkit's smoke test and the baseline the tool-using recipes must beat: SmolLM2-135M without tools
gets large-number arithmetic mostly wrong (17·23 = 381).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from agentkit.data import arithmetic_suite
from agentkit.engines import SamplingParams
from agentkit.eval.metrics import extract_answer, parse_number, score_task
from agentkit.plots import pyplot
from agentkit.recipe import Recipe
from agentkit.recipes.quickstart.config import QuickstartConfig


class QuickstartRecipe(Recipe[QuickstartConfig]):
    name = "quickstart"
    config_cls = QuickstartConfig
    description = "embedded model on seeded arithmetic problems: accuracy, tokens/s, examples"

    def setup(self) -> None:
        c = self.config
        self.tasks = arithmetic_suite(c.num_problems, c.seed, c.kinds)
        self.engine = c.engine.build()

    def evaluate(self) -> dict[str, Any]:
        c = self.config
        done = self.ctx.done("predictions")
        todo = [t for t in self.tasks if t.id not in done]
        params = c.sampling
        batches = [todo[i : i + c.batch_size] for i in range(0, len(todo), c.batch_size)]
        for batch in self.ctx.progress(batches, desc="quickstart", total=len(batches)):
            rows = self._solve(batch, params)
            self.ctx.record("predictions", rows)
            self.ctx.log(
                {
                    "batch_accuracy": sum(r["correct"] for r in rows.values()) / len(rows),
                    "batch_tokens_per_s": sum(r["tokens"] for r in rows.values())
                    / max(1e-9, sum(r["seconds"] for r in rows.values())),
                }
            )
            done.update(rows)
        return self._summarise([done[t.id] for t in self.tasks])

    def _solve(self, batch: list, params: SamplingParams) -> dict[str, dict[str, Any]]:
        """Answer one batch; under ``accelerate launch`` each process answers its share and all get every row."""
        from accelerate.utils import gather_object

        c, state = self.config, self.ctx.state
        with state.split_between_processes(batch) as shard:
            prompts = [
                [{"role": "system", "content": c.system_prompt}, {"role": "user", "content": t.question}] for t in shard
            ]
            start = time.perf_counter()
            outs = self.engine.generate(prompts, params) if prompts else []
            seconds = time.perf_counter() - start
            total = max(1, sum(o[0].completion_tokens for o in outs))
            rows = {}
            for t, (comp,) in zip(shard, outs):
                ents = comp.entropies or []
                rows[t.id] = {
                    "kind": t.kind,
                    "question": t.question,
                    "answer": t.answer,
                    "output": comp.text,
                    "predicted": _shown_answer(t.metric, comp.text),
                    **score_task(t.metric, comp.text, t.answer),
                    "tokens": comp.completion_tokens,
                    "mean_entropy": sum(ents) / max(1, len(ents)),
                    "seconds": seconds * comp.completion_tokens / total,
                }
        if state.num_processes == 1:
            return rows
        return {k: v for part in gather_object([rows]) for k, v in part.items()}

    def _summarise(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        by_kind: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            by_kind[r["kind"]].append(r["correct"])
        tokens, seconds = sum(r["tokens"] for r in rows), sum(r["seconds"] for r in rows)
        metrics: dict[str, Any] = {
            "accuracy": sum(r["correct"] for r in rows) / len(rows),
            **{f"accuracy/{k}": sum(v) / len(v) for k, v in by_kind.items()},
            "tokens_per_s": tokens / max(seconds, 1e-9),
            "completion_tokens": tokens,
            "problems": len(rows),
        }
        self._report(rows, by_kind)
        return metrics

    def _report(self, rows: list[dict[str, Any]], by_kind: dict[str, list[float]]) -> None:
        plt = pyplot()

        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
        kinds = sorted(by_kind)
        bars = a1.bar(kinds, [sum(by_kind[k]) / len(by_kind[k]) for k in kinds], color="#4C72B0")
        a1.bar_label(bars, labels=[f"{int(sum(by_kind[k]))}/{len(by_kind[k])}" for k in kinds])
        a1.set_ylim(0, 1)
        a1.set_ylabel("accuracy")
        a1.set_title(f"{self.config.engine.model}: accuracy by kind")
        right = [r["mean_entropy"] for r in rows if r["correct"]]
        wrong = [r["mean_entropy"] for r in rows if not r["correct"]]
        a2.hist([wrong, right], bins=15, label=["wrong", "correct"], color=["#C44E52", "#55A868"])
        a2.set_xlabel("mean token entropy (nats)")
        a2.set_ylabel("answers")
        a2.legend()
        a2.set_title("entropy of correct vs wrong answers")
        self.ctx.save_plot(fig, "accuracy", "Accuracy by problem kind, and mean token entropy of each answer")
        n = self.config.examples_in_report
        shown = [r for r in rows if r["correct"]][: n // 2] + [r for r in rows if not r["correct"]][: n - n // 2]
        lines = []
        for r in shown:
            out = r["output"].strip().replace("\n", " ")
            lines.append(
                f"- **{r['question']}** gold `{r['answer']}`, predicted `{r['predicted']}` "
                f"({'correct' if r['correct'] else 'wrong'})  \n  > {out[:400]}"
            )
        self.ctx.add_section("Examples", "\n".join(lines) or "(none)")


def _shown_answer(metric: str, text: str) -> str:
    """What the report shows as the prediction: the parsed number for numeric tasks, else the extracted answer."""
    if metric == "numeric":
        n = parse_number(extract_answer(text))
        return "(no number)" if n is None else str(int(n)) if n.is_integer() else str(n)
    return extract_answer(text)[-80:]
