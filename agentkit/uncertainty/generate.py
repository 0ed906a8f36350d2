"""``agentkit uncertainty generate``: K sampled answers per question from each model, saved for scoring.

Models are given as specs, mixed freely: a catalog name or path (``smollm2-135m``: the embedded HFEngine),
``vllm:NAME`` (VLLMEngine, GPU) or ``openai:NAME@URL`` (any OpenAI-compatible server; the key comes from
``OPENAI_API_KEY``); ``NAME=SPEC`` saves a model under NAME (``gemma-sft=outputs/…/models/gemma-sft``), and
``@ensemble.json`` stands for the models of an ensemble the ``uncertainty_ensemble`` recipe trained. Each model answers every question K times at ``temperature`` plus once greedily (the answer
that is judged). Finished questions are appended to ``OUT.partial/<model>.jsonl`` as they complete, so an
interrupted run resumes where it stopped; the final file is written atomically when every model is done, and
``OUT.partial`` is then removed.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from agentkit.data.suites import SUITE_NAMES, suite_tasks
from agentkit.data.tasks import Task
from agentkit.engines.base import SamplingParams
from agentkit.engines.config import EngineConfig
from agentkit.errors import AgentkitError
from agentkit.files import append_records, read_records
from agentkit.uncertainty.prompts import SYSTEM, question_prompt
from agentkit.uncertainty.schema import GenerationRow, write_generations


def load_tasks(spec: str, seed: int = 0) -> list[Task]:
    """Tasks from a file (JSONL, Parquet or a saved HF dataset: ``load_task_file``) or suite specs ``NAME[:N]``
    joined by commas (names: ``agentkit.data.suites``; ``multihop`` is closed-book here, and as its entities are
    invented a model can only guess; ``multihop-open`` puts the supporting documents before the question).
    """
    path = Path(spec)
    if path.suffix in (".jsonl", ".parquet") or path.exists():
        from agentkit.data.tasks import load_task_file

        return load_task_file(path)
    tasks: list[Task] = []
    for part in spec.split(","):
        name, _, n = part.strip().partition(":")
        if name not in SUITE_NAMES:
            from agentkit.errors import did_you_mean

            raise AgentkitError(f"--tasks: {name!r} is neither a file nor a suite", did_you_mean(name, SUITE_NAMES))
        if n and not (n.isdigit() and int(n) > 0):
            raise AgentkitError(f"--tasks {part.strip()!r}: N must be a positive integer", "e.g. arithmetic:200")
        tasks += suite_tasks(name, int(n) if n else 100, seed, kb=seed)
    dup = len(tasks) - len({t.id for t in tasks})
    if dup:
        raise AgentkitError(f"--tasks {spec!r} repeats {dup} question(s)", "name each suite once")
    return tasks


@dataclass
class ModelSpec:
    """A model to sample: ``NAME`` (the hf engine), ``KIND:NAME`` (any engine kind in ``ENGINES``: ``vllm:NAME``),
    ``openai:NAME@URL`` (the server at URL; its key from ``OPENAI_API_KEY``), each optionally ``KEY=SPEC`` (saved
    under KEY)."""

    spec: str
    engine: EngineConfig
    key_name: str | None = None  # NAME of a NAME=SPEC spec: the model's key in the saved rows

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        from agentkit.engines import ENGINES, engine_config

        name, eq, rest = spec.partition("=")
        kind, colon, model = spec.partition(":")
        if eq and name and rest and not (colon and kind in ENGINES and len(kind) < len(name)):
            inner = cls.parse(rest)
            inner.spec, inner.key_name = spec, name
            return inner
        if not (colon and kind in ENGINES):
            kind, model = "hf", spec
        options: dict[str, Any] = {"model": model}
        if "@" in model and "base_url" in {f.name for f in dataclasses.fields(ENGINES.get(kind))}:
            model, _, url = model.partition("@")
            if not model or not url:
                raise AgentkitError(f"model spec {spec!r}: expected {kind}:NAME@URL")
            options = {"model": model, "base_url": url}
        try:
            return cls(spec, engine_config(kind, **options))
        except AgentkitError as e:
            raise AgentkitError(f"model spec {spec!r}: {e}") from None

    @property
    def kind(self) -> str:
        return self.engine.kind

    @property
    def name(self) -> str:
        return str(self.engine.model)

    @property
    def key(self) -> str:
        """The model's name in the saved rows (``samples`` keys): NAME of NAME=SPEC, else the model's name."""
        return self.key_name or self.name

    def build(self):
        return self.engine.build()


def expand_models(models: list[str]) -> list[str]:
    """Model specs with each ``@FILE`` (an ``ensemble.json`` of ``recipes/uncertainty_ensemble``) replaced by its
    models as ``NAME=PATH``, the reference first."""
    out = []
    for m in (m.strip() for m in models):
        if m.startswith("@"):
            from agentkit.uncertainty.ensemble import read_ensemble

            out += read_ensemble(m[1:])
        elif m:
            out.append(m)
    return out


SAMPLING = SamplingParams(n=5, temperature=0.7, max_tokens=24, seed=0)  # the CLI's defaults


def generate(
    models: list[str],
    tasks: list[Task],
    out: str | Path,
    sampling: SamplingParams | None = None,
    chunk: int = 32,
    system: str = SYSTEM,
    few_shot: bool = True,
    progress: bool = True,
) -> Path:
    """Sample every model on every question and save the generations (see the module docstring).

    Args:
        models: model specs (``ModelSpec``) or ``@ensemble.json``.
        tasks: the questions.
        out: the generations file (``.jsonl``, ``.parquet``) or a directory for an HF dataset.
        sampling: the sampled answers' settings, ``n`` (at least 2) per question (default: ``SAMPLING``); the judged
            answer is drawn greedily with the same ``max_tokens``.
        chunk: questions per engine call (each finished chunk is kept).
        system: the system prompt.
        few_shot: show worked examples before each question.
        progress: show a progress bar per model.

    Returns:
        ``out``.

    Raises:
        AgentkitError: fewer than 2 samples, a model named twice, or a bad model spec.
    """
    sampling = sampling or SAMPLING
    if sampling.n < 2:
        raise AgentkitError(f"--samples {sampling.n}: AU needs at least 2 samples per question")
    greedy_params = replace(sampling, n=1, temperature=0.0, seed=None)
    specs = [ModelSpec.parse(m) for m in expand_models(models)]
    if len({s.key for s in specs}) != len(specs):
        raise AgentkitError("--models names a model twice")
    out = Path(out)
    state = out.with_name(out.name + ".partial")
    state.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for spec in specs:
        partial = state / f"{spec.key.replace('/', '_')}.jsonl"
        done = read_records(partial)
        todo = [t for t in tasks if t.id not in done]
        if todo:
            engine = spec.build()
            bar = tqdm(
                total=len(tasks),
                initial=len(tasks) - len(todo),
                desc=spec.key,
                disable=not progress,
                dynamic_ncols=True,
            )
            for start in range(0, len(todo), chunk):
                part = todo[start : start + chunk]
                prompts = [question_prompt(t, system, few_shot) for t in part]
                sampled = engine.generate(prompts, sampling)
                greedy = engine.generate(prompts, greedy_params)
                rows = {
                    t.id: {"samples": [c.text.strip() for c in outs], "greedy": g.text.strip()}
                    for t, outs, (g,) in zip(part, sampled, greedy)
                }
                append_records(partial, rows)
                done.update(rows)
                bar.update(len(part))
            bar.close()
        results[spec.key] = done
    rows = [
        GenerationRow(
            t.id,
            t.question,
            {k: results[k][t.id]["samples"] for k in results},
            t.answer,
            t.kind,
            t.metric,
            {k: results[k][t.id]["greedy"] for k in results},
            t.meta,
        )
        for t in tasks
    ]
    write_generations(out, rows)
    shutil.rmtree(state)  # the final file holds everything; the resume state would only mislead a later run
    return out
