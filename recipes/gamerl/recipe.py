"""gamerl: Game-RL (arXiv 2505.13886) on the built-in games, as one resumable recipe.

    start model ─ accuracy by game × level (Easy / Medium / Hard)
                ─ held-out accuracy per game (in-domain: fresh questions of the training games; out-of-domain:
                  the held-out games)
                ─ GRPO, seed s (rule-verified reward, level curriculum) ─ the same held-out accuracy

Every evaluation is recorded question by question and every GRPO run checkpoints every ``rl.save_steps`` under
``state/rl/s<seed>`` (with its curriculum), so ``--resume`` continues where the run stopped. The report gives the
level table, per-game accuracy before and after (mean ± std over seeds), in-domain against held-out, training
curves (reward, curriculum levels) and the CPU budget.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

from agentkit.eval.stats import mean_std
from agentkit.files import save_pretrained_dir
from agentkit.gamerl.dataset import GameConfig, create_dataset
from agentkit.gamerl.evaluate import chance, evaluate
from agentkit.gamerl.games import HELD_OUT
from agentkit.gamerl.games.base import LEVELS
from agentkit.models import is_vision_model, load_model, load_vision_model
from agentkit.plots import pyplot
from agentkit.recipe import Recipe
from agentkit.recipes.gamerl.config import GameRLConfig
from agentkit.rl.config import describe_machine, grpo_config


class GameRLRecipe(Recipe[GameRLConfig]):
    name = "gamerl"
    config_cls = GameRLConfig
    description = "Game-RL: GRPO with rule-verified rewards on game questions, curriculum, in-domain vs held-out games"

    def setup(self) -> None:
        c = self.config
        self.held_out = list(c.held_out if c.held_out is not None else [g for g in HELD_OUT if g not in c.games])
        self.eval_games = [*c.games, *self.held_out]
        self.eval_sets = {g: list(self._dataset(g, c.eval_questions, c.eval_seed)) for g in self.eval_games}
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL's documented hook

    def _dataset(self, game: str, size: int, seed: int, level: str | None = None):
        if game.startswith("rg:"):  # reasoning-gym's: its own config, no levels
            return create_dataset(game, size, seed)
        return create_dataset(game, size, seed, **vars(self._game_config(game, level)))

    def _game_config(self, game: str, level: str | None = None) -> GameConfig:
        c = self.config
        tasks = [t.partition(".")[2] for t in c.tasks if t.partition(".")[0] == game]
        return GameConfig(
            level=level or c.eval_level, tasks=tasks, format=c.format, n_options=c.n_options, board=c.inputs
        )

    # ---- the outer loop -----------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        c = self.config
        metrics: dict[str, Any] = {}
        if c.level_questions:
            metrics.update(self._levels())
        metrics.update(self._evaluate("start", c.model))
        for seed in c.seeds:
            key = f"s{seed}"
            if not self.ctx.done("runs").get(key):
                history, seen = self._rl(seed, key)
                overlap = sum(e["question"] in seen for g in c.games for e in self.eval_sets[g])
                self.ctx.record("runs", {key: {"history": history, "eval_questions_trained_on": overlap}})
            metrics.update(self._evaluate(key, str(self._model_dir(key))))
        metrics.update(self._compare(metrics))
        return metrics

    def _model_dir(self, name: str) -> Path:
        return self.ctx.run_dir / "models" / name

    # ---- evaluation ---------------------------------------------------------------------------------------
    def _answer(self, name: str, model: str, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Greedy answers of ``model`` to ``entries``, recorded once under ``name`` (resumable per batch)."""
        done = self.ctx.done(name)
        todo = [i for i in range(len(entries)) if str(i) not in done]
        if todo and self.ctx.is_main:
            engine = self._engine(model)
            try:
                for start in self.ctx.progress(range(0, len(todo), 32), desc=f"evaluate {name}"):
                    part = todo[start : start + 32]
                    rows = evaluate(engine, [entries[i] for i in part], self.config.eval_max_tokens)
                    self.ctx.record(name, {str(i): r for i, r in zip(part, rows)})
                    done.update({str(i): r for i, r in zip(part, rows)})
            finally:
                engine.close()
        self.ctx.state.wait_for_everyone()
        done = self.ctx.done(name) or done
        return [done[str(i)] for i in range(len(entries))]

    def _engine(self, model: str):
        """The engine that answers as ``model`` (the starting model, or a trained one's directory): built on it (hf:
        a VisionEngine on a vision model); on servers (``SHARED_SERVERS``), their own model, given a trained
        model's weights (its adapter where the run saved one, which servers load at run time)."""
        c = self.config
        if not c.engine.SHARED_SERVERS:
            return c.engine.build(model, name=c.model)
        engine = c.engine.build(None)
        if model != c.model:
            adapter = Path(f"{model}-lora")
            engine.load_weights(path=str(adapter if adapter.is_dir() else model))
        return engine

    def _evaluate(self, name: str, model: str) -> dict[str, float]:
        entries = [e for g in self.eval_games for e in self.eval_sets[g]]
        rows = self._answer(f"eval_{name}", model, entries)
        out = {}
        for g in self.eval_games:
            scores = [r["score"] for r in rows if r["game"] == g]
            out[f"{name}/{g}"] = sum(scores) / len(scores)
        for part, games in (("in_domain", self.config.games), ("held_out", self.held_out)):
            if games:
                out[f"{name}/{part}"] = statistics.mean(out[f"{name}/{g}"] for g in games)
        self.ctx.log(out)
        return out

    def _levels(self) -> dict[str, float]:
        """The starting model's accuracy on every game at every level (does a level change difficulty?)."""
        c = self.config
        leveled = [g for g in self.eval_games if not g.startswith("rg:")]
        entries = [
            e for g in leveled for lv in LEVELS for e in self._dataset(g, c.level_questions, c.eval_seed + 7, lv)
        ]
        rows = self._answer("levels", c.model, entries)
        out, lines = {}, ["| game | " + " | ".join(LEVELS) + " | chance (Easy) |", "|---|---|---|---|---|"]
        for g in leveled:
            cells = []
            for lv in LEVELS:
                scores = [r["score"] for r in rows if r["game"] == g and r["level"] == lv]
                out[f"level/{g}/{lv}"] = sum(scores) / len(scores)
                cells.append(f"{out[f'level/{g}/{lv}']:.2f}")
            easy = [e for e in entries if e["metadata"]["game"] == g and e["metadata"]["qa_level"] == "Easy"]
            lines.append(f"| {g} | " + " | ".join(cells) + f" | {chance(easy):.2f} |")
        overall = [statistics.mean(out[f"level/{g}/{lv}"] for g in leveled) for lv in LEVELS]
        out.update({f"level/{lv}": v for lv, v in zip(LEVELS, overall)})
        lines.append("| **all games** | " + " | ".join(f"**{v:.2f}**" for v in overall) + " | |")
        self.ctx.add_section(
            "The starting model by level",
            f"Greedy accuracy of `{c.model}` on {c.level_questions} questions per game and level ({c.format} "
            "format; chance is what guessing among the options scores).\n\n" + "\n".join(lines),
        )
        return out

    # ---- one GRPO run -------------------------------------------------------------------------------------
    def _rl(self, seed: int, key: str) -> tuple[list[dict[str, Any]], set[str]]:
        from agentkit.gamerl.curriculum import Curriculum
        from agentkit.gamerl.reward import GameReward
        from agentkit.gamerl.trainer import GameGRPOTrainer, game_rows
        from agentkit.toollight.sft import lora_config

        c, r = self.config, self.config.rl
        model, tok = (load_vision_model if is_vision_model(c.model) else load_model)(c.model)  # tok: or a processor
        agent = r.agent.with_sampling(seed=seed)
        configs = {g: self._game_config(g, c.curriculum.start) for g in c.games}
        data = game_rows(c.games, c.train_questions, c.train_seed, configs, agent).shuffle(seed=seed)
        curriculum = Curriculum(list(c.games), c.curriculum) if c.use_curriculum else None
        out = self.ctx.run_dir / "state" / "rl" / key
        trainer = GameGRPOTrainer(
            model,
            grpo_config(r, out, seed, self.ctx.state.num_processes, self.ctx.quiet),
            data,
            processing_class=tok,
            agent=agent,
            engine=c.engine,
            outcome=GameReward(c.format_score, self._judge()),
            peft_config=lora_config(r.lora_r) if r.lora_r else None,
            curriculum=curriculum,
            game_configs=configs,
            question_seed=seed,
        )
        resume = any(out.glob("checkpoint-*"))
        if resume and curriculum is not None:
            from transformers.trainer_utils import get_last_checkpoint

            from agentkit.gamerl.trainer import CurriculumState

            state = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, CurriculumState))
            state.restore(get_last_checkpoint(str(out)))
        try:
            trainer.train(resume_from_checkpoint=True if resume else None)
        finally:
            trainer.close()
        if r.lora_r and self.ctx.is_main:  # the adapter itself, servable per request (agentkit serve --lora)
            save_pretrained_dir(self._model_dir(key + "-lora"), trainer.model, tok)
        policy = trainer.model.merge_and_unload() if r.lora_r else trainer.model
        if self.ctx.is_main:
            save_pretrained_dir(self._model_dir(key), policy, tok)
        self.ctx.state.wait_for_everyone()
        history = [h for h in trainer.state.log_history if "step" in h]
        for h in history:
            self.ctx.log({"run": key, **{k: v for k, v in h.items() if isinstance(v, (int, float))}}, step=h["step"])
        return history, trainer.seen

    def _judge(self):
        if not self.config.judge:
            return None
        from agentkit.gamerl.verifiers import Judge

        return Judge(self.config.engine.build(self.config.judge))

    # ---- report -------------------------------------------------------------------------------------------
    def _compare(self, metrics: dict[str, Any]) -> dict[str, float]:
        c = self.config
        runs = self.ctx.done("runs")
        keys = [f"s{s}" for s in c.seeds]
        out: dict[str, float] = {}
        lines = ["| game | split | start | after GRPO (mean ± std) | change | per seed |", "|---|---|---|---|---|---|"]
        for g in [*self.eval_games, "in_domain", "held_out"]:
            if f"start/{g}" not in metrics:
                continue
            after = [metrics[f"{k}/{g}"] for k in keys]
            m, s = mean_std(after)
            out[f"after/{g}_mean"], out[f"after/{g}_std"] = m, s
            split = "—" if g in ("in_domain", "held_out") else "in-domain" if g in c.games else "held-out"
            name = f"**{g.replace('_', '-')} average**" if split == "—" else g
            lines.append(
                f"| {name} | {split} | {metrics[f'start/{g}']:.3f} | {m:.3f} ± {s:.3f} | "
                f"{m - metrics[f'start/{g}']:+.3f} | {' / '.join(f'{a:.3f}' for a in after)} |"
            )
        hist = {k: runs[k]["history"] for k in keys if k in runs}
        minutes = {k: sum(h.get("step_time", 0.0) for h in v) / 60 for k, v in hist.items()}
        overlap = sum(runs[k].get("eval_questions_trained_on", 0) for k in keys if k in runs)
        r = c.rl
        self.ctx.add_section(
            "Held-out accuracy before and after GRPO",
            "\n".join(lines)
            + f"\n\n{c.eval_questions} held-out questions per game at level {c.eval_level} ({c.format} format), "
            f"answered greedily. Training games: {', '.join(c.games)}; held-out games: {', '.join(self.held_out) or 'none'}. "
            f"Each run: {r.steps} steps × {r.questions_per_step} questions × G={r.group_size}, lr {r.learning_rate}, "
            f"{r.loss_type} loss, β={r.beta}"
            + (f", LoRA r={r.lora_r}" if r.lora_r else "")
            + f", curriculum {'on' if c.use_curriculum else 'off'}. Evaluation questions also drawn in training: "
            f"{overlap} (all seeds). Training time: "
            + ", ".join(f"{k} {m:.1f} min" for k, m in minutes.items())
            + f" on {describe_machine()}.",
        )
        self._plot(hist)
        return out

    def _plot(self, hist: dict[str, list[dict[str, Any]]]) -> None:
        plt = pyplot()
        games = self.config.games
        fig, axes = plt.subplots(1, 2, figsize=(9, 3))
        for run, rows in sorted(hist.items()):
            pts = [(h["step"], h["reward"]) for h in rows if "reward" in h]
            if pts:
                axes[0].plot(*zip(*pts), alpha=0.8, label=run)
            for g in games:
                lv = [(h["step"], h[f"level/{g}"]) for h in rows if f"level/{g}" in h]
                if lv and run == sorted(hist)[0]:
                    axes[1].step(*zip(*lv), where="post", label=g)
        axes[0].set_title("batch reward (accuracy)")
        axes[1].set_title(f"curriculum level ({sorted(hist)[0] if hist else '-'})")
        axes[1].set_yticks([1, 2, 3], LEVELS)
        for ax in axes:
            ax.set_xlabel("step")
            if ax.get_lines():
                ax.legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "training", "Per-step batch reward of every run, and the curriculum's level per game")

    def evaluate(self) -> dict[str, Any]:
        return {}
