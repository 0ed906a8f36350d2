"""Experiment tracking offline: a recipe run with ``report_to=["tensorboard"]`` leaves TensorBoard event files in
the run directory, read back here: the trainer's own logs (TRL's GRPO loss and rewards) and the run's metrics as
``RunContext.log`` recorded them."""

import json

import pytest

from agentkit.errors import AgentkitError
from agentkit.runner import run_recipe

pytest.importorskip("tensorboard")


def _scalars(folder) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tips_reports_to_tensorboard(tmp_path):
    metrics, run_dir = run_recipe(
        "tips",
        ["seeds=[0]", "methods=[grpo]"],
        output_dir=str(tmp_path / "run"),
        preset="tiny",
        quiet=True,
        report_to="tensorboard",
    )
    ours = _scalars(run_dir / "tensorboard" / "agentkit")
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    final = next(r for r in rows if r.get("final"))
    assert ours["grpo-s0/em"][-1][1] == pytest.approx(final["grpo-s0/em"])  # the run's metrics, mirrored
    trained = [r for r in rows if r.get("run") == "grpo-s0" and "loss" in r]
    assert [v for _, v in ours["loss"]][: len(trained)] == pytest.approx([r["loss"] for r in trained])
    trl = _scalars(run_dir / "tensorboard" / "grpo-s0")  # TRL's own TensorBoard callback, in the same place
    assert "train/loss" in trl and "train/reward" in trl and len(trl["train/loss"]) == len(trained)
    assert not (run_dir / "state" / "rl" / "grpo-s0" / "runs").exists()  # nothing left in transformers' default


def test_an_unknown_or_missing_tracker_is_refused_before_the_run(tmp_path):
    with pytest.raises(AgentkitError, match="unknown tracker 'tensorbaord'"):
        run_recipe("quickstart", [], output_dir=str(tmp_path / "a"), preset="tiny", report_to="tensorbaord")
    assert not (tmp_path / "a").exists()


def test_mlflow_local_store(tmp_path):
    """MLflow's local file store in the run directory: the run's metrics as MLflow reads them back."""
    mlflow = pytest.importorskip("mlflow")
    metrics, run_dir = run_recipe(
        "quickstart", [], output_dir=str(tmp_path / "run"), preset="tiny", quiet=True, report_to="mlflow"
    )
    from agentkit.tracking import mlflow_uri

    client = mlflow.tracking.MlflowClient(tracking_uri=mlflow_uri(run_dir))
    (exp,) = [e for e in client.search_experiments() if e.name == "quickstart"]
    (run,) = client.search_runs([exp.experiment_id])
    numeric = {
        k.replace("/", "."): v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    assert numeric and all(run.data.metrics[k] == pytest.approx(v) for k, v in numeric.items() if k in run.data.metrics)
    assert set(numeric) <= set(run.data.metrics)
