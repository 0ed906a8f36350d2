"""uncertainty_ensemble: members of comparable accuracy for cross-model EU, trained here (issue: scale-matched
ensemble; method in ``agentkit.uncertainty.ensemble``).

    reference ─ greedy dev accuracy (the target)
    member m  ─ dev accuracy of its base ─ SFT on its own suite questions, a dev evaluation (and a checkpoint)
                every eval_every steps, stop within tolerance of the target ─ the closest checkpoint, merged,
                saved under models/<name>
    ensemble.json ─ `agentkit uncertainty generate --models @RUN/ensemble.json`

Every dev evaluation is recorded and every member checkpoints at each evaluation, so ``--resume`` continues a
member where it stopped and skips finished ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentkit.files import save_pretrained_dir
from agentkit.models import load_model
from agentkit.plots import pyplot
from agentkit.recipe import Recipe
from agentkit.recipes.uncertainty_ensemble.config import EnsembleConfig, MemberConfig
from agentkit.uncertainty.ensemble import dev_accuracy, sft_rows, write_ensemble
from agentkit.uncertainty.generate import load_tasks


class EnsembleRecipe(Recipe[EnsembleConfig]):
    name = "uncertainty_ensemble"
    config_cls = EnsembleConfig
    description = (
        "members of comparable accuracy for cross-model EU: SFT on suite questions to the reference's accuracy"
    )

    def setup(self) -> None:
        c = self.config
        self.dev = self._tasks(c.dev_questions, c.dev_seed)

    def _tasks(self, n: int, seed: int):
        """``n`` questions of each suite at ``seed``, as ``uncertainty generate --tasks`` draws them."""
        return load_tasks(",".join(f"{s}:{n}" for s in self.config._suites()), seed)

    def _accuracy(self, key: str, model, tok=None) -> dict[str, float]:
        """Greedy dev accuracy, recorded once under ``key``."""
        done = self.ctx.done("dev")
        if key not in done:
            from agentkit.engines.hf import HFEngine

            engine = HFEngine(model, tok)  # a name loads its own tokenizer (tok None)
            desc = None if self.ctx.quiet else f"dev {key}"
            acc = dev_accuracy(engine, self.dev, self.config.max_tokens, self.config.few_shot, desc)
            self.ctx.record("dev", {key: acc})
            done[key] = acc
        return done[key]

    def train(self) -> dict[str, Any]:
        c = self.config
        target = self._accuracy("reference", c.reference)["accuracy"]
        self.ctx.log({"reference/accuracy": target})
        members = self.ctx.each("members", [(m.name,) for m in c.members], self._member, desc="members")
        entries = [{"name": m.name, "path": members[m.name]["path"], **members[m.name]} for m in c.members]
        reference = {"name": Path(c.reference).name, "path": c.reference, "accuracy": target}
        write_ensemble(self.ctx.run_dir / "ensemble.json", reference, entries)
        self._report(target, members)
        out = {"reference/accuracy": target}
        for m in c.members:
            out[f"{m.name}/accuracy"] = members[m.name]["accuracy"]
            out[f"{m.name}/steps"] = members[m.name]["step"]
        return out

    # ---- one member ---------------------------------------------------------------------------------------
    def _member(self, name: str) -> dict[str, Any]:
        m = next(x for x in self.config.members if x.name == name)
        model, tok = load_model(m.base)
        target = self.ctx.done("dev")["reference"]["accuracy"]
        history = {0: self._accuracy(f"{name}@0", model, tok)}
        if m.max_steps:
            history.update(self._sft(m, model, tok, target))
        best = min(
            (s for s in history if s >= m.min_steps or s == max(history)),
            key=lambda s: (abs(history[s]["accuracy"] - target), -s),
        )
        path = self.ctx.run_dir / "models" / name
        save_pretrained_dir(path, self._weights_at(m, best), tok)
        return {"path": str(path), "step": best, **history[best]}

    def _state(self, name: str) -> Path:
        return self.ctx.run_dir / "state" / "members" / name

    def _sft(self, m: MemberConfig, model, tok, target: float) -> dict[int, dict[str, float]]:
        """SFT in steps of eval_every with a dev evaluation (and a checkpoint) at each; returns step -> accuracy."""
        import datasets
        from transformers import TrainerCallback
        from trl import SFTConfig

        from agentkit.toollight.sft import SFTSettings, labelled_logits_trainer, lora_config, release, trainer_args

        c = self.config
        history = {int(k.split("@")[1]): v for k, v in self.ctx.done("dev").items() if k.startswith(f"{m.name}@")}
        met = [s for s, a in history.items() if s >= max(m.min_steps, 1) and abs(a["accuracy"] - target) <= c.tolerance]
        if met or max(history) >= m.max_steps:
            return history  # an earlier attempt reached the stop: only the final save was left
        rows = sft_rows(tok, self._tasks(c.train_questions, m.data_seed), c.few_shot)
        recipe, every = self, m.eval_every or c.eval_every

        class DevCheck(TrainerCallback):
            def on_step_end(self, args, state, control, model=None, **kw):
                step = state.global_step
                if step % every and step != m.max_steps:
                    return
                training = model.training
                acc = recipe._accuracy(f"{m.name}@{step}", model, tok)
                model.train(training)
                history[step] = acc
                recipe.ctx.log({f"{m.name}/dev_accuracy": acc["accuracy"]}, step=step)
                control.should_save = True
                if step >= m.min_steps and abs(acc["accuracy"] - target) <= c.tolerance:
                    control.should_training_stop = True

        settings = SFTSettings(learning_rate=m.learning_rate, batch_size=m.batch_size, seed=m.train_seed)
        args = trainer_args(settings, len(rows), self._state(m.name), not self.ctx.quiet)
        args.update(max_steps=m.max_steps, save_strategy="no", logging_steps=max(1, every // 2))
        patched = "forward" in model.__dict__
        trainer = labelled_logits_trainer()(
            model=model,
            args=SFTConfig(**args, dataset_num_proc=None),
            train_dataset=datasets.Dataset.from_list(rows),
            processing_class=tok,
            peft_config=lora_config(m.lora_r),
            callbacks=[DevCheck()],
        )
        resume = any(self._state(m.name).glob("checkpoint-*"))
        model.train()
        trainer.train(resume_from_checkpoint=True if resume else None)
        release([model, trainer.model], patched)
        return history

    def _weights_at(self, m: MemberConfig, step: int):
        """The member's model at ``step``: its checkpoint (LoRA merged), or at step 0 the base as it is."""
        base, _ = load_model(m.base)
        if step == 0:
            return base
        ckpt = self._state(m.name) / f"checkpoint-{step}"
        if not m.lora_r:
            from transformers import AutoModelForCausalLM

            return AutoModelForCausalLM.from_pretrained(str(ckpt))
        from peft import PeftModel

        return PeftModel.from_pretrained(base, str(ckpt)).merge_and_unload()

    # ---- report -------------------------------------------------------------------------------------------
    def _report(self, target: float, members: dict[str, Any]) -> None:
        c = self.config
        dev = self.ctx.done("dev")
        kinds = [k for k in dev["reference"] if k != "accuracy"]
        head = "| model | base | SFT steps (kept) | dev accuracy | " + " | ".join(kinds) + " |"
        lines = [head, "|" + "---|" * (4 + len(kinds))]
        ref = dev["reference"]
        lines.append(
            f"| reference | {c.reference} | — | {ref['accuracy']:.3f} | "
            + " | ".join(f"{ref[k]:.2f}" for k in kinds)
            + " |"
        )
        for m in c.members:
            r = members[m.name]
            lines.append(
                f"| {m.name} | {m.base} | {r['step']} | {r['accuracy']:.3f} ({r['accuracy'] - target:+.3f}) | "
                + " | ".join(f"{r.get(k, float('nan')):.2f}" for k in kinds)
                + " |"
            )
        self.ctx.add_section(
            "Members",
            "\n".join(lines)
            + f"\n\nGreedy accuracy on {len(self.dev)} dev questions ({c.suites}, seed {c.dev_seed}), judged as "
            f"`uncertainty score` judges (label auto). Training stops within ±{c.tolerance} of the reference; the "
            "kept step is the evaluated one closest to it. Use: `agentkit uncertainty generate --models "
            f"@{self.ctx.run_dir / 'ensemble.json'} --tasks …`.",
        )
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.axhspan(target - c.tolerance, target + c.tolerance, color="0.85", label="reference ± tolerance")
        ax.axhline(target, color="0.4", lw=1)
        for m in c.members:
            pts = sorted((int(k.split("@")[1]), v["accuracy"]) for k, v in dev.items() if k.startswith(f"{m.name}@"))
            ax.plot(*zip(*pts), marker="o", label=m.name)
        ax.set_xlabel("SFT step")
        ax.set_ylabel("dev accuracy")
        ax.legend(fontsize=7)
        fig.tight_layout()
        self.ctx.save_plot(fig, "members", "Dev accuracy of each member during SFT, against the reference's")

    def evaluate(self) -> dict[str, Any]:
        return {}
