"""toollight_sft: Tool-Light's first stage. Correct tool-integrated trajectories (real tool results, tool tokens
masked out of the loss) train the model with TRL's SFTTrainer; the agent is evaluated on held-out questions
before and after, per suite: accuracy, mean tool calls, tokens per answer."""

from __future__ import annotations

from typing import Any

from agentkit.recipe import Recipe
from agentkit.recipes.toollight_sft.config import ToolLightSFTConfig


class ToolLightSFTRecipe(Recipe[ToolLightSFTConfig]):
    name = "toollight_sft"
    config_cls = ToolLightSFTConfig
    description = "Tool-Light SFT stage: train the tag tool format on correct trajectories; agent before vs after"

    def setup(self) -> None:
        from agentkit.data import arithmetic_suite
        from agentkit.data.arithmetic import EASY_KINDS
        from agentkit.data.multihop import MultiHopKB
        from agentkit.engines.hf import HFEngine
        from agentkit.tools.python import PythonTool
        from agentkit.tools.search import SearchTool

        c = self.config
        kb = MultiHopKB.build(c.kb_seed)
        corpus = kb.corpus()
        self.titles = {d["id"]: d["title"] for d in corpus}
        self.tools = {"python": PythonTool(), "search": SearchTool(corpus, top_k=c.search_top_k)}
        self.train_tasks = (arithmetic_suite(c.train_arithmetic, c.train_seed)
                            + arithmetic_suite(c.train_easy, c.train_seed, kinds=EASY_KINDS)
                            + kb.questions(c.train_multihop, c.train_seed))
        self.test = {"arithmetic": arithmetic_suite(c.test_arithmetic, c.test_seed),
                     "multihop": kb.questions(c.test_multihop, c.test_seed)}
        self.engine = HFEngine(c.model)

    # ---- stages -------------------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        import torch

        from agentkit.toollight.sft import to_sft_dataset, train_sft
        from agentkit.toollight.sft_data import make_trajectories

        c = self.config
        metrics = self._evaluate_stage("base")
        saved = self.ctx.run_dir / "state" / "sft-model.pt"
        if saved.exists():  # --resume after training finished: reuse the weights
            self.engine.model.load_state_dict(torch.load(saved, weights_only=True))
            history = self.ctx.done("sft_history").get("history", [])
        else:
            trajs = make_trajectories(self.train_tasks, self.engine.tokenizer, self.tools, self.titles)
            from agentkit.agent.trajectory import to_dataset

            to_dataset(trajs).save_to_disk(str(self.ctx.run_dir / "sft-trajectories"))
            ds = to_sft_dataset(trajs, c.sft.max_length)
            self.ctx.log({"sft_examples": len(ds), "sft_tokens": sum(len(x) for x in ds["input_ids"]),
                          "sft_trained_tokens": sum(sum(t != -100 for t in x) for x in ds["labels"])})
            history, model = train_sft(self.engine.model, self.engine.tokenizer, ds, c.sft,
                                       self.ctx.run_dir / "state" / "trainer", progress=not self.ctx.quiet)
            self.engine.model = model.eval()
            import io

            from agentkit.recipe import atomic_write

            buf = io.BytesIO()
            torch.save(self.engine.model.state_dict(), buf)
            atomic_write(saved, buf.getvalue())
            # A directory any engine loads: `agentkit serve --model RUN_DIR/sft-model`, `bench agent --model …`.
            self.engine.model.save_pretrained(self.ctx.run_dir / "sft-model")
            self.engine.tokenizer.save_pretrained(self.ctx.run_dir / "sft-model")
            self.ctx.record("sft_history", {"history": history})
        for h in history:
            if "loss" in h:
                self.ctx.log({"sft_loss": h["loss"]}, step=int(h.get("step", 0)))
        self._plot_loss(history)
        metrics.update(self._evaluate_stage("sft"))
        return metrics

    def _evaluate_stage(self, stage: str) -> dict[str, Any]:
        from agentkit.agent import AgentConfig, rollout
        from agentkit.eval.metrics import score_task

        c = self.config
        done = self.ctx.done(f"eval_{stage}")
        if not done:
            cfg = AgentConfig(max_turns=c.max_turns, max_tool_calls=c.max_turns,
                              max_tokens_per_turn=c.max_tokens_per_turn,
                              max_total_tokens=c.max_turns * (c.max_tokens_per_turn + 256), temperature=0)
            for suite, tasks in self.test.items():
                tools = [self.tools["python" if suite == "arithmetic" else "search"]]
                trajs = rollout(self.engine, tasks, tools, cfg)
                rows = {}
                for t, tr in zip(tasks, trajs):
                    ok = bool(tr.answer) and score_task(t.metric, tr.answer, t.answer)["correct"] == 1.0
                    rows[f"{suite}/{t.id}"] = {"suite": suite, "correct": float(ok), "tool_calls": tr.tool_calls,
                                               "tokens": int(sum(tr.mask)), "finish": tr.finish,
                                               "text": tr.text[-300:]}
                self.ctx.record(f"eval_{stage}", rows)
                done.update(rows)
        from agentkit.eval.metrics import efficiency

        out = {}
        for suite in self.test:
            rows = [r for r in done.values() if r["suite"] == suite]
            out[f"{stage}/{suite}/accuracy"] = sum(r["correct"] for r in rows) / len(rows)
            # the official convention: math skips answers without calls, QA counts them as one call
            out[f"{stage}/{suite}/efficiency"] = efficiency([r["correct"] for r in rows], [r["tool_calls"] for r in rows],
                                                            "skip" if suite == "arithmetic" else "as_one")
            out[f"{stage}/{suite}/tool_calls"] = sum(r["tool_calls"] for r in rows) / len(rows)
            out[f"{stage}/{suite}/tokens_per_answer"] = sum(r["tokens"] for r in rows) / len(rows)
            out[f"{stage}/{suite}/answered"] = sum(r["finish"] == "answer" for r in rows) / len(rows)
        self.ctx.log(out)
        shown = [r for r in done.values()][:3]
        self.ctx.add_section(f"Agent outputs ({stage})", "\n".join(f"- `{r['text'][-160:]!r}`" for r in shown))
        return out

    def _plot_loss(self, history: list[dict[str, Any]]) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        pts = [(h["step"], h["loss"]) for h in history if "loss" in h]
        if not pts:
            return
        fig, ax = plt.subplots(figsize=(5, 3))
        ax.plot(*zip(*pts), marker="o")
        ax.set_xlabel("step")
        ax.set_ylabel("SFT loss (model tokens only)")
        self.ctx.save_plot(fig, "sft_loss", "SFT training loss")

    def evaluate(self) -> dict[str, Any]:
        self.tools["python"].close()
        return {}
