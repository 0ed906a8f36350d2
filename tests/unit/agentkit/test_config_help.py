"""Every key of every registered recipe's config carries its own help and, where it is a number, its bounds.

The walk covers nested configs, the items of lists of configs (``uncertainty_ensemble``'s members) and every engine
kind a config's ``engine.kind`` can switch to.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing

import annotated_types as at
import pytest

from agentkit.config import _hints, option
from agentkit.engines import ENGINES
from agentkit.runner import RECIPES

BOUNDS = (at.Gt, at.Ge, at.Lt, at.Le, at.Interval)


def _config_types(tp) -> list[type]:
    """The config dataclasses an annotation holds (``X``, ``list[X]``, ``X | None``)."""
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return [tp]
    return [c for a in typing.get_args(tp) for c in _config_types(a)]


def all_configs() -> dict[type, str]:
    """Every config class reachable from a registered recipe, with the first dotted path that reaches it."""
    seen: dict[type, str] = {}
    todo = [(RECIPES.get(n).config_cls, n) for n in RECIPES.names() if not n.startswith("test-")]
    todo += [(ENGINES.get(k), f"engine kind {k}") for k in ENGINES.names()]
    while todo:
        cls, path = todo.pop()
        if cls in seen:
            continue
        seen[cls] = path
        hints = _hints(cls)
        for f in dataclasses.fields(cls):
            if not f.metadata.get("internal"):
                todo += [(c, f"{path}.{f.name}") for c in _config_types(hints[f.name])]
    return seen


def bounded(tp) -> bool | None:
    """None when ``tp`` holds no number; else whether every number in it has a bound."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        base, *marks = args
        inner = bounded(base)
        return inner if inner is None else inner or any(isinstance(m, BOUNDS) for m in marks)
    if origin in (typing.Union, types.UnionType, list, tuple):
        found = [b for b in map(bounded, (a for a in args if a is not Ellipsis)) if b is not None]
        return all(found) if found else None
    if tp in (int, float):
        return False
    return None


CONFIGS = all_configs()


def test_the_walk_reaches_every_kind_of_config():
    names = {c.__name__ for c in CONFIGS}
    assert {"QuickstartConfig", "AgentConfig", "SamplingParams", "HFConfig", "OpenAIConfig", "MemberConfig"} <= names
    assert {"TverskyConfig", "PairRules", "RoleConfig", "RLSettings"} <= names
    assert len(CONFIGS) >= 40


@pytest.mark.parametrize("cls", list(CONFIGS), ids=[c.__qualname__ for c in CONFIGS])
def test_every_key_has_its_own_help_and_bounds(cls):
    fields = [f for f in dataclasses.fields(cls) if not f.metadata.get("internal")]
    names = {f.name for f in fields}
    hints, helps = _hints(cls), {}
    for f in fields:
        text = f.metadata.get("help", "")
        where = f"{CONFIGS[cls]}.{f.name}"
        assert len(text) >= 8, f"{where} has no help: declare it with option(default, help)"
        # a help scraped from another key's docstring entry begins with that key's name
        other = re.match(r"(\w+)(?: / \w+)*:", text)
        assert not (other and other.group(1) in names - {f.name}), f"{where}'s help describes {other.group(1)}"
        assert text not in helps, f"{where} copies the help of {helps.get(text)}"
        helps[text] = f.name
        if f.name == "seed" or f.name.endswith("_seed") or f.name == "seeds":
            continue  # any integer is a seed
        assert bounded(hints[f.name]) is not False, f"{where}: a number without bounds (PosInt, Fraction, Interval…)"


def test_the_checks_catch_what_they_are_for():
    @dataclasses.dataclass
    class Bad:
        steps: int = option(3, "optimizer steps per run")
        lr: float = 1e-3
        alpha: float = option(0.1, "alpha: the weight of the other term")

    assert bounded(_hints(Bad)["steps"]) is False and bounded(_hints(Bad)["lr"]) is False
    assert bounded(typing.Annotated[int, at.Gt(0)] | None) is True
    assert bounded(list[typing.Annotated[float, at.Interval(ge=0, le=1)]]) is True and bounded(str) is None
    CONFIGS[Bad] = "bad"
    try:
        with pytest.raises(AssertionError, match="bad.steps: a number without bounds"):
            test_every_key_has_its_own_help_and_bounds(Bad)
    finally:
        del CONFIGS[Bad]
