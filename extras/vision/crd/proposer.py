"""Proposers for CRD: who names the concepts and reads their values. The recipe's default is the programmatic one
(``agentkit.extras.data.raven_proposer``: true values corrupted at rate ρ, spurious concepts, calibrated logits),
since no vision-language model ships offline. ``EngineProposer`` puts a real one in its place through any agentkit
Engine that takes images (``VisionEngine`` on a catalog VLM, vLLM, an OpenAI-compatible server): it sends the
puzzle as ``raven_render`` draws it and parses the concepts the model lists.

>>> import json
>>> text = json.dumps({"concepts": [{"name": "size", "values": [1] * 16, "rule": True}]})
>>> p = parse_proposal(text, rule_attributes={"size"})
>>> p.names, p.values.shape, p.logits.round(2).tolist(), p.is_rule.tolist()
(['size'], (1, 16), [1.39], [True])
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from agentkit.extras import data
from agentkit.extras.data import Proposal, RavenPuzzle

PROMPT = (
    "The image shows a 3 x 3 matrix of panels (the last one is '?') and below it 8 numbered candidate panels. "
    "List the visual concepts that vary across panels (for example number of objects, their position, shape, "
    "size, colour). For each concept give its value in each of 16 panels as a small integer: the 8 matrix panels "
    "in reading order, then candidates 1 to 8; and say whether it follows a rule along the rows. Reply with JSON "
    'only: {"concepts": [{"name": "...", "values": [16 integers], "rule": true or false}]}'
)
CONFIDENCE = 0.8  # the probability a listed "rule": true stands for (log-odds ±log 4), as no logprobs are read


def parse_proposal(text: str, rule_attributes: set[str]) -> Proposal | None:
    """The concepts in a model's reply, or None when it holds no valid list (a puzzle it then cannot answer).

    Args:
        text: the reply; the outermost ``{…}`` is read as JSON.
        rule_attributes: the names of the concepts a rule truly governs (only to score rule F1).
    """
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        obj: Any = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    items = obj.get("concepts") if isinstance(obj, dict) else None
    if not isinstance(items, list):
        return None
    names, values, rules = [], [], []
    for it in items:
        if not isinstance(it, dict) or not isinstance(it.get("name"), str):
            continue
        v = it.get("values")
        if not (isinstance(v, list) and len(v) == 16 and all(isinstance(x, int) and 0 <= x < 1000 for x in v)):
            continue
        names.append(it["name"].strip().lower())
        values.append(v)
        rules.append(bool(it.get("rule")))
    if not names:
        return None
    vals = np.array(values, int)
    odds = math.log(CONFIDENCE / (1 - CONFIDENCE))
    return Proposal(
        names=names,
        values=vals,
        levels=np.maximum(vals.max(1) + 1, 2),
        logits=np.where(rules, odds, -odds),
        is_rule=np.array([n in rule_attributes for n in names]),
    )


class EngineProposer:
    """Ask a vision-language model, through an Engine, to name the concepts of a puzzle (greedy, one call each)."""

    def __init__(self, engine, max_tokens: int = 1024):
        self.engine = engine
        self.max_tokens = max_tokens

    def __call__(self, puzzles: list[RavenPuzzle]) -> list[Proposal | None]:
        from agentkit.engines import SamplingParams

        chats = [
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "image": data.raven_render(p).convert("RGB")},
                        {"type": "text", "text": PROMPT},
                    ],
                }
            ]
            for p in puzzles
        ]
        outs = self.engine.generate(chats, SamplingParams(temperature=0, max_tokens=self.max_tokens))
        return [
            parse_proposal(o[0].text, {a for a, r in p.rules.items() if r is not None}) for o, p in zip(outs, puzzles)
        ]
