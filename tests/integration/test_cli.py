"""The command line: listings, and bad input → one error line naming the problem and fix, exit code 2."""

import json
import signal
import stat
import subprocess
import sys
import time

import pytest


def agentkit(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "agentkit", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def _one_error_line(r):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_lists():
    r = agentkit("models", "list")
    assert r.returncode == 0
    for name in ("smollm2-135m", "gemma3-270m", "minilm-l6", "tiny-random"):
        assert name in r.stdout
    r = agentkit("recipes", "list")
    assert r.returncode == 0 and "quickstart" in r.stdout


def test_unknown_recipe_and_model(tmp_path):
    assert "did you mean 'quickstart'" in _one_error_line(agentkit("run", "quickstrat", cwd=tmp_path))
    line = _one_error_line(agentkit("run", "quickstart", "--set", "engine.model=smolm2-135m", cwd=tmp_path))
    assert "unknown model 'smolm2-135m'" in line and "smollm2-135m" in line


def test_bad_yaml_and_types(tmp_path):
    bad = tmp_path / "run.yaml"
    bad.write_text("recipe: quickstart\nnum_problems: [3\n")
    assert "run.yaml:" in _one_error_line(agentkit("run", str(bad), cwd=tmp_path))
    line = _one_error_line(agentkit("run", "quickstart", "--set", "num_problems=lots", cwd=tmp_path))
    assert "num_problems: expected int" in line
    line = _one_error_line(agentkit("run", "quickstart", "--set", "num_problem=3", cwd=tmp_path))
    assert "did you mean 'num_problems'" in line
    r = agentkit("--debug", "run", "quickstart", "--set", "num_problems=lots", cwd=tmp_path)
    assert r.returncode != 0 and "Traceback" in r.stderr


SLEEPY = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a shell starts it (this child may inherit SIG_IGN)
from dataclasses import dataclass
from pathlib import Path
from agentkit import cli
from agentkit.recipe import Recipe
from agentkit.runner import RECIPES

@dataclass
class Cfg:
    seconds: float = 300.0

class Sleepy(Recipe[Cfg]):
    name = "test-sleepy"
    config_cls = Cfg

    def train(self):
        from agentkit.engines.hf import HFEngine

        HFEngine("tiny-random", dtype="float32")  # transformers' weight-loading bar, unless --quiet
        self.ctx.log({"loaded": 1})
        Path(sys.argv[2]).write_text("ready")
        time.sleep(self.config.seconds)
        return {}

RECIPES.register("test-sleepy", "__main__:Sleepy")
sys.exit(cli.main(["run", "test-sleepy", "--output-dir", sys.argv[1], *sys.argv[3:]]))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_leaves_the_run_interrupted_with_its_resume_command(tmp_path, sig):
    """A scheduler's kill (SIGTERM) ends a run as Ctrl-C (SIGINT) does: status `interrupted`, the resume command
    printed and kept in status.json, exit 128 + the signal. With --quiet nothing draws a progress bar, and every
    file of the run directory has one mode."""
    run, ready, script = tmp_path / "run", tmp_path / "ready", tmp_path / "sleepy.py"
    script.write_text(SLEEPY)  # a file: the config's help is read from the recipe's source
    proc = subprocess.Popen(
        [sys.executable, str(script), str(run), str(ready), "--quiet"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ready.exists(), proc.communicate()[1]
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    command = f"agentkit run test-sleepy --resume {run}"
    assert proc.returncode == 128 + sig, err
    assert f"interrupted: resume with `{command}`" in err
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "interrupted" and status["resume"] == command
    assert status["signal"] == signal.Signals(sig).name
    assert "it/s]" not in err and "%|" not in err, err  # no bar: ours, transformers' or the hub's
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in run.iterdir() if p.is_file()}
    assert {"config.yaml", "status.json", "metrics.jsonl"} <= set(modes)
    assert len(set(modes.values())) == 1, modes
