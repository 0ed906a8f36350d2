import subprocess
import sys


def _run(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True)


def test_namespace_imports_from_any_directory(tmp_path):
    r = _run("import agentkit.recipes, agentkit.eval, agentkit.extras, agentkit.tool_servers, "
             "agentkit.recipes.quickstart.recipe, agentkit.eval.metrics; print('ok')", tmp_path)
    assert r.returncode == 0, r.stderr
    for name in ("eval", "extras", "recipes", "tool_servers"):
        r = _run(f"import importlib.util as u; print(u.find_spec({name!r}))", tmp_path)
        assert r.stdout.strip() == "None", f"top-level package {name!r} is installed: {r.stdout}"


def test_engines_vllm_imports_without_vllm(tmp_path):
    r = _run("import agentkit.engines.vllm as v; print(v.VLLMEngine.__name__)", tmp_path)
    assert r.returncode == 0 and "VLLMEngine" in r.stdout, r.stderr
