"""Runs write their directory and continue after an interruption without redoing finished work."""

import json
from dataclasses import dataclass

import pytest
import torch

from agentkit.engines.hf import HFEngine
from agentkit.recipe import Recipe
from agentkit.runner import RECIPES, run_recipe


@dataclass
class TrainCfg:
    steps: int = 6
    checkpoint_every: int = 2
    crash_at: int = -1
    lr: float = 0.1


class TrainRecipe(Recipe[TrainCfg]):
    """A small real training loop (linear regression with Adam) that checkpoints through RunContext."""

    name = "test-train"
    config_cls = TrainCfg

    def setup(self):
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 1)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=self.config.lr)
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(32, 4, generator=g)
        self.y = self.x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])

    def train(self):
        start, ran = 0, 0
        if (ck := self.ctx.latest_checkpoint()) is not None:
            start, state = ck
            self.model.load_state_dict(state["model"])
            self.opt.load_state_dict(state["optimizer"])
        for step in range(start, self.config.steps):
            if step == self.config.crash_at:
                raise KeyboardInterrupt
            loss = torch.nn.functional.mse_loss(self.model(self.x), self.y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            ran += 1
            self.ctx.log({"loss": loss.item()}, step=step + 1)
            if (step + 1) % self.config.checkpoint_every == 0:
                self.ctx.save_checkpoint(
                    step + 1, {"model": self.model.state_dict(), "optimizer": self.opt.state_dict()}
                )
        return {"steps_run": ran, "weight0": self.model.weight[0, 0].item()}


RECIPES.register("test-train", f"{__name__}:TrainRecipe")


def test_training_resumes_from_checkpoint(tmp_path):
    full, _ = run_recipe("test-train", output_dir=str(tmp_path / "full"), quiet=True)
    with pytest.raises(KeyboardInterrupt):
        run_recipe("test-train", ["crash_at=3"], output_dir=str(tmp_path / "cut"), quiet=True)
    assert (tmp_path / "cut" / "state" / "checkpoint-00000002" / "state.pt").exists()
    resumed, run_dir = run_recipe(
        "test-train", ["crash_at=-1"], output_dir=str(tmp_path / "cut"), resume=True, quiet=True, force=True
    )  # the one change: the test's crash switch
    assert resumed["steps_run"] == 4  # steps 3-6 only; 1-2 came from the checkpoint
    assert resumed["weight0"] == pytest.approx(full["weight0"], abs=1e-6)
    assert (run_dir / "report.md").exists() and "steps_run" in (run_dir / "report.md").read_text()


def test_quickstart_resume_skips_finished_batches(tmp_path, monkeypatch):
    calls = {"n": 0}
    real = HFEngine.generate

    def counting(self, prompts, params=None):
        calls["n"] += 1
        if calls["n"] == fail_on[0]:
            raise KeyboardInterrupt
        return real(self, prompts, params)

    fail_on = [2]
    monkeypatch.setattr(HFEngine, "generate", counting)
    sets = ["engine.model=tiny-random", "num_problems=6", "batch_size=2", "sampling.max_tokens=6"]
    out = tmp_path / "qs"
    with pytest.raises(KeyboardInterrupt):
        run_recipe("quickstart", sets, output_dir=str(out), quiet=True)
    done = (out / "state" / "predictions.jsonl").read_text().splitlines()
    assert len(done) == 2 and calls["n"] == 2
    fail_on[0] = -1
    calls["n"] = 0
    metrics, run_dir = run_recipe("quickstart", [], resume=str(out), quiet=True)
    assert calls["n"] == 2  # the remaining 4 problems in 2 batches; the first batch is not redone
    assert metrics["problems"] == 6
    assert (run_dir / "accuracy.png").stat().st_size > 1000
    cfg = (run_dir / "config.yaml").read_text()
    assert "tiny-random" in cfg and "recipe: quickstart" in cfg
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["final"] is True and rows[-1]["problems"] == 6
