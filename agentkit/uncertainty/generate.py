"""``agentkit uncertainty generate``: K sampled answers per question from each model, saved for scoring.

Models are given as specs, mixed freely: a catalog name or path (``smollm2-135m``: the embedded HFEngine),
``vllm:NAME`` (VLLMEngine, GPU) or ``openai:NAME@URL`` (any OpenAI-compatible server; the key comes from
``OPENAI_API_KEY``); ``NAME=SPEC`` saves a model under NAME (``gemma-sft=outputs/…/models/gemma-sft``), and
``@ensemble.json`` stands for the models of an ensemble the ``uncertainty_ensemble`` recipe trained. Each model answers every question K times at ``temperature`` plus once greedily (the answer
that is judged). Finished questions are appended to ``OUT.partial/<model>.jsonl`` as they complete, so an
interrupted run resumes where it stopped; the final file is written atomically when every model is done.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from agentkit.data.suites import SUITE_NAMES, suite_tasks
from agentkit.data.tasks import Task
from agentkit.engines import make_engine
from agentkit.engines.base import SamplingParams
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
    spec: str
    kind: str
    name: str
    base_url: str | None = None

    key_name: str | None = None  # NAME of a NAME=SPEC spec: the model's key in the saved rows

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        name, eq, rest = spec.partition("=")
        if eq and name and rest and not spec.startswith(("openai:", "vllm:")):
            inner = cls.parse(rest)
            inner.spec, inner.key_name = spec, name
            return inner
        if spec.startswith("openai:"):
            name, _, url = spec[len("openai:") :].partition("@")
            if not name or not url:
                raise AgentkitError(f"model spec {spec!r}: expected openai:NAME@URL")
            return cls(spec, "openai", name, url)
        if spec.startswith("vllm:"):
            return cls(spec, "vllm", spec[len("vllm:") :])
        return cls(spec, "hf", spec)

    @property
    def key(self) -> str:
        """The model's name in the saved rows (``samples`` keys): NAME of NAME=SPEC, else the model's name."""
        return self.key_name or self.name

    def build(self):
        if self.kind == "openai":
            return make_engine("openai", self.name, base_url=self.base_url, api_key=os.environ.get("OPENAI_API_KEY"))
        return make_engine(self.kind, self.name)


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


def generate(
    models: list[str],
    tasks: list[Task],
    out: str | Path,
    samples: int = 5,
    temperature: float = 0.7,
    top_p: float = 1.0,
    max_tokens: int = 24,
    seed: int = 0,
    chunk: int = 32,
    system: str = SYSTEM,
    few_shot: bool = True,
    progress: bool = True,
) -> Path:
    if samples < 2:
        raise AgentkitError(f"--samples {samples}: AU needs at least 2 samples per question")
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
                sampled = engine.generate(
                    prompts,
                    SamplingParams(
                        n=samples, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, entropy=False
                    ),
                )
                greedy = engine.generate(prompts, SamplingParams(temperature=0, max_tokens=max_tokens, entropy=False))
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
    return out
