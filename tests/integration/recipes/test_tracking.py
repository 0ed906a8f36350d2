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


def _wandb_records(path):
    """The records of a W&B offline run file (``run-ID.wandb``): a 7-byte header, then LevelDB's log format (32 KiB
    blocks of chunks, each a 7-byte header: CRC32, length, type FULL / FIRST / MIDDLE / LAST), each record a
    ``wandb_internal_pb2.Record``."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, buf = path.read_bytes(), 7, b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if (left := 32768 - pos % 32768) < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            yield rec


def test_wandb_offline_and_trackio_local_stores(tmp_path):
    """One run reporting to W&B (offline) and trackio (its local SQLite store), in a process of its own (trackio
    fixes its store when imported): both stores, read back, hold the run's metrics rows, in order."""
    import importlib.util
    import sqlite3
    import subprocess
    import sys

    if importlib.util.find_spec("wandb") is None or importlib.util.find_spec("trackio") is None:
        pytest.skip("wandb and trackio are not installed")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "agentkit", "run", "quickstart", "--preset", "tiny", "--quiet"]
    r = subprocess.run([*cmd, "--report-to", "wandb,trackio", "--output-dir", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    expected = [{k: v for k, v in row.items() if k not in ("time", "final")} for row in rows]
    (run_file,) = (out / "wandb").glob("offline-run-*/run-*.wandb")
    history = [
        {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.history.item}
        for rec in _wandb_records(run_file)
        if rec.WhichOneof("record_type") == "history"
    ]
    seen = [{k: v for k, v in h.items() if not k.startswith("_") and k != "agentkit/step"} for h in history]
    assert len(seen) == len(expected) and all(a == pytest.approx(b) for a, b in zip(seen, expected))
    (db,) = (out / "trackio").glob("*.db")
    logged = sqlite3.connect(db).execute("select step, metrics from metrics order by id").fetchall()
    assert [step for step, _ in logged] == list(range(1, len(rows) + 1))
    assert all(json.loads(m) == pytest.approx(b) for (_, m), b in zip(logged, expected))


def test_trackio_imported_before_the_run_is_refused(tmp_path, monkeypatch):
    """trackio reads its store's folder once, when imported: a run in a process that imported it already could not
    write to its own folder, so it is refused before anything runs."""
    import sys
    import types

    utils = types.ModuleType("trackio.utils")
    utils.TRACKIO_DIR = tmp_path / "elsewhere"
    monkeypatch.setitem(sys.modules, "trackio.utils", utils)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
    with pytest.raises(AgentkitError, match="trackio was imported in this process before the run"):
        run_recipe("quickstart", [], output_dir=str(tmp_path / "run"), preset="tiny", report_to="trackio")
    assert not (tmp_path / "run").exists()
