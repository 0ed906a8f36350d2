"""Resolve a recipe spec (name or YAML file) and its layered config, pick the run directory, run it."""

from __future__ import annotations

import inspect
import time
from pathlib import Path
from typing import Any

from agentkit.config import build_config, dump_yaml, load_yaml, parse_sets, to_dict
from agentkit.errors import AgentkitError
from agentkit.recipe import Recipe, RunContext, atomic_write
from agentkit.registry import Registry

RECIPES: Registry[type[Recipe]] = Registry("recipe", group="agentkit.recipes")


def recipe_dir(cls: type) -> Path:
    return Path(inspect.getfile(cls)).parent


def resolve_spec(spec: str, preset: str | None = None) -> tuple[str, type[Recipe], dict[str, Any]]:
    """``NAME`` (its default.yaml, or ``<preset>.yaml``) or ``FILE.yaml`` (with a ``recipe:`` key)."""
    if spec.endswith((".yaml", ".yml")) or Path(spec).is_file():
        layer = load_yaml(spec)
        name = layer.pop("recipe", None)
        if not isinstance(name, str):
            raise AgentkitError(f"{spec} has no 'recipe:' key", "add e.g. 'recipe: quickstart' at the top")
        cls = RECIPES.get(name)
        return name, cls, layer
    cls = RECIPES.get(spec)
    yaml_file = recipe_dir(cls) / f"{preset or 'default'}.yaml"
    if preset and not yaml_file.exists():
        presets = sorted(p.stem for p in recipe_dir(cls).glob("*.yaml"))
        raise AgentkitError(f"recipe {spec!r} has no preset {preset!r}", "choose one of: " + ", ".join(presets))
    layer = load_yaml(yaml_file) if yaml_file.exists() else {}
    layer.pop("recipe", None)
    return spec, cls, layer


def _latest_run(root: Path) -> Path:
    runs = sorted(p for p in root.glob("*") if (p / "config.yaml").exists()) if root.is_dir() else []
    if not runs:
        raise AgentkitError(f"no run to resume under {root}", "start one without --resume first")
    return runs[-1]


def _shared_timestamp() -> str:
    """The same run name on every process of an accelerate launch (the main process picks it)."""
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    stamp = [time.strftime("%Y%m%d-%H%M%S")]
    if PartialState().num_processes > 1:
        broadcast_object_list(stamp)
    return stamp[0]


def run_recipe(spec: str, sets: list[str] | None = None, *, output_dir: str | None = None,
               resume: bool | str = False, preset: str | None = None, outputs_root: str = "outputs",
               quiet: bool = False) -> tuple[dict[str, Any], Path]:
    """Run a recipe; returns ``(final metrics, run directory)``."""
    name, cls, layer = resolve_spec(spec, preset)
    overrides = parse_sets(sets or [])
    if resume:
        run_dir = Path(resume) if isinstance(resume, str) else (
            Path(output_dir) if output_dir else _latest_run(Path(outputs_root) / name))
        if not (run_dir / "config.yaml").exists():
            raise AgentkitError(f"{run_dir} is not a run directory (no config.yaml)", "pass the run's directory")
        saved = load_yaml(run_dir / "config.yaml")
        saved.pop("recipe", None)
        config = build_config(cls.config_cls, saved, overrides)
    else:
        run_dir = Path(output_dir) if output_dir else Path(outputs_root) / name / _shared_timestamp()
        config = build_config(cls.config_cls, layer, overrides)
    ctx = RunContext(run_dir, resume=bool(resume), quiet=quiet)
    if ctx.is_main:
        atomic_write(run_dir / "config.yaml", dump_yaml({"recipe": name, **to_dict(config)}))
    recipe = cls(config, ctx)
    recipe.name = name
    return recipe.run(), run_dir
