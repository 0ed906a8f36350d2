"""Recipes under ``accelerate launch`` with two CPU processes (gloo), as the shipped configs set them up: DDP
(``cpu.yaml``), DeepSpeed ZeRO-2 and ZeRO-3 (``zero2.yaml``, ``zero3.yaml`` with two processes in fp32; DeepSpeed's
CPU accelerator). The same TIPS run under each gives the same steps and the same weights; a run stopped on two
processes resumes on one and the other way round; metrics are written once, by the main process. FSDP is not
here: accelerate turns FSDP on only for GPUs and other accelerators, so such a launch is refused on the CPU
(``docs/scaling.md``)."""

import json
import os
import signal
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from agentkit.testing.processes import launch_two_processes

ROOT = Path(__file__).resolve().parents[3]
TIPS = ["run", "tips", "--preset", "tiny", "--set", "methods=[tips]", "--quiet"]


def _steps(run: Path, name: str = "tips-s0") -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r.get("run") == name and "tips/alpha" in r]


def test_tips_under_ddp_zero2_and_zero3_gives_the_same_run(tmp_path):
    """Each process rolls out half of a step's trajectories; potentials, α and advantages come from the gathered
    batch. Sharding the optimizer state (ZeRO-2) or the weights too (ZeRO-3: gathered whole for the rollouts, the
    lagged teacher copied whole) must not change the maths: per-step gradient norms and α agree, and so do the
    trained weights (fp32; only the order of the reductions differs)."""
    runs = {}
    for config in ("cpu", "zero2", "zero3"):
        out = tmp_path / config
        proc = launch_two_processes([*TIPS, "--output-dir", str(out)], ROOT, config=config)
        assert proc.returncode == 0, f"{config}: {proc.stderr[-3000:]}"
        rollouts = sorted(p.name for p in (out / "state" / "rl" / "tips-s0").glob("rollouts.p*.jsonl"))
        assert rollouts == ["rollouts.p0.jsonl", "rollouts.p1.jsonl"], config  # two processes, each its half
        runs[config] = out
    ddp = _steps(runs["cpu"])
    assert [r["step"] for r in ddp] == [1, 2]  # one row per step: the main process logs, the others do not
    weights = load_file(runs["cpu"] / "models" / "tips-s0" / "model.safetensors")
    for config in ("zero2", "zero3"):
        steps = _steps(runs[config])
        assert [r["step"] for r in steps] == [1, 2], config
        for a, b in zip(ddp, steps):
            assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4), config
            assert b["tips/alpha"] == pytest.approx(a["tips/alpha"], rel=1e-4), config
        other = load_file(runs[config] / "models" / "tips-s0" / "model.safetensors")
        assert other.keys() == weights.keys()  # ZeRO-3 saves the gathered model, not a shard
        assert max((other[k] - weights[k]).abs().max().item() for k in weights) < 1e-4, config
    assert (runs["zero3"] / "report.md").exists()


def _stop_after_first_checkpoint(cmd_args: list[str], out: Path, log: Path, two: bool) -> None:
    """Start a TIPS run (on two processes, or one), SIGTERM it once its first checkpoint is written."""
    import subprocess
    import sys

    with open(log, "w") as f:
        if two:
            proc = launch_two_processes(cmd_args, ROOT, start_new_session=True, stdout=f, stderr=subprocess.STDOUT)
        else:
            cmd = [sys.executable, "-m", "agentkit", *cmd_args]
            proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=f, stderr=subprocess.STDOUT)
    written = out / "state" / "rl" / "tips-s0" / "checkpoint-1" / "trainer_state.json"  # the checkpoint's last file
    deadline = time.monotonic() + 600
    while not written.exists():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=120)
    assert json.loads((out / "status.json").read_text())["status"] == "interrupted"


def test_a_run_moves_between_process_counts(tmp_path):
    """Two processes stopped (SIGTERM) after the first checkpoint, resumed by one; one process stopped the same
    way, resumed by two. Each run ends complete with every step logged once. (Every run is a process of its own:
    nothing of one is left in the test's process for the next test.)"""
    import subprocess
    import sys

    out = tmp_path / "two-then-one"
    _stop_after_first_checkpoint([*TIPS, "--set", "rl.steps=6", "--output-dir", str(out)], out, tmp_path / "a", True)
    cmd = [sys.executable, "-m", "agentkit", "run", "tips", "--resume", str(out), "--quiet"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)  # one process
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["step"] for r in _steps(out)] == [1, 2, 3, 4, 5, 6]
    assert json.loads((out / "status.json").read_text())["status"] == "complete"

    out = tmp_path / "one-then-two"
    _stop_after_first_checkpoint([*TIPS, "--set", "rl.steps=6", "--output-dir", str(out)], out, tmp_path / "b", False)
    done = launch_two_processes(["run", "tips", "--resume", str(out), "--quiet"], ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["step"] for r in _steps(out)] == [1, 2, 3, 4, 5, 6]
    assert (out / "models" / "tips-s0" / "model.safetensors").exists()


def test_gamerl_under_zero3(tmp_path):
    """Game-RL's trainer under ZeRO-3: both processes roll out with the gathered weights and move the
    curriculum alike; the main process writes one run."""
    out = tmp_path / "run"
    args = ["run", "gamerl", "--preset", "tiny", "--set", "level_questions=0", "--output-dir", str(out), "--quiet"]
    proc = launch_two_processes(args, ROOT, config="zero3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r.get("run") == "s0" and "reward" in r] == [1, 2]
    assert (out / "models" / "s0" / "model.safetensors").exists() and (out / "report.md").exists()


def test_two_processes_on_one_server_send_each_policy_once(tmp_path):
    """Game-RL (a LoRA policy) with both processes rolling out on one server (``agentkit serve`` with runtime
    LoRA, the tiny model): the main process sends each new adapter, the other adopts its name, so the server loads
    one adapter per sync, all of one run, and unloads the one before (the last when the run ends). The evaluation
    then serves the saved adapter the same way."""
    from agentkit.engines.hf import HFEngine
    from agentkit.server import create_app
    from agentkit.testing.servers import serve_in_thread

    engine = HFEngine("tiny-random")
    loads: list[str] = []
    load = engine.load_adapter
    engine.load_adapter = lambda name, path: (loads.append(name), load(name, path))[1]
    out = tmp_path / "run"
    with serve_in_thread(create_app(engine, "tiny-random", runtime_lora=True)) as url:
        sets = ["level_questions=0", "engine.kind=openai", f"engine.base_url={url}/v1", "engine.timeout=600"]
        args = ["run", "gamerl", "--preset", "tiny", *(x for s in sets for x in ("--set", s)), "--output-dir", str(out)]
        proc = launch_two_processes([*args, "--quiet"], ROOT)
        assert proc.returncode == 0, proc.stderr[-3000:]
        served = set(engine.adapters)
    rollouts = sorted(p.name for p in (out / "state" / "rl" / "s0").glob("rollouts.p*.jsonl"))
    assert rollouts == ["rollouts.p0.jsonl", "rollouts.p1.jsonl"]
    trained = [n for n in loads if n.startswith("tiny-random@")]
    runs = {n.rsplit("-", 1)[0] for n in trained}
    # two syncs (the first rollout's weights, then step 1's), then the evaluation's engine sends the saved adapter
    assert len(trained) == 3 and len(runs) == 2, loads
    assert [int(n.rsplit("-", 1)[1]) for n in trained[:2]] == [1, 2] and trained[0].rsplit("-", 1)[0] != (
        trained[2].rsplit("-", 1)[0]
    )
    assert served == set()  # each adapter was unloaded by its sender: the one before at each sync, the last at the end
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r.get("run") == "s0" and "reward" in r] == [1, 2]


def test_fsdp_on_the_cpu_is_refused_before_anything_loads(tmp_path):
    """accelerate would run fsdp.yaml on a machine without a GPU as plain DDP; the run stops with one line."""
    args = ["run", "quickstart", "--set", "engine.model=tiny-random", "--output-dir", str(tmp_path / "run")]
    proc = launch_two_processes(args, ROOT, timeout=300, config="fsdp")
    assert proc.returncode != 0
    assert "asks for FSDP, which accelerate runs only on GPUs" in proc.stderr
    assert not (tmp_path / "run").exists()
