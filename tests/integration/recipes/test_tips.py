"""The tips recipe on the tiny model: SFT warm start, a GRPO and a TIPS run each evaluated, per-step metrics,
the report; a run interrupted mid-training resumes from its checkpoint and redoes nothing finished."""

import json
from pathlib import Path

import pytest

from agentkit.errors import AgentkitError
from agentkit.rl.trainer import AgentGRPOTrainer
from agentkit.runner import run_recipe
from agentkit.testing.processes import launch_two_processes

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("lora", [0, 4])
def test_tips_recipe_tiny_interrupted_and_resumed(tmp_path, monkeypatch, lora):
    real = AgentGRPOTrainer._rollout
    calls = []

    def rollout(self, prompts, crash=[True]):  # noqa: B006 - one crash per test
        calls.append((self.shaper is not None, self.state.global_step))
        if self.shaper is not None and self.state.global_step == 1 and crash[0]:
            crash[0] = False
            raise KeyboardInterrupt  # the tips run dies in its second step, after checkpoint-1
        return real(self, prompts)

    monkeypatch.setattr(AgentGRPOTrainer, "_rollout", rollout)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_recipe("tips", [f"rl.lora_r={lora}"], output_dir=str(out), preset="tiny", quiet=True)
    assert (out / "state" / "rl" / "tips-s0" / "checkpoint-1" / "teacher.safetensors").is_file()  # the lagged teacher
    assert (out / "models" / "grpo-s0" / "config.json").exists()
    calls.clear()
    metrics, run_dir = run_recipe(
        "tips", [f"rl.lora_r={lora}"], output_dir=str(out), preset="tiny", resume=True, quiet=True
    )
    assert calls == [(True, 1)]  # only the tips run's second step: SFT, the grpo run and step 1 were done
    for key in ("warm_start", "grpo-s0", "tips-s0"):
        assert f"{key}/em" in metrics and f"{key}/f1" in metrics
    assert (run_dir / "models" / "tips-s0" / "config.json").exists()
    # with LoRA the adapter is kept too, servable per request: agentkit serve --lora NAME=RUN/models/tips-s0-lora
    assert (run_dir / "models" / "tips-s0-lora" / "adapter_config.json").is_file() == bool(lora)
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    tips_steps = [r for r in rows if r.get("run") == "tips-s0" and "tips/alpha" in r]
    assert [r["step"] for r in tips_steps][-2:] == [1, 2]  # the history survived the interruption
    assert all(r["tips/alpha"] > 0 and "tools/calls" in r and "grad_norm" in r for r in tips_steps)
    grpo_steps = [r for r in rows if r.get("run") == "grpo-s0" and "outcome/em" in r]
    assert len(grpo_steps) == 2 and not any("tips/alpha" in r for r in grpo_steps)
    report = (run_dir / "report.md").read_text()
    assert "| tips | 1 |" in report and "| grpo | 1 |" in report and "training.png" in report
    assert metrics["tips_vs_grpo/em_delta"] == metrics["tips-s0/em"] - metrics["grpo-s0/em"]
    assert "| tips − grpo | 1 |" in report  # the paired statistic, one seed: no interval over seeds


def test_tips_bad_config_fails_before_loading(tmp_path):
    with pytest.raises(AgentkitError, match="estimator"):
        run_recipe("tips", ["estimator=gpro"], output_dir=str(tmp_path / "a"), preset="tiny", quiet=True)
    with pytest.raises(AgentkitError, match="micro_batch"):
        run_recipe("tips", ["rl.micro_batch=3"], output_dir=str(tmp_path / "b"), preset="tiny", quiet=True)


def test_ppo_recipe_tiny_interrupted_and_resumed(tmp_path, monkeypatch):
    """ppo with a separate critic: the run dies in its second step, resumes from checkpoint-1 with the critic
    saved there, and finishes; the report has the PPO row and the value-loss curve."""
    from agentkit.rl.ppo import AgentPPOTrainer

    real, loaded = AgentPPOTrainer._rollout, []

    def rollout(self, prompts, crash=[True]):  # noqa: B006 - one crash per test
        if self.state.global_step == 1 and crash[0]:
            crash[0] = False
            raise KeyboardInterrupt
        return real(self, prompts)

    real_load = AgentPPOTrainer._load_from_checkpoint

    def load(self, path, model=None):
        loaded.append(path)
        return real_load(self, path, model)

    monkeypatch.setattr(AgentPPOTrainer, "_rollout", rollout)
    monkeypatch.setattr(AgentPPOTrainer, "_load_from_checkpoint", load)
    out = tmp_path / "run"
    sets = ["methods=[ppo]", "ppo.critic=separate"]
    with pytest.raises(KeyboardInterrupt):
        run_recipe("tips", sets, output_dir=str(out), preset="tiny", quiet=True)
    assert (out / "state" / "rl" / "ppo-s0" / "checkpoint-1" / "critic.safetensors").is_file()
    metrics, run_dir = run_recipe("tips", sets, output_dir=str(out), preset="tiny", resume=True, quiet=True)
    assert loaded and loaded[0].endswith("checkpoint-1")
    assert "ppo-s0/em" in metrics and "ppo/em_mean" in metrics
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r.get("run") == "ppo-s0" and "ppo/value_loss" in r]
    assert [r["step"] for r in steps][-2:] == [1, 2] and not any("tips/alpha" in r for r in steps)
    report = (run_dir / "report.md").read_text()
    assert "| ppo | 1 |" in report and "separate critic" in report


def test_tips_ppo_under_accelerate_launch_two_processes(tmp_path):
    """TIPS-PPO on two CPU processes (gloo): potentials and α over the gathered batch, advantages whitened over
    both processes' tokens, the value head's gradients averaged by DDP."""
    out = tmp_path / "run"
    args = ["run", "tips", "--preset", "tiny", "--set", "methods=[tips_ppo]", "--output-dir", str(out)]
    proc = launch_two_processes(args, ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r.get("run") == "tips_ppo-s0" and "ppo/value_loss" in r]
    assert [r["step"] for r in steps] == [1, 2] and all("tips/alpha" in r for r in steps)
    assert (out / "state" / "rl" / "tips_ppo-s0" / "checkpoint-2" / "critic.safetensors").is_file()
    assert (out / "models" / "tips_ppo-s0" / "config.json").exists()


def test_a_run_kept_without_its_models_rebuilds_the_same_warm_start(tmp_path):
    """A comparison committed without its models resumes in a later session: the SFT stage is trained again and
    must equal the recorded weights bit for bit; a different warm start stops the run with the reason."""
    import shutil

    out = tmp_path / "run"
    sets = ["methods=[grpo]", "rl.steps=1"]
    run_recipe("tips", sets, output_dir=str(out), preset="tiny", quiet=True)
    shutil.rmtree(out / "models")
    shutil.rmtree(out / "state" / "sft")
    metrics, _ = run_recipe("tips", sets, output_dir=str(out), preset="tiny", resume=True, quiet=True)
    assert (out / "models" / "sft" / "config.json").exists() and "grpo-s0/em" in metrics
    shutil.rmtree(out / "models")
    with pytest.raises(AgentkitError, match="rebuilt warm start differs"):
        run_recipe(
            "tips", sets + ["sft.learning_rate=1e-3"], output_dir=str(out), preset="tiny", resume=True, force=True
        )
