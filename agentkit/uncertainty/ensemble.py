"""A scale-matched ensemble for cross-model EU: members of comparable accuracy, made by instruction SFT on suite
questions (``recipes/uncertainty_ensemble``).

The paper's EU needs members about as good as the reference: a much weaker member agrees with nothing, so
S_inter is ~0 and EU collapses to 1 − AU. Here each member is a base model fine-tuned on its own seeded suite
questions (disjoint from every other member's, the dev set's and the experiment's) in the exact prompt format
``agentkit uncertainty generate`` uses, and evaluated greedily on a dev set every few steps; training stops once
its dev accuracy is within ``tolerance`` of the reference's (after ``min_steps``), and the evaluated checkpoint
closest to the reference's accuracy is kept.

SFT loss per row: −Σ_t m_t log p(x_t | x_<t) / Σ_t m_t with m_t = 1 on the answer's tokens (and the end of turn)
only, as ``agentkit.toollight.sft``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentkit.data.tasks import Task
from agentkit.engines.base import SamplingParams
from agentkit.uncertainty.prompts import SYSTEM, question_prompt
from agentkit.uncertainty.schema import GenerationRow
from agentkit.uncertainty.score import judge


def sft_rows(tokenizer, tasks: Sequence[Task], few_shot: bool = True) -> list[dict[str, Any]]:
    """Pre-tokenised rows (``input_ids``, ``labels``): the generate prompt, then the gold answer as the assistant's
    turn, labels -100 on the prompt. A template that renders no end-of-sequence token after the answer (the plain
    template) gets the tokenizer's EOS appended, so the model learns to stop."""
    rows = []
    for t in tasks:
        msgs = question_prompt(t, SYSTEM, few_shot)
        prefix = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        full = tokenizer.apply_chat_template(msgs + [{"role": "assistant", "content": t.answer}], tokenize=False)
        if not full.startswith(prefix):
            raise ValueError(f"{t.id}: the chat template renders the prompt differently once an answer follows")
        p_ids = tokenizer(prefix, add_special_tokens=False).input_ids
        a_ids = tokenizer(full[len(prefix) :], add_special_tokens=False).input_ids
        if tokenizer.eos_token_id not in a_ids:
            a_ids.append(tokenizer.eos_token_id)
        rows.append({"input_ids": p_ids + a_ids, "labels": [-100] * len(p_ids) + a_ids})
    return rows


def dev_accuracy(
    engine, tasks: Sequence[Task], max_tokens: int = 24, few_shot: bool = True, desc: str | None = None
) -> dict[str, float]:
    """Greedy accuracy on ``tasks`` as ``uncertainty score`` judges it (label auto): overall and per task kind.
    ``desc``: show a progress bar with this label."""
    from tqdm.auto import tqdm

    params = SamplingParams(temperature=0, max_tokens=max_tokens)
    outs = []
    for i in tqdm(range(0, len(tasks), 32), desc=desc, disable=desc is None, leave=False):
        outs += engine.generate([question_prompt(t, SYSTEM, few_shot) for t in tasks[i : i + 32]], params)
    right: dict[str, list[float]] = {}
    for t, (c,) in zip(tasks, outs):
        row = GenerationRow(t.id, t.question, {}, t.answer, t.kind, t.metric)
        right.setdefault(t.kind, []).append(judge(row, c.text.strip(), "auto", 0.5))
    every = [x for v in right.values() for x in v]
    return {"accuracy": sum(every) / len(every), **{k: sum(v) / len(v) for k, v in sorted(right.items())}}


def write_ensemble(path: Path, reference: dict[str, str], members: list[dict[str, Any]]) -> None:
    """``ensemble.json``: the reference and the members (name, path, dev accuracy), read by
    ``agentkit uncertainty generate --models @ensemble.json``."""
    from agentkit.files import atomic_write

    atomic_write(path, json.dumps({"reference": reference, "members": members}, indent=2))


def read_ensemble(path: str | Path) -> list[str]:
    """Model specs ``NAME=PATH`` of an ``ensemble.json``, the reference first."""
    from agentkit.errors import AgentkitError

    p = Path(path)
    try:
        data = json.loads(p.read_text())
        entries = [data["reference"], *data["members"]]
        return [f"{e['name']}={e['path']}" for e in entries]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise AgentkitError(f"{p}: not an ensemble file ({e})", "pass the ensemble.json the recipe wrote") from None
