"""The gamerl recipe on the tiny model: level table, evaluations before and after, a GRPO run with the curriculum;
a run interrupted mid-training resumes from its checkpoint with its curriculum; two processes under accelerate."""

import json
from pathlib import Path

import pytest

from agentkit.errors import AgentkitError
from agentkit.gamerl.reward import GameReward
from agentkit.gamerl.trainer import GameGRPOTrainer
from agentkit.runner import run_recipe
from agentkit.testing.processes import launch_two_processes


def test_gamerl_tiny_interrupted_and_resumed_with_its_curriculum(tmp_path, monkeypatch):
    real = GameGRPOTrainer._rollout
    steps = []

    def rollout(self, prompts, crash=[True]):  # noqa: B006 - one crash per test
        steps.append(self.state.global_step)
        if self.state.global_step == 1 and crash[0]:
            crash[0] = False
            raise KeyboardInterrupt  # dies in its second step, after checkpoint-1
        return real(self, prompts)

    def always_right(self, traj, row):  # every answer right: the curriculum must climb
        self.paths["rule"] += 1
        return {"score": 1.0, "format": 0.0, "em": 1.0, "f1": 1.0}

    monkeypatch.setattr(GameGRPOTrainer, "_rollout", rollout)
    monkeypatch.setattr(GameReward, "score_row", always_right)
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run_recipe("gamerl", [], output_dir=str(out), preset="tiny", quiet=True)
    saved = json.loads((out / "state" / "rl" / "s0" / "checkpoint-1" / "curriculum.json").read_text())
    assert saved["levels"] == {"tictactoe": "Medium", "blocks3d": "Medium"}  # 2 right of 2 per game: up
    steps.clear()
    metrics, run_dir = run_recipe("gamerl", [], output_dir=str(out), preset="tiny", resume=True, quiet=True)
    assert steps == [1]  # only the second step: evaluations and step 0 were recorded
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r.get("run") == "s0" and "level/tictactoe" in r]
    first, second = ({g: r[f"level/{g}"] for g in ("tictactoe", "blocks3d")} for r in train)
    assert first == {"tictactoe": 2.0, "blocks3d": 2.0}
    assert max(second.values()) == 3.0  # resumed at Medium: from Easy, four samples could reach Medium at most
    assert all(r["verify/rule"] == 1.0 for r in train)
    for key in ("level/tictactoe/Easy", "start/in_domain", "start/held_out", "s0/g2048", "after/in_domain_mean"):
        assert key in metrics
    report = (run_dir / "report.md").read_text()
    assert "The starting model by level" in report and "| g2048 | held-out |" in report and "training.png" in report
    assert (run_dir / "models" / "s0" / "config.json").exists()


def test_gamerl_bad_config_fails_before_loading(tmp_path):
    for override, message in [
        ("games=[tictactoe,mazes]", "games: unknown game 'mazes'"),
        ("tasks=[maze.shortest_lenght]", "maze has no task 'shortest_lenght'"),
        ("held_out=[tictactoe]", "held_out: 'tictactoe' is also a training game"),
        ("rl.agent.max_turns=2", "rl.agent.max_turns: game questions take one turn"),
        ("rl.max_turns=2", "rl.max_turns .* is now rl.agent.max_turns"),
        ("eval_level=Expert", "eval_level"),
    ]:
        with pytest.raises(AgentkitError, match=message):
            run_recipe("gamerl", [override], output_dir=str(tmp_path / "x"), preset="tiny", quiet=True)


def test_gamerl_under_accelerate_launch_two_processes(tmp_path):
    """Two CPU processes: each rolls out half of a step's questions; both move the curriculum alike."""
    out = tmp_path / "run"
    args = ["run", "gamerl", "--preset", "tiny", "--set", "level_questions=0", "--output-dir", str(out)]
    proc = launch_two_processes(args, Path(__file__).resolve().parents[3])
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r.get("run") == "s0" and "reward" in r] == [1, 2]
    assert (out / "models" / "s0" / "config.json").exists() and (out / "report.md").exists()


def test_gamerl_trains_and_evaluates_on_reasoning_gym_datasets(tmp_path):
    """The same trainer and evaluation on reasoning-gym's datasets (rg:<name>), next to a built-in game."""
    overrides = [
        "games=[tictactoe,rg:basic_arithmetic]",
        "held_out=[rg:mini_sudoku]",
        "rl.steps=1",
        "level_questions=1",
    ]
    metrics, run_dir = run_recipe("gamerl", overrides, output_dir=str(tmp_path / "run"), preset="tiny", quiet=True)
    for key in ("start/rg:basic_arithmetic", "s0/rg:mini_sudoku", "after/held_out_mean", "level/tictactoe/Hard"):
        assert key in metrics
    assert "level/rg:basic_arithmetic/Easy" not in metrics  # no levels there
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r.get("run") == "s0" and "reward" in r] == [1]


def test_gamerl_image_boards_reach_the_vision_tower(tmp_path, monkeypatch):
    """inputs=image on the tiny LLaVA: rollouts and evaluation see each board's picture, and GRPO's loss runs
    through the vision tower (its LoRA-merged weights move); with text boards the same run leaves the tower as it
    was. Rewards alternate so every group has an advantage."""
    import itertools

    from safetensors.torch import load_file

    from agentkit.engines.vision import VisionEngine
    from agentkit.models import resolve

    calls = itertools.count()
    images_seen = []
    real_generate = VisionEngine.generate

    def generate(self, prompts, params=None, on_text=None):
        images_seen.extend(len(self.prepare(p).images) for p in prompts)
        return real_generate(self, prompts, params, on_text)

    def alternating(self, traj, row):
        self.paths["rule"] += 1
        s = float(next(calls) % 2)
        return {"score": s, "format": 0.0, "em": s, "f1": s}

    monkeypatch.setattr(VisionEngine, "generate", generate)
    monkeypatch.setattr(GameReward, "score_row", alternating)
    base = load_file(str(resolve("tiny-random-vlm") / "model.safetensors"))
    tower = [k for k in base if "vision_tower" in k and k.endswith("q_proj.weight")]
    moved = {}
    for inputs in ("image", "text"):
        images_seen.clear()
        overrides = ["model=tiny-random-vlm", f"inputs={inputs}", "level_questions=0", "eval_questions=1"]
        _, run_dir = run_recipe("gamerl", overrides, output_dir=str(tmp_path / inputs), preset="tiny", quiet=True)
        assert images_seen and set(images_seen) == ({1} if inputs == "image" else {0})
        trained = load_file(str(run_dir / "models" / "s0" / "model.safetensors"))
        moved[inputs] = max((trained[k] - base[k]).abs().max().item() for k in tower)
        rows = [json.loads(x) for x in (run_dir / "state" / "eval_s0.jsonl").read_text().splitlines()]
        assert rows  # the trained model was evaluated (on pictures for inputs=image)
    assert moved["image"] > 0 and moved["text"] == 0


def test_gamerl_image_inputs_need_a_vision_model_and_built_in_games(tmp_path):
    for overrides, message in [
        (["inputs=image"], "inputs: image needs a vision-language model; 'tiny-random' is text-only"),
        (["inputs=image", "model=tiny-random-vlm", "held_out=[rg:mini_sudoku]"], "'rg:mini_sudoku' has none"),
    ]:
        with pytest.raises(AgentkitError, match=message):
            run_recipe("gamerl", overrides, output_dir=str(tmp_path / "x"), preset="tiny", quiet=True)
