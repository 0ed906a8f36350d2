"""tips: TIPS (arXiv 2603.22293) against outcome-only RL, with GRPO and with PPO, on multi-hop search questions, as
one resumable recipe.

    base ─ SFT (Tool-Light's stage, ideal search trajectories) ─┬─ grpo, seed s      (outcome reward, grpo)
                                                                 ├─ tips, seed s      (TIPS shaping, tips_segment)
                                                                 ├─ ppo, seed s       (outcome reward, critic + GAE)
                                                                 └─ tips_ppo, seed s  (TIPS shaping, critic + GAE)

Every run starts from the same warm start, trains ``rl.steps`` steps with ``AgentGRPOTrainer`` or
``AgentPPOTrainer`` (checkpoints
every ``rl.save_steps`` under ``state/rl/<run>``; ``--resume`` continues a run from its last checkpoint and skips
finished runs) and is evaluated greedily on the held-out questions. The report compares the methods across seeds:
EM / F1 (mean ± std), reward curves, |ΔΦ| and α, KL, gradient norm, and collapse events (a run whose batch
reward stayed at 0 for five steps, or whose held-out EM ended below its warm start by more than 0.1).
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any

from agentkit.agent import rollout
from agentkit.data.multihop import MultiHopKB
from agentkit.data.tasks import split_held_out
from agentkit.engines.config import HFConfig
from agentkit.errors import AgentkitError
from agentkit.eval.stats import mean_std, paired_delta, t_interval
from agentkit.files import save_pretrained_dir
from agentkit.models import load_model
from agentkit.plots import pyplot
from agentkit.recipe import Recipe
from agentkit.recipes.tips.config import TipsConfig
from agentkit.rl.config import describe_machine, grpo_config
from agentkit.tools.search import SearchTool

METHOD_ESTIMATOR = {"grpo": "grpo", "tips": "tips_segment"}  # ppo and tips_ppo: GAE with a critic
SHAPED = {"tips", "tips_ppo"}


class TipsRecipe(Recipe[TipsConfig]):
    name = "tips"
    config_cls = TipsConfig
    description = "TIPS: turn-level information-potential shaping vs outcome-only GRPO for a search agent"

    def setup(self) -> None:
        c = self.config
        if c.teacher != "lagged":
            from agentkit.models.catalog import resolve

            resolve(c.teacher)  # an unknown teacher fails now, before any training
        kb = MultiHopKB.build(c.kb_seed)
        corpus = kb.corpus()
        self.titles = {d["id"]: d["title"] for d in corpus}
        self.tool = SearchTool(corpus, top_k=c.search_top_k)
        # held out for real: no test question is trained on, in SFT or in RL (two seeds can draw the same one)
        test = kb.questions(c.test_questions, c.test_seed)
        self.sft_tasks, test = split_held_out(kb.questions(c.sft_questions, c.sft_seed), test)
        self.train_tasks, self.test_tasks = split_held_out(kb.questions(c.train_questions, c.train_seed), test)
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL's documented hook

    # ---- the outer loop -----------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        c = self.config
        start = self._warm_start()
        metrics = self._evaluate("warm_start", start)
        runs = [(m, s) for s in c.seeds for m in c.methods]  # seed by seed: a partial comparison stays paired
        for method, seed in runs:
            key = f"{method}-s{seed}"
            if not self.ctx.done("runs").get(key):
                history = self._rl(method, seed, start, key)
                self.ctx.record("runs", {key: {"history": history}})
            metrics.update(self._evaluate(key, self._model_dir(key)))
        metrics.update(self._compare(runs, metrics))
        return metrics

    def _model_dir(self, name: str) -> Path:
        return self.ctx.run_dir / "models" / name

    def _save(self, model, tokenizer, name: str) -> Path:
        final = self._model_dir(name)
        if self.ctx.is_main:
            save_pretrained_dir(final, model, tokenizer)
        self.ctx.state.wait_for_everyone()
        return final

    def _warm_start(self) -> Path:
        """The tool-tuned model every run starts from: init_model, or the SFT stage run once.

        A run folder kept without its models (a committed comparison resumed in a later session) rebuilds the SFT
        stage and goes on only if the rebuilt weights equal the recorded ones bit for bit (``weights_digest``):
        the runs still to come then start from the same warm start as the finished ones."""
        c = self.config
        if c.init_model:
            return Path(c.init_model)
        recorded = self.ctx.done("stages").get("sft")
        if recorded and (self._model_dir("sft") / "config.json").exists():
            return self._model_dir("sft")
        from agentkit.files import weights_digest
        from agentkit.toollight.sft import to_sft_dataset, train_sft
        from agentkit.toollight.sft_data import make_trajectories

        model, tok = load_model(c.model)
        trajs = make_trajectories(self.sft_tasks, tok, {"search": self.tool}, self.titles)
        ds = to_sft_dataset(trajs, c.sft.max_length)
        history, model = train_sft(
            model, tok, ds, c.sft, self.ctx.run_dir / "state" / "sft", progress=not self.ctx.quiet
        )
        digest = weights_digest(model)
        if recorded and recorded.get("digest") != digest:
            raise AgentkitError(
                f"sft: the rebuilt warm start differs from the one this run recorded (weights {digest[:12]} vs "
                f"{str(recorded.get('digest'))[:12]}), so the runs still to come would not start where the "
                "finished ones did",
                "resume on the machine and versions that made the run, or start a new output directory",
            )
        path = self._save(model, tok, "sft")
        if not recorded:
            self.ctx.record("stages", {"sft": {"history": history, "examples": len(ds), "digest": digest}})
        return path

    # ---- one RL run -------------------------------------------------------------------------------------
    def _rl(self, method: str, seed: int, start: Path, key: str) -> list[dict[str, Any]]:
        from agentkit.rl.ppo import AgentPPOTrainer
        from agentkit.rl.trainer import AgentGRPOTrainer, TeacherRefresh, agent_dataset

        c, r = self.config, self.config.rl
        model, tok = load_model(str(start))
        agent = r.agent.with_sampling(seed=seed)
        data = agent_dataset(self.train_tasks, [self.tool], agent).shuffle(seed=seed)
        shaper, callbacks, teacher = None, [], None
        if method in SHAPED:
            shaper, teacher = self._shaper(model, tok)
            if c.teacher == "lagged":
                callbacks.append(TeacherRefresh(teacher, c.teacher_refresh))
        out = self.ctx.run_dir / "state" / "rl" / key
        common = dict(processing_class=tok, tools=[self.tool], agent=agent, engine=c.engine, shaper=shaper)
        common.update(outcome=c.outcome, callbacks=callbacks, peft_config=_lora(r.lora_r))
        args = grpo_config(self.config.rl, out, seed, self.ctx.state.num_processes, self.ctx.quiet)
        if method in METHOD_ESTIMATOR:
            estimator = c.estimator or METHOD_ESTIMATOR[method]
            trainer = AgentGRPOTrainer(model, args, data, estimator=estimator, rollout_ahead=r.rollout_ahead, **common)
        else:
            trainer = AgentPPOTrainer(model, args, data, ppo=c.ppo, **common)
        resume = any(out.glob("checkpoint-*"))
        if resume and callbacks:
            from transformers.trainer_utils import get_last_checkpoint

            callbacks[0].restore(get_last_checkpoint(str(out)))
        try:
            trainer.train(resume_from_checkpoint=True if resume else None)
        finally:
            trainer.close()
            if teacher is not None:
                teacher.close()
        if r.lora_r and self.ctx.is_main:  # the adapter itself, servable per request (agentkit serve --lora)
            save_pretrained_dir(self._model_dir(key + "-lora"), trainer.model, tok)
        policy = trainer.model.merge_and_unload() if r.lora_r else trainer.model
        self._save(policy, tok, key)
        history = [h for h in trainer.state.log_history if "step" in h]
        for h in history:
            self.ctx.log({"run": key, **{k: v for k, v in h.items() if isinstance(v, (int, float))}}, step=h["step"])
        return history

    def _shaper(self, model, tok):
        """TIPS' shaper and its teacher engine: a frozen copy of the starting policy (refreshed by a callback)
        or a fixed model."""
        from agentkit.rl.trainer import build_with_weights, snapshot
        from agentkit.tips.shaping import InfoPotentialShaper

        c = self.config
        if c.teacher == "lagged":
            teacher = build_with_weights(c.teacher_engine, snapshot(model), tokenizer=tok, name=c.model)
        else:
            teacher = c.teacher_engine.build(c.teacher)
        policy_tokens = (
            HFConfig(model=None).build(model, tokenizer=tok, name=c.model) if c.teacher != "lagged" else None
        )
        return InfoPotentialShaper(teacher, c.shaping, policy_tokens=policy_tokens), teacher

    # ---- evaluation and report ----------------------------------------------------------------------------
    def _evaluate(self, name: str, path: Path) -> dict[str, float]:
        """Greedy agent on the held-out questions: EM, F1, answered, tool calls (recorded once per model)."""
        rows = self.ctx.done(f"eval_{name}")
        if not rows and self.ctx.is_main:
            from agentkit.engines.hf import HFEngine

            model, tok = load_model(str(path))
            engine = HFEngine(model, tok, name=self.config.model)
            trajs = rollout(engine, self.test_tasks, [self.tool], self.config.eval)
            for task, t in zip(self.test_tasks, trajs):
                score = self.config.outcome(t, [task.answer])
                rows[task.id] = {**score, "tool_calls": t.tool_calls, "answered": float(t.answer is not None)}
            self.ctx.record(f"eval_{name}", rows)
            engine.close()
        self.ctx.state.wait_for_everyone()
        rows = self.ctx.done(f"eval_{name}") or rows
        out = {
            f"{name}/{k}": sum(r[k] for r in rows.values()) / len(rows) for k in ("em", "f1", "answered", "tool_calls")
        }
        self.ctx.log(out)
        return out

    def _compare(self, runs: list[tuple[str, int]], metrics: dict[str, Any]) -> dict[str, float]:
        """Mean ± std over seeds per method, collapse events, the table and the plots."""
        c = self.config
        hist = {k: v["history"] for k, v in self.ctx.done("runs").items()}
        base = metrics["warm_start/em"]
        out: dict[str, float] = {}
        lines = [
            "| method | runs | EM (mean ± std) | F1 (mean ± std) | tool calls | collapses |",
            "|---|---|---|---|---|---|",
            f"| warm start | 1 | {base:.3f} | {metrics['warm_start/f1']:.3f} | "
            f"{metrics['warm_start/tool_calls']:.2f} | — |",
        ]
        for method in c.methods:
            keys = [f"{method}-s{s}" for m, s in runs if m == method]
            em = [metrics[f"{k}/em"] for k in keys]
            f1 = [metrics[f"{k}/f1"] for k in keys]
            calls = [metrics[f"{k}/tool_calls"] for k in keys]
            collapses = sum(_collapsed(hist.get(k, []), metrics[f"{k}/em"], base) for k in keys)
            (em_m, em_s), (f1_m, f1_s) = mean_std(em), mean_std(f1)
            out.update({f"{method}/em_mean": em_m, f"{method}/em_std": em_s})
            out.update({f"{method}/f1_mean": f1_m, f"{method}/f1_std": f1_s})
            out[f"{method}/collapses"] = collapses
            lines.append(
                f"| {method} | {len(keys)} | {em_m:.3f} ± {em_s:.3f} | {f1_m:.3f} ± {f1_s:.3f} | "
                f"{statistics.mean(calls):.2f} | {collapses} |"
            )
        r = c.rl
        per_run = [
            "| run | EM | F1 | tool calls | answered | training minutes | collapsed |",
            "|---|---|---|---|---|---|---|",
        ]
        minutes = []
        for method, seed in runs:
            k = f"{method}-s{seed}"
            mins = sum(h.get("step_time", 0.0) for h in hist.get(k, [])) / 60
            minutes.append(mins)
            per_run.append(
                f"| {k} | {metrics[k + '/em']:.3f} | {metrics[k + '/f1']:.3f} | {metrics[k + '/tool_calls']:.2f} | "
                f"{metrics[k + '/answered']:.2f} | {mins:.1f} | {_collapsed(hist.get(k, []), metrics[k + '/em'], base)} |"
            )
        paired, stats = self._paired(runs, metrics)
        out.update(stats)
        self.ctx.add_section(
            "Held-out questions after RL (greedy agent)",
            "\n".join(lines)
            + ("\n\n" + paired if paired else "")
            + f"\n\n{len(self.test_tasks)} held-out questions (distinct, none of them in the SFT or RL questions); each run: {r.steps} steps × {r.questions_per_step} "
            f"questions × G={r.group_size}, lr {r.learning_rate}, {r.loss_type} loss, β={r.beta}"
            + (
                f" (PPO: {c.ppo.critic} critic, vf_coef {c.ppo.vf_coef}, γ={c.ppo.gamma}, λ={c.ppo.lam}, "
                f"KL {'in the reward' if c.ppo.kl_in_reward else 'in the loss'})"
                if set(c.methods) - set(METHOD_ESTIMATOR)
                else ""
            )
            + (f", LoRA r={r.lora_r}" if r.lora_r else "")
            + f". Training time, all runs: {sum(minutes):.0f} min on {describe_machine()}.\n\n"
            + "\n".join(per_run),
        )
        self._plot(hist)
        return out

    def _paired(self, runs: list[tuple[str, int]], metrics: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Each shaped method against its outcome-only twin (tips vs grpo, tips_ppo vs ppo) on the seeds both ran:
        ``em_gap`` per pair, as a table and as metrics."""
        lines, out = [], {}
        for base, shaped in (("grpo", "tips"), ("ppo", "tips_ppo")):
            seeds = sorted({s for m, s in runs if m == base} & {s for m, s in runs if m == shaped})
            if not seeds:
                continue
            per_seed = {
                m: [{q: r["em"] for q, r in self.ctx.done(f"eval_{m}-s{s}").items()} for s in seeds]
                for m in (base, shaped)
            }
            g = em_gap(per_seed[base], per_seed[shaped])
            out.update({f"{shaped}_vs_{base}/{k}": v for k, v in g.items()})
            row = f"| {shaped} − {base} | {len(seeds)} | {g['em_delta']:+.3f} | "
            if "welch_p" in g:
                lo, hi = g["em_delta_seed_ci"]
                row += f"[{lo:+.3f}, {hi:+.3f}] | t = {g['welch_t']:.2f}, p = {g['welch_p']:.3f} | "
            else:
                row += "— | — | "
            lo, hi = g["em_delta_question_ci"]
            lines.append(row + f"[{lo:+.3f}, {hi:+.3f}] |")
        if not lines:
            return "", out
        head = [
            "| comparison | seeds | EM gap | 95 % t interval over seeds (paired by seed) | Welch's t test on run means "
            "| 95 % paired bootstrap over questions (seed means) |",
            "|---|---|---|---|---|---|",
        ]
        return "\n".join(head + lines), out

    def _plot(self, hist: dict[str, list[dict[str, Any]]]) -> None:
        plt = pyplot()
        panels = [
            ("reward", "outcome reward (batch mean)"),
            ("outcome/em", "EM of the rollouts"),
            ("tips/delta_phi_abs", "mean |ΔΦ| (tips)"),
            ("grad_norm", "gradient norm"),
        ]
        if any("ppo/value_loss" in h for rows in hist.values() for h in rows):
            panels.append(("ppo/value_loss", "value loss (ppo)"))
        fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3))
        colors = {"grpo": "tab:blue", "tips": "tab:orange", "ppo": "tab:green", "tips_ppo": "tab:red"}
        for ax, (key, title) in zip(axes, panels):
            for run, rows in sorted(hist.items()):
                pts = [(h["step"], h[key]) for h in rows if key in h]
                if pts:
                    method = run.split("-s")[0]
                    ax.plot(*zip(*pts), color=colors.get(method), alpha=0.7, label=method)
            ax.set_title(title)
            ax.set_xlabel("step")
        handles = {h.get_label(): h for ax in axes for h in ax.get_lines()}
        if handles:
            axes[0].legend(handles.values(), handles.keys())
        fig.tight_layout()
        self.ctx.save_plot(fig, "training", "Per-step training curves of every run (one line per seed)")

    def evaluate(self) -> dict[str, Any]:
        return {}


def em_gap(base: list[dict[str, float]], shaped: list[dict[str, float]]) -> dict[str, Any]:
    """The held-out EM gap of a shaped method over its outcome-only twin, three ways, each with what it can see.

    ``base[i]`` and ``shaped[i]`` are seed i's runs, ``{question id: EM}`` over the same questions. The gap is the
    mean over seeds of EM(shaped) − EM(base).

    - ``em_delta_seed_ci``: the 95 % t interval of the per-seed differences, paired by seed (a seed fixes the RL
      question draws for both): training randomness, wide at 3 seeds;
    - ``welch_t``, ``welch_p``: Welch's t test on the two sets of run means (the first TIPS-GRPO result's statistic);
    - ``em_delta_question_ci``: each question's EM averaged over the seeds, the 95 % paired-bootstrap interval over
      questions (which questions were drawn; blind to seed-to-seed variation, so the narrower).

    The first two need two seeds or more.

    >>> g = em_gap([{"a": 0, "b": 1}, {"a": 0, "b": 0}], [{"a": 1, "b": 1}, {"a": 1, "b": 0}])
    >>> g["em_delta"], [round(x, 3) for x in g["em_delta_seed_ci"]], g["em_delta_question_ci"]
    (0.5, [0.5, 0.5], [0.0, 1.0])
    """
    from scipy import stats as st

    run_em = [[statistics.mean(r.values()) for r in runs] for runs in (base, shaped)]
    d = [y - x for x, y in zip(*run_em)]
    out: dict[str, Any] = {"em_delta": statistics.mean(d)}
    if len(d) > 1:
        welch = st.ttest_ind(run_em[1], run_em[0], equal_var=False)
        out["em_delta_seed_ci"] = list(t_interval(d))
        out["welch_t"], out["welch_p"] = float(welch.statistic), float(welch.pvalue)
    qs = sorted(base[0])
    per_q = [[statistics.mean(r[q] for r in runs) for q in qs] for runs in (base, shaped)]
    _, lo, hi = paired_delta(per_q[1], per_q[0])
    out["em_delta_question_ci"] = [lo, hi]
    return out


def _collapsed(history: list[dict[str, Any]], em: float, base: float) -> bool:
    """Five consecutive steps with zero batch reward, or held-out EM more than 0.1 below the warm start."""
    zeros = longest = 0
    for h in history:
        zeros = zeros + 1 if h.get("reward", 1.0) == 0 else 0
        longest = max(longest, zeros)
    return longest >= 5 or em < base - 0.1


def _lora(r: int):
    from agentkit.toollight.sft import lora_config

    return lora_config(r)
