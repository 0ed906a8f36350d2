"""The sweep every extras demo runs: settings × seeds, one resumable job each, then tables, paired differences
and plots (``agentkit.extras.report``).

A *setting* is a tuple naming one configuration of the comparison: ``("hdro", 0.05)`` for a method and its
radius, ``("node", "knn")`` for a task and a lifting, ``(method, train_size)`` for a learning curve. Job
``(*setting, seed)`` runs ``fn(*setting, seed)`` once; its result (a JSON mapping of metrics) is recorded as soon as
it finishes (``RunContext.each``), so ``--resume`` redoes only unfinished jobs. A recipe then keeps only what is
its own: its settings, what one job does, and its report's words.

>>> grid = Grid([("a",), ("b",)], 2, {("a",): [{"acc": 0.5}, {"acc": 0.7}], ("b",): [{"acc": 0.6}, {"acc": 0.6}]})
>>> grid.results()
{'a': {'acc': [0.5, 0.7]}, 'b': {'acc': [0.6, 0.6]}}
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agentkit.config import PosInt, option
from agentkit.extras import report
from agentkit.files import atomic_write
from agentkit.recipe import job_key


@dataclass
class SweepConfig:
    """What every extras config has: the seeds each setting runs with (seeds 0, 1, …)."""

    seeds: PosInt = option(3, "runs of every setting, seeded 0, 1, …; tables show mean ± std over them")


def device_problems(device: str) -> list[str]:
    """The config check every recipe with a ``device`` option runs: a CUDA device torch cannot see.

    >>> device_problems("cpu")
    []
    """
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return [f"device: {device} is not available here (torch sees no CUDA GPU)"]
    return []


def product(*axes: Iterable[Any]) -> list[tuple]:
    """Every combination of the axes, in order: ``product(methods, sizes)`` → ``[(m, n), …]``.

    >>> product(["a", "b"], [1, 2])
    [('a', 1), ('a', 2), ('b', 1), ('b', 2)]
    """
    return list(itertools.product(*axes))


@dataclass
class Grid:
    """The finished sweep: ``raw[setting]`` holds each seed's result, in seed order."""

    settings: list[tuple]
    seeds: int
    raw: dict[tuple, list[dict[str, Any]]]

    def results(
        self,
        label: Callable[..., str] = lambda *s: str(s[0]),
        where: Callable[..., bool] = lambda *s: True,
        columns: Iterable[str] | None = None,
    ) -> report.Results:
        """``{label(*setting): {metric: [seed 0's, seed 1's, …]}}`` for the settings ``where`` keeps (numeric
        metrics only, or the ``columns`` named); settings with the same label pool their values."""
        out: report.Results = {}
        for s in self.settings:
            if where(*s):
                for r in self.raw[s]:
                    report.add(out, label(*s), _numbers(r, columns))
        return out

    def split(self) -> dict[Any, Grid]:
        """One grid per value of the settings' first field, whose settings are the rest (tasks, datasets, data
        sizes that each get their own table).

        >>> Grid([("x", "a"), ("y", "a")], 1, {("x", "a"): [{"v": 1}], ("y", "a"): [{"v": 2}]}).split()["y"].raw
        {('a',): [{'v': 2}]}
        """
        out: dict[Any, Grid] = {}
        for s in self.settings:
            part = out.setdefault(s[0], Grid([], self.seeds, {}))
            part.settings.append(s[1:])
            part.raw[s[1:]] = self.raw[s]
        return out

    def nested(self, setting: tuple = (), columns: Iterable[str] | None = None) -> report.Results:
        """For jobs that return ``{label: metrics}`` (one seed trains every method, e.g. a shared backbone): the
        results by those labels."""
        out: report.Results = {}
        for r in self.raw[setting]:
            for name, metrics in r.items():
                report.add(out, name, _numbers(metrics, columns))
        return out


def _numbers(r: dict[str, Any], columns: Iterable[str] | None) -> dict[str, float]:
    """The numeric metrics of one result (only ``columns``, when given)."""
    keep = None if columns is None else set(columns)
    return {
        k: v
        for k, v in r.items()
        if (keep is None or k in keep) and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def sweep(
    ctx,
    settings: list[tuple],
    seeds: int,
    fn: Callable[..., dict[str, Any]],
    *,
    name: str = "runs",
    desc: str = "training runs",
    seeds_outer: bool = True,
) -> Grid:
    """Run ``fn(*setting, seed)`` for every setting and seed not yet recorded under ``name``.

    Args:
        ctx: the recipe's ``RunContext``.
        settings: the settings, each a tuple (``product`` builds them from axes); ``()`` for one setting.
        seeds: seeds per setting (0 … seeds − 1).
        fn: one job; returns a JSON mapping (metrics, and anything else the recipe plots).
        name: the record (``state/<name>.jsonl``); its keys are ``job_key((*setting, seed))``.
        desc: the progress bar's label.
        seeds_outer: run seed 0 of every setting first (a job may reuse what an earlier setting of its seed
            built, e.g. a baseline model it distils from); else every seed of a setting together.

    Returns:
        The ``Grid`` of results.
    """
    settings = [tuple(s) for s in settings]
    order = (
        [(*s, k) for k in range(seeds) for s in settings]
        if seeds_outer
        else [(*s, k) for s in settings for k in range(seeds)]
    )
    done = ctx.each(name, order, fn, desc)
    return Grid(settings, seeds, {s: [done[job_key((*s, k))] for k in range(seeds)] for s in settings})


def stage(ctx, name: str, build: Callable[[], Any]) -> Any:
    """A stage that later methods freeze (an SSL encoder, an autoencoder, computed targets), built once and kept in
    the run folder as ``state/stages/<name>.pt`` (atomically): a resumed run, or another job of the same seed,
    loads it instead of building it again. ``build()`` returns what to keep (state dicts, tensors, numbers).
    """
    import torch

    path = ctx.run_dir / "state" / "stages" / f"{name}.pt"
    if path.exists():
        return torch.load(path, weights_only=False)
    obj = build()
    if ctx.is_main:
        buf = io.BytesIO()
        torch.save(obj, buf)
        atomic_write(path, buf.getvalue())
    return obj
