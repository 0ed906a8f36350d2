"""Recipe base class and RunContext: output directory, metrics log, checkpoints, progress, report.

Every run writes ``outputs/<recipe>/<timestamp>/``::

    config.yaml      the resolved config (defaults < YAML < --set), re-read by --resume
    metrics.jsonl    one JSON object per logged step
    report.md        the recipe's sections, final metrics and PNG plots
    state/           resume state: finished work (``done``) and checkpoints, written atomically

Under ``accelerate launch`` all processes share one run directory; only the main process writes files.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from tqdm.auto import tqdm

from agentkit.config import dump_yaml, to_dict
from agentkit.files import append_records, atomic_write, read_records
from agentkit.plots import pyplot

C = TypeVar("C")


def silence_progress_bars() -> None:
    """No progress bar from the libraries a run uses: transformers' (weight loading) and the hub's, through
    transformers' switch, and datasets' (maps, loading); child processes get ``TQDM_DISABLE``. Ours follow
    ``RunContext.quiet``, and trainers take ``disable_tqdm`` from it."""
    import os

    os.environ["TQDM_DISABLE"] = "1"
    import datasets
    import transformers

    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()


def process_state():
    """This process's place in an ``accelerate launch`` (accelerate's ``PartialState``), set up as the trainers'
    arguments will set it up: on a machine without a GPU (or other accelerator) as CPU processes over gloo. Left
    to itself, accelerate sees no distributed run on such a machine (one process, rank 0, on every process) until
    a trainer's arguments say ``use_cpu``, so every process would act as the main one until then."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.accelerator.is_available())


class RunContext:
    """What a recipe gets to record its run: metrics, finished work, checkpoints, plots and report sections.

    Under ``accelerate launch`` every process has one; only the main process writes (``is_main``).

    Args:
        run_dir: the run directory (``outputs/<recipe>/<time>`` or ``--output-dir``); ``state/`` is made in it.
        resume: the run continues an earlier attempt (``--resume``): recorded work is not redone.
        quiet: no progress bar, ours or the libraries' (``--quiet``).
        report_to: trackers our metrics are mirrored to and the trainers report to (``agentkit.tracking``).
        name: the recipe's name (the trackers' experiment).
    """

    def __init__(
        self,
        run_dir: Path,
        resume: bool = False,
        quiet: bool = False,
        report_to: list[str] | None = None,
        name: str = "",
    ):
        from agentkit.tracking import Tracking, activate

        self.state = process_state()
        self.run_dir = Path(run_dir)
        self.resume = resume
        self.quiet = quiet
        self.tracking = Tracking(self.run_dir, report_to or [], name or self.run_dir.parent.name)
        activate(self.tracking)  # the trainers a recipe builds report to the same trackers
        if quiet:
            silence_progress_bars()
        self.sections: list[tuple[str, str]] = []
        self.plots: list[tuple[str, Path]] = []
        if self.is_main:
            (self.run_dir / "state").mkdir(parents=True, exist_ok=True)

    @property
    def is_main(self) -> bool:
        return self.state.is_main_process

    # ---- metrics ------------------------------------------------------------------------------------------
    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Append one line to ``metrics.jsonl`` (with the time; the main process only), and its numbers to the
        run's trackers.

        Args:
            metrics: name → value (numbers, or anything JSON can hold).
            step: the step the values belong to, kept as ``"step"``.
        """
        if not self.is_main:
            return
        row = {"time": round(time.time(), 3), **({"step": step} if step is not None else {}), **metrics}
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(row, default=float) + "\n")
        self.tracking.log(metrics, step)

    def end_tracking(self) -> None:
        """Flush and close the run's trackers (after the run's last metrics; not ``close``, which a recipe's
        ``teardown`` calls on what it holds before those are logged)."""
        from agentkit.tracking import activate

        self.tracking.close()
        activate(None)

    # ---- finished work (resume without redoing it) --------------------------------------------------------
    def done(self, name: str) -> dict[str, Any]:
        """What earlier (possibly interrupted) attempts of this run recorded under ``name``.

        Args:
            name: the record's name (``state/<name>.jsonl``).

        Returns:
            Key → value, the last record of a key winning.
        """
        return read_records(self.run_dir / "state" / f"{name}.jsonl")

    def record(self, name: str, items: dict[str, Any]) -> None:
        """Record finished items (appended and fsynced, so a crash loses at most the batch in flight).

        Args:
            name: the record's name (``state/<name>.jsonl``).
            items: key → value (JSON), one line each.
        """
        if self.is_main:
            append_records(self.run_dir / "state" / f"{name}.jsonl", items)

    def each(self, name: str, jobs: list[tuple], fn: Callable[..., Any], desc: str) -> dict[str, Any]:
        """``fn(*job)`` for every job not yet recorded under ``name``, each recorded as soon as it finishes, with
        a progress bar, so a resumed run redoes only the unfinished ones.

        Args:
            name: the record's name (``state/<name>.jsonl``).
            jobs: the jobs, each a tuple of fields (its key: the fields joined by ``|``, ``job_key``).
            fn: called as ``fn(*job)``; its result must be JSON.
            desc: the progress bar's label.

        Returns:
            Key → result for every job, recorded earlier or now.
        """
        done = self.done(name)
        for job in self.progress([j for j in jobs if job_key(j) not in done], desc=desc):
            done[job_key(job)] = fn(*job)
            self.record(name, {job_key(job): done[job_key(job)]})
        return done

    # ---- checkpoints --------------------------------------------------------------------------------------
    def checkpoint_dir(self, step: int) -> Path:
        return self.run_dir / "state" / f"checkpoint-{step:08d}"

    def save_checkpoint(self, step: int, objects: dict[str, Any]) -> Path:
        """Save a checkpoint as one torch file (``state/checkpoint-<step>/state.pt``), atomically.

        Args:
            step: the step it was taken after.
            objects: what to save, e.g. ``{"model": state_dict, "optimizer": ..., "extra": {...}}``.

        Returns:
            The checkpoint's directory.
        """
        import torch

        d = self.checkpoint_dir(step)
        if self.is_main:
            buf = io.BytesIO()
            torch.save(objects, buf)
            atomic_write(d / "state.pt", buf.getvalue())
        return d

    def latest_checkpoint(self) -> tuple[int, dict[str, Any]] | None:
        """The newest complete checkpoint of this run.

        Returns:
            ``(step, objects)`` as ``save_checkpoint`` got them, or None when there is none.
        """
        import torch

        ckpts = sorted(p for p in (self.run_dir / "state").glob("checkpoint-*") if (p / "state.pt").exists())
        if not ckpts:
            return None
        step = int(ckpts[-1].name.split("-")[1])
        return step, torch.load(ckpts[-1] / "state.pt", weights_only=False)

    # ---- progress, plots, report --------------------------------------------------------------------------
    def progress(self, items: Iterable[Any], desc: str, total: int | None = None) -> Iterator[Any]:
        """``items`` with a progress bar (none when quiet, or off the main process).

        Args:
            items: what to iterate.
            desc: the bar's label.
            total: the count, when ``items`` has no length.

        Returns:
            An iterator over ``items``.
        """
        return iter(tqdm(items, desc=desc, total=total, disable=self.quiet or not self.is_main, dynamic_ncols=True))

    def add_section(self, title: str, markdown: str) -> None:
        """Add a section to the run's ``report.md`` (after the metrics, in the order added).

        Args:
            title: the section's heading.
            markdown: its body.
        """
        self.sections.append((title, markdown))

    def save_plot(self, fig, name: str, caption: str) -> Path:
        """Save a matplotlib figure as ``<name>.png`` in the run directory, link it in the report, and close it.

        Args:
            fig: a matplotlib figure.
            name: the file's name, without ``.png``.
            caption: the report's caption under it.

        Returns:
            The PNG's path.
        """
        plt = pyplot()
        path = self.run_dir / f"{name}.png"
        if self.is_main:
            fig.savefig(path, dpi=110, bbox_inches="tight")
            self.plots.append((caption, path))
        plt.close(fig)
        return path

    def write_report(self, recipe: str, config: Any, metrics: dict[str, Any]) -> Path:
        lines = [f"# {recipe} — run `{self.run_dir.name}`", ""]
        if metrics:
            lines += ["## Metrics", "", "| metric | value |", "|---|---|"]
            lines += [f"| {k} | {_fmt(v)} |" for k, v in metrics.items()] + [""]
        for title, body in self.sections:
            lines += [f"## {title}", "", body.rstrip(), ""]
        for caption, path in self.plots:
            lines += [f"![{caption}]({path.name})", "", f"*{caption}*", ""]
        lines += ["## Config", "", "```yaml", dump_yaml(to_dict(config)).rstrip(), "```", ""]
        path = self.run_dir / "report.md"
        if self.is_main:
            atomic_write(path, "\n".join(lines))
        return path


def job_key(job: tuple) -> str:
    """The key ``RunContext.each`` records a job under: its fields joined by ``|``."""
    return "|".join(map(str, job))


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


class Recipe(Generic[C]):
    """A method's workflow. Subclasses set ``name`` and ``config_cls`` and implement ``setup``/``train``/``evaluate``.

    ``run()`` calls them in order, logs the returned metrics and writes the report; recipes add sections and plots
    through ``self.ctx``. ``train`` returns ``{}`` for recipes that only evaluate.

    Args:
        config: an instance of ``config_cls`` (``agentkit.runner.run_recipe`` builds and validates it).
        ctx: the run's ``RunContext``.
    """

    name: ClassVar[str] = "recipe"
    config_cls: ClassVar[type] = object
    description: ClassVar[str] = ""

    def __init__(self, config: C, ctx: RunContext):
        if not dataclasses.is_dataclass(config):
            raise TypeError("a recipe's config must be a dataclass instance")
        self.config = config
        self.ctx = ctx

    def setup(self) -> None:  # load models, build data
        pass

    def train(self) -> dict[str, Any]:
        return {}

    def evaluate(self) -> dict[str, Any]:
        return {}

    def teardown(self) -> None:
        """Close what the recipe opened (engines, tools, worker pools); runs after ``run`` whether it failed or
        not. The default closes every attribute, or item of a dict or list attribute, with a ``close()`` method
        that agentkit defines (``Engine.close``, ``Tool.close``); a recipe that holds other resources extends it."""
        seen: set[int] = set()
        for value in vars(self).values():
            for obj in value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]:
                if id(obj) in seen or not type(obj).__module__.startswith("agentkit"):
                    continue
                seen.add(id(obj))
                close = getattr(obj, "close", None)
                if callable(close):
                    close()

    def run(self) -> dict[str, Any]:
        try:
            self.setup()
            metrics = {**self.train(), **self.evaluate()}
        finally:
            self.teardown()
        self.ctx.log({"final": True, **metrics})
        self.ctx.write_report(self.name, self.config, metrics)
        return metrics
