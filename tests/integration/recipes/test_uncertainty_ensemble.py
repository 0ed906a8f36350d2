"""The uncertainty_ensemble recipe on the tiny model: members trained with dev checks, saved and listed in
ensemble.json, usable by `uncertainty generate --models @ensemble.json`; an interrupted member resumes from its
last checkpoint; bad configs fail before any model loads."""

import json

import pytest

from agentkit.engines.base import SamplingParams
from agentkit.errors import AgentkitError
from agentkit.runner import run_recipe
from agentkit.uncertainty.generate import generate, load_tasks
from agentkit.uncertainty.schema import iter_generations


def test_ensemble_tiny_interrupted_resumed_and_used_by_generate(tmp_path, monkeypatch):
    from agentkit.uncertainty import ensemble

    real = ensemble.dev_accuracy
    calls = []

    def dev_accuracy(engine, tasks, *a, crash=[True], **kw):  # noqa: B006 - one crash per test
        calls.append(len(calls))
        if len(calls) == 4 and crash[0]:  # reference, tiny-a@0, tiny-a@2, then tiny-a@4: killed
            crash[0] = False
            raise KeyboardInterrupt
        return real(engine, tasks, *a, **kw)

    from trl import SFTTrainer

    real_train, resumed = SFTTrainer.train, []

    def train(self, *a, **kw):
        resumed.append(kw.get("resume_from_checkpoint"))
        return real_train(self, *a, **kw)

    monkeypatch.setattr("agentkit.recipes.uncertainty_ensemble.recipe.dev_accuracy", dev_accuracy)
    monkeypatch.setattr(SFTTrainer, "train", train)
    out = tmp_path / "run"
    overrides = ["members=[{name: tiny-a, base: tiny-random, data_seed: 1, max_steps: 6, min_steps: 6, batch_size: 2},"
                 " {name: tiny-b, base: tiny-random, data_seed: 2, max_steps: 0}]"]  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        run_recipe("uncertainty_ensemble", overrides, output_dir=str(out), preset="tiny", quiet=True)
    assert (out / "state" / "members" / "tiny-a" / "checkpoint-2").is_dir()
    calls.clear()
    metrics, run_dir = run_recipe(
        "uncertainty_ensemble", overrides, output_dir=str(out), preset="tiny", resume=True, quiet=True
    )
    assert len(calls) == 3 and resumed == [None, True]  # tiny-a@4, @6 from checkpoint-2; tiny-b@0
    dev = [json.loads(x)["key"] for x in (run_dir / "state" / "dev.jsonl").read_text().splitlines()]
    assert dev == ["reference", "tiny-a@0", "tiny-a@2", "tiny-a@4", "tiny-a@6", "tiny-b@0"]
    assert metrics["tiny-a/steps"] == 6 and metrics["tiny-b/steps"] == 0
    ens = json.loads((run_dir / "ensemble.json").read_text())
    assert [m["name"] for m in ens["members"]] == ["tiny-a", "tiny-b"] and ens["reference"]["path"] == "tiny-random"
    assert "Members" in (run_dir / "report.md").read_text() and (run_dir / "members.png").exists()
    gens = tmp_path / "gens.jsonl"
    generate(
        [f"@{run_dir / 'ensemble.json'}"],
        load_tasks("arithmetic-easy:2"),
        gens,
        SamplingParams(n=2, temperature=0.7, max_tokens=3, seed=0),
        progress=False,
    )
    rows = [r for _, r in iter_generations(gens)]
    assert all(set(r.samples) == {"tiny-random", "tiny-a", "tiny-b"} for r in rows)


def test_ensemble_bad_configs_fail_before_loading(tmp_path):
    for override, message in [
        ("members=[{name: a, data_seed: 3}, {name: b, data_seed: 3}]", "data_seed 3 is shared"),
        ("members=[{name: a, data_seed: 500}]", "is the dev seed"),
        ("members=[{name: a, data_seed: 1}, {name: a, data_seed: 2}]", "the name 'a' is used twice"),
        ("members=[{nme: a}]", "unknown field 'nme'"),
        ("suites=arithmetic-esy", "unknown suite 'arithmetic-esy'"),
    ]:
        with pytest.raises(AgentkitError, match=message):
            run_recipe("uncertainty_ensemble", [override], output_dir=str(tmp_path / "x"), preset="tiny", quiet=True)
