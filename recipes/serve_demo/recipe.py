"""serve_demo: the main job. The embedded model behind `agentkit serve`, queried with the official openai client,
answers suite (a) once without tools and once as the `agentkit/tir` agent with the sandboxed python tool."""

from __future__ import annotations

import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentkit.agent.loop import TIR_EXAMPLES
from agentkit.data import arithmetic_suite
from agentkit.eval.bench import percentile
from agentkit.eval.metrics import numeric_match
from agentkit.plots import pyplot
from agentkit.recipe import Recipe
from agentkit.recipes.serve_demo.config import ServeDemoConfig
from agentkit.server.http import ServerProcess

# The problems of TIR_EXAMPLES, worked in words: the baseline sees the same demonstrations, minus the tool.
PLAIN_EXAMPLES = [
    {"role": "user", "content": TIR_EXAMPLES[0]["content"]},
    {"role": "assistant", "content": "386 × 47 = 18142, and 18142 - 1250 = 16892. The answer is 16892."},
    {"role": "user", "content": TIR_EXAMPLES[2]["content"]},
    {"role": "assistant", "content": "12x = 354 - 30 = 324, so x = 324 / 12 = 27. The answer is 27."},
]


class ServeDemoRecipe(Recipe[ServeDemoConfig]):
    name = "serve_demo"
    config_cls = ServeDemoConfig
    description = "agentkit serve + official openai client: suite (a) without tools vs the python-tool agent"

    def setup(self) -> None:
        c = self.config
        self.deadline = time.monotonic() + c.time_limit_s
        self.tasks = arithmetic_suite(c.num_problems, c.seed)
        self.key = "sk-" + secrets.token_hex(8)
        self.server = ServerProcess(
            [
                "-m",
                "agentkit",
                "serve",
                "--model",
                c.model,
                "--agent",
                "tir",
                "--tools",
                "python",
                "--api-key",
                self.key,
            ],
            self.ctx.run_dir / "server.log",
            startup_timeout_s=min(c.startup_timeout_s, c.time_limit_s),
            env={"TOKENIZERS_PARALLELISM": "false"},
        )
        self.server.start()

    def evaluate(self) -> dict[str, Any]:
        import openai

        c = self.config
        # No retries: a failed request is reported with the server's log, not sent again.
        client = openai.OpenAI(
            base_url=f"{self.server.url}/v1", api_key=self.key, max_retries=0, timeout=c.time_limit_s
        )
        try:
            plain_shots = PLAIN_EXAMPLES if c.few_shot else []
            tool_shots = TIR_EXAMPLES if c.few_shot else []
            plain = self._ask(
                client,
                c.model,
                lambda t: [
                    {"role": "system", "content": c.system_prompt},
                    *plain_shots,
                    {"role": "user", "content": t.question},
                ],
            )
            tools = self._ask(client, "agentkit/tir", lambda t: [*tool_shots, {"role": "user", "content": t.question}])
        finally:
            self.server.stop()
        return self._summarise(plain, tools)

    def _ask(self, client, model: str, messages) -> list[dict[str, Any]]:
        """All problems, ``concurrency`` requests in flight at once, within the run's time limit."""
        import openai

        c = self.config
        extra = {"max_turns": c.max_turns} if model.startswith("agentkit/") else None

        def one(task):
            t0 = time.perf_counter()
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            try:
                r = client.with_options(timeout=left).chat.completions.create(
                    model=model,
                    messages=messages(task),
                    temperature=0,
                    max_tokens=c.max_tokens,
                    seed=c.seed,
                    extra_body=extra,
                )
            except openai.APITimeoutError:
                raise TimeoutError from None
            except openai.APIError as e:
                raise self.server.error(f"{model}: request {task.id} failed: {e}") from None
            trace = (r.model_extra or {}).get("agentkit", [{}])[0]
            answer = trace.get("answer") or r.choices[0].message.content or ""
            return {
                "id": task.id,
                "question": task.question,
                "gold": task.answer,
                "output": answer,
                "correct": numeric_match(answer, task.answer),
                "tool_calls": trace.get("tool_calls", 0),
                "seconds": time.perf_counter() - t0,
                "tokens": r.usage.completion_tokens,
            }

        pool = ThreadPoolExecutor(c.concurrency)
        try:
            rows = list(self.ctx.progress(pool.map(one, self.tasks), desc=model, total=len(self.tasks)))
        except TimeoutError:
            raise self.server.error(f"serve_demo did not finish within time_limit_s={c.time_limit_s:g}") from None
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        self.ctx.record(model.replace("/", "_"), {r["id"]: r for r in rows})
        return rows

    def _summarise(self, plain, tools) -> dict[str, Any]:
        plt = pyplot()

        def acc(rows):
            return sum(r["correct"] for r in rows) / len(rows)

        m = {
            "accuracy_without_tools": acc(plain),
            "accuracy_with_python": acc(tools),
            "mean_tool_calls": sum(r["tool_calls"] for r in tools) / len(tools),
            "p50_latency_s_without_tools": percentile([r["seconds"] for r in plain], 0.5),
            "p50_latency_s_with_python": percentile([r["seconds"] for r in tools], 0.5),
            "problems": len(plain),
        }
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
        bars = a1.bar(
            ["no tools", "python tool"],
            [m["accuracy_without_tools"], m["accuracy_with_python"]],
            color=["#8C8C8C", "#4C72B0"],
        )
        a1.bar_label(bars, labels=[f"{sum(r['correct'] for r in x):.0f}/{len(x)}" for x in (plain, tools)])
        a1.set_ylim(0, 1)
        a1.set_ylabel("accuracy")
        a1.set_title(f"{self.config.model} via agentkit serve")
        counts = [r["tool_calls"] for r in tools]
        a2.hist(counts, bins=range(0, max(counts + [1]) + 2), color="#4C72B0", align="left")
        a2.set_xlabel("python calls per problem")
        a2.set_ylabel("problems")
        self.ctx.save_plot(fig, "serve_demo", "Accuracy without tools and with the python tool; tool calls per problem")
        shown = "\n".join(
            f"- **{r['question']}** gold `{r['gold']}`; agent ({r['tool_calls']} calls): `{r['output'][-120:].strip()}`"
            for r in tools[:4]
        )
        self.ctx.add_section("Agent examples", shown)
        print(
            f"\naccuracy without tools: {m['accuracy_without_tools']:.1%}   with the python tool: "
            f"{m['accuracy_with_python']:.1%}   mean tool calls: {m['mean_tool_calls']:.2f}",
            flush=True,
        )
        return m
