"""The command line: listings, and bad input → one error line naming the problem and fix, exit code 2."""

import subprocess
import sys


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
