"""The installed package: namespace imports from any directory, and modules that must import without optional extras."""

import subprocess
import sys


def _run(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True)


def test_namespace_imports_from_any_directory(tmp_path):
    r = _run(
        "import agentkit.recipes, agentkit.eval, agentkit.extras, agentkit.tool_servers, "
        "agentkit.recipes.quickstart.recipe, agentkit.eval.metrics; print('ok')",
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    for name in ("eval", "extras", "recipes", "tool_servers"):
        r = _run(f"import importlib.util as u; print(u.find_spec({name!r}))", tmp_path)
        assert r.stdout.strip() == "None", f"top-level package {name!r} is installed: {r.stdout}"


def test_engines_vllm_imports_without_vllm(tmp_path):
    r = _run("import agentkit.engines.vllm as v; print(v.VLLMEngine.__name__)", tmp_path)
    assert r.returncode == 0 and "VLLMEngine" in r.stdout, r.stderr


def test_the_cli_and_the_core_recipes_load_without_the_heavy_libraries(tmp_path):
    """What the CLI imports to check a config or print --help (the core recipes and their configs included) stays
    free of torch, transformers, TRL, datasets and scikit-learn: a bad input is refused before any of them loads."""
    code = (
        "import sys; import agentkit.cli; from agentkit.runner import RECIPES\n"
        "for name in ('quickstart', 'serve_demo', 'toollight', 'toollight_analyze'): RECIPES.get(name).config_cls\n"
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'datasets', 'sklearn') if m in sys.modules))"
    )
    r = _run(code, tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
