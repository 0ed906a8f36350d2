"""Greedy evaluation of a model on game entries: per-sample verdicts, accuracy per game, level and task, with the
deciding path of each sample."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from agentkit.gamerl.dataset import entry_image
from agentkit.gamerl.verifiers import Judge, verify_batch

SYSTEM_PROMPT = (
    "You answer questions about game boards. Read the board carefully, reason briefly, and give the final answer "
    "inside <answer></answer>."
)


def chat(entry: dict[str, Any], system_prompt: str = SYSTEM_PROMPT) -> list[dict[str, Any]]:
    """The entry as a chat; an image-board entry's user turn is its board image, then the question (the order
    TRL's ``prepare_multimodal_messages`` gives training prompts)."""
    image = entry_image(entry)
    question: Any = entry["question"]
    if image is not None:
        question = [{"type": "image", "image": image}, {"type": "text", "text": question}]
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": question}]


def evaluate(
    engine,
    entries: Sequence[dict[str, Any]],
    max_tokens: int = 96,
    judge: Judge | None = None,
    batch_size: int = 32,
    system_prompt: str = SYSTEM_PROMPT,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """One row per entry: game, level, task, answer kind, score, path, source, the model's output (greedy,
    stopping after ``</answer>``)."""
    from tqdm.auto import tqdm

    from agentkit.engines.base import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=max_tokens, stop=["</answer>"], include_stop_str_in_output=True)
    rows = []
    starts = range(0, len(entries), batch_size)
    for i in tqdm(starts, desc="evaluate", disable=not progress):
        part = list(entries[i : i + batch_size])
        outs = engine.generate([chat(e, system_prompt) for e in part], params)
        texts = [o[0].text for o in outs]
        for e, text, v in zip(part, texts, verify_batch(texts, part, judge)):
            m = e["metadata"]
            rows.append(
                {
                    "game": m["game"],
                    "level": m.get("qa_level"),
                    "task": m.get("task"),
                    "kind": m.get("verify", {}).get("kind"),
                    "score": v.score,
                    "path": v.path,
                    "source": v.source,
                    "output": text,
                    "answer": e["answer"],
                }
            )
    return rows


def accuracy(rows: Sequence[dict[str, Any]], *keys: str) -> dict[tuple, tuple[float, int]]:
    """Mean score and count grouped by ``keys`` (e.g. ``"game", "level"``)."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        groups[tuple(r[k] for k in keys)].append(r["score"])
    return {k: (sum(v) / len(v), len(v)) for k, v in sorted(groups.items())}


def chance(entries: Sequence[dict[str, Any]]) -> float:
    """The expected accuracy of guessing: 1/options on multiple choice, 0 elsewhere."""
    xs = [
        1 / len(e["metadata"]["options"]) if e["metadata"].get("verify", {}).get("kind") == "choice" else 0.0
        for e in entries
    ]
    return sum(xs) / max(1, len(xs))
