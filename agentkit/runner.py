"""Resolve a recipe spec (name or YAML file) and its layered config, pick the run directory, run it."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentkit.config import build_config, dump_yaml, load_yaml, parse_sets, to_dict
from agentkit.errors import AgentkitError
from agentkit.files import atomic_write, records_problem
from agentkit.recipe import Recipe, RunContext
from agentkit.registry import Registry
from agentkit.tracking import parse_report_to

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


def run_status(run_dir: Path) -> str:
    """``complete``, ``failed``, ``interrupted`` or ``running`` (from ``status.json``; ``unknown`` before it)."""
    try:
        return json.loads((run_dir / "status.json").read_text())["status"]
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"


def _latest_run(root: Path, cls: type[Recipe]) -> Path:
    """The latest run under ``root`` that can be resumed: not complete, and its saved config still valid."""
    runs = sorted((p for p in root.glob("*") if (p / "config.yaml").exists()), reverse=True) if root.is_dir() else []
    for run in runs:
        if run_status(run) == "complete":
            continue
        try:
            build_config(cls.config_cls, _saved_layer(run))
        except AgentkitError:
            continue
        return run
    raise AgentkitError(
        f"no run to resume under {root}" + (" (every run there is complete)" if runs else ""),
        "start one without --resume",
    )


def _saved_layer(run_dir: Path) -> dict[str, Any]:
    """A run's saved config as a layer (its lines remembered for errors), without the ``recipe:`` key."""
    saved = load_yaml(run_dir / "config.yaml")
    saved.pop("recipe", None)
    return saved


def _changes(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(old.get(k), dict):
            out.update(_changes(old[k], v, f"{prefix}{k}."))
        elif old.get(k) != v:
            out[f"{prefix}{k}"] = [old.get(k), v]
    return out


def _write_status(run_dir: Path, status: str, **extra: Any) -> None:
    atomic_write(
        run_dir / "status.json",
        json.dumps({"status": status, "time": time.strftime("%Y-%m-%d %H:%M:%S"), **extra}) + "\n",
    )


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a run: the message is the exact command that resumes it; ``signum`` the signal
    that ended it (the CLI exits with 128 + it: 130, 143)."""

    def __init__(self, message: str, signum: int = signal.SIGINT):
        super().__init__(message)
        self.signum = signum


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run was, so that it ends the way Ctrl-C does."""


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """While the block runs, SIGTERM (a scheduler's kill, ``timeout``) raises ``_Terminated`` in the main thread;
    the previous handler is put back after. Elsewhere than the main thread nothing changes (Python runs signal
    handlers there only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum, frame):
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _shared_timestamp() -> str:
    """The same run name on every process of an accelerate launch (the main process picks it)."""
    from accelerate.utils import broadcast_object_list

    from agentkit.recipe import process_state

    stamp = [time.strftime("%Y%m%d-%H%M%S")]
    if process_state().num_processes > 1:
        broadcast_object_list(stamp)
    return stamp[0]


def _check_launch() -> None:
    """An ``accelerate launch`` the machine cannot run as configured is refused before anything loads: accelerate
    turns FSDP on only for GPUs and other accelerators, and on the CPU would run plain DDP without saying so."""
    import os

    import torch

    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true" and not torch.accelerator.is_available():
        raise AgentkitError(
            "this launch asks for FSDP, which accelerate runs only on GPUs (and other accelerators); on this CPU "
            "it would run plain DDP",
            "launch with configs/accelerate/cpu.yaml (DDP), or zero2.yaml / zero3.yaml (DeepSpeed runs on the CPU)",
        )


def _fresh_gradient_state() -> None:
    """Start the run with accelerate's gradient state as a new process has it.

    accelerate keeps one ``GradientState`` per process, shared by every ``Accelerator``. A trainer stopped in the
    middle of gradient accumulation (Ctrl-C in a notebook, a run interrupted in a test) leaves its
    ``sync_gradients`` False, and every optimizer accelerate prepares afterwards in that process skips ``step()``
    without a word: a later run would train nothing. ``_reset_state`` is accelerate's own (its tests use it); the
    next ``Accelerator`` sets the state up again.
    """
    from accelerate.state import GradientState

    GradientState._reset_state()


def run_recipe(
    spec: str,
    sets: list[str] | None = None,
    *,
    output_dir: str | None = None,
    resume: bool | str = False,
    preset: str | None = None,
    outputs_root: str = "outputs",
    quiet: bool = False,
    force: bool = False,
    report_to: str | list[str] | None = None,
) -> tuple[dict[str, Any], Path]:
    """Run a recipe (``agentkit run``).

    The config is built and validated before anything is created. The run directory holds ``status.json``
    (running → complete, failed or interrupted); SIGINT and SIGTERM end a run as interrupted.

    Args:
        spec: a recipe name (``agentkit recipes list``) or a YAML file whose ``recipe:`` names one.
        sets: ``KEY=VALUE`` overrides (``--set``), applied after the recipe's YAML.
        output_dir: the run directory (default: ``outputs_root/<recipe>/<time>``); a new one, or with
            ``resume`` an earlier run's.
        resume: True: the latest run that is not complete (it says which); a path: that run.
        preset: a YAML of the recipe's folder (``tiny``, ``paper``…) in place of its ``default.yaml``.
        outputs_root: where runs go when ``output_dir`` is not given.
        quiet: no progress bars.
        force: let ``sets`` change a resumed run's config (the change is appended to ``config_changes.jsonl``).
        report_to: trackers (``tensorboard``, ``mlflow``, ``wandb``, ``trackio``; ``agentkit.tracking``), checked
            before anything runs: the trainers report to them and our metrics are mirrored there.

    Returns:
        ``(final metrics, run directory)``.

    Raises:
        AgentkitError: a bad spec, config, preset or run directory (before any model loads).
        RunInterrupted: Ctrl-C or SIGTERM; its message is the command that resumes the run.
    """
    _check_launch()
    name, cls, layer = resolve_spec(spec, preset)
    overrides = parse_sets(sets or [])
    report = parse_report_to(report_to)
    changes: dict[str, list[Any]] = {}
    if resume:
        run_dir = (
            Path(resume)
            if isinstance(resume, str)
            else (Path(output_dir) if output_dir else _latest_run(Path(outputs_root) / name, cls))
        )
        if not (run_dir / "config.yaml").exists():
            raise AgentkitError(f"{run_dir} is not a run directory (no config.yaml)", "pass the run's directory")
        for records in sorted((run_dir / "state").glob("*.jsonl")):  # checked before any model loads
            if problem := records_problem(records):
                raise AgentkitError(
                    f"cannot resume: {problem}",
                    "the run's state was changed by hand; start a new run, or delete that file",
                )
        layer = _saved_layer(run_dir)
        saved = build_config(cls.config_cls, layer)
        config = build_config(cls.config_cls, layer, overrides) if overrides else saved
        changes = _changes(to_dict(saved), to_dict(config))
        if changes and not force:
            listed = ", ".join(f"{k} ({a!r} -> {b!r})" for k, (a, b) in changes.items())
            raise AgentkitError(
                f"--resume with --set would change the run's config: {listed}",
                "a resumed run keeps its config; add --force to change it anyway (recorded in "
                "the run's config_changes.jsonl)",
            )
        if resume is True and not output_dir:
            print(f"resuming {run_dir} ({run_status(run_dir)})", file=sys.stderr)
    else:
        config = build_config(cls.config_cls, layer, overrides)
        run_dir = Path(output_dir) if output_dir else Path(outputs_root) / name / _shared_timestamp()
        if run_dir.exists() and not run_dir.is_dir():
            raise AgentkitError(f"--output-dir {run_dir} is a file", "name a directory (new or a previous run's)")
        if run_dir.is_dir() and (run_dir / "config.yaml").exists():
            raise AgentkitError(
                f"{run_dir} already holds a run", f"resume it with --resume {run_dir}, or choose another --output-dir"
            )
    _fresh_gradient_state()
    ctx = RunContext(run_dir, resume=bool(resume), quiet=quiet, report_to=report, name=name)
    if ctx.is_main:
        atomic_write(run_dir / "config.yaml", dump_yaml({"recipe": name, **to_dict(config)}))
        if changes:
            with open(run_dir / "config_changes.jsonl", "a") as f:
                f.write(json.dumps({"time": time.strftime("%Y-%m-%d %H:%M:%S"), "changes": changes}) + "\n")
        _write_status(run_dir, "running", pid=os.getpid())
    recipe = cls(config, ctx)
    recipe.name = name
    try:
        with _sigterm_interrupts():
            metrics = recipe.run()
    except KeyboardInterrupt as e:
        ctx.end_tracking()
        command = f"agentkit run {spec} --resume {run_dir}"
        signum = signal.SIGTERM if isinstance(e, _Terminated) else signal.SIGINT
        if ctx.is_main:
            _write_status(run_dir, "interrupted", signal=signal.Signals(signum).name, resume=command)
        raise RunInterrupted(f"resume with `{command}`", signum) from None
    except BaseException as e:
        ctx.end_tracking()
        if ctx.is_main:
            _write_status(run_dir, "failed", error=f"{type(e).__name__}: {e}"[:2000])
        raise
    ctx.end_tracking()
    if ctx.is_main:
        _write_status(run_dir, "complete")
    return metrics, run_dir
