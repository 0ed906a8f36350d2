"""What a game is: a seeded state generator per level, legal moves, an exact solver, text and PNG renderings, and
task templates that the game's own code answers (Code2Logic's "data engine").

A state is a JSON-serialisable dict (it goes into GameQA's ``state`` field and comes back for checking). A task
template turns a state into a ``Task``: the question, the gold answer, how to verify it (``verify`` spec of
``agentkit.gamerl.verifiers``), a step-by-step analysis computed by the same code that computes the answer, and
distractors when the answer can be asked as multiple choice.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Literal

Level = Literal["Easy", "Medium", "Hard"]
LEVELS: tuple[Level, ...] = ("Easy", "Medium", "Hard")
Category = Literal["3d_spatial", "pattern_recognition", "multi_step_reasoning", "strategic_planning"]
CATEGORIES: tuple[Category, ...] = ("3d_spatial", "pattern_recognition", "multi_step_reasoning", "strategic_planning")
# GameQA's question families
QA_TYPES = ("StatePerception", "StatePrediction", "StrategyOptimization")


@dataclass
class Task:
    """One question about one state. ``answer``: the gold answer as text. ``verify``: its kind and options (see
    ``agentkit.gamerl.verifiers``). ``analysis``: the step-by-step derivation. ``distractors``: wrong answers of the
    same kind, for the multiple-choice form (empty: fill-in only)."""

    qa_type: str
    question: str
    answer: str
    verify: dict[str, Any]
    analysis: str
    distractors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Template:
    """A task template: its name (GameQA's ``question_description`` is ``description``), family, and the function
    ``make(game, state, rng, level) -> Task``."""

    name: str
    qa_type: str
    description: str
    make: Callable[[Any, dict[str, Any], random.Random, Level], Task]


class Game:
    """Base class of the built-in games. Subclasses set ``name``, ``category``, ``rules`` (one paragraph the prompt
    shows), ``templates``, and implement ``generate``, ``moves``, ``step``, ``solve``, ``text`` and ``draw``."""

    name: ClassVar[str]
    category: ClassVar[Category]
    rules: ClassVar[str]
    templates: ClassVar[tuple[Template, ...]]

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        """A fresh state of the level's size and difficulty (a puzzle with a unique solution where it asks one)."""
        raise NotImplementedError

    def moves(self, state: dict[str, Any]) -> list[Any]:
        """The legal moves (actions) from ``state``."""
        raise NotImplementedError

    def step(self, state: dict[str, Any], move: Any) -> dict[str, Any]:
        """The state after a legal ``move`` (a new dict; ``state`` is left as it was). Illegal: ValueError."""
        raise NotImplementedError

    def solve(self, state: dict[str, Any]) -> Any:
        """The exact solution: shortest plan, game value, completed grid… (see each game)."""
        raise NotImplementedError

    def text(self, state: dict[str, Any]) -> str:
        """The state as text for a language model (rows numbered from 0, columns from 0)."""
        raise NotImplementedError

    def draw(self, state: dict[str, Any]):
        """The state as a PIL image (the PNG of GameQA's image variant)."""
        raise NotImplementedError

    def solution(self, state: dict[str, Any]) -> Any:
        """``solve(state)``, memoised by the state's JSON: a checker asks it for each of a group's samples."""
        return _solved(self, json.dumps(state, sort_keys=True))

    def replay(self, state: dict[str, Any], moves) -> dict[str, Any] | None:
        """The state after playing ``moves`` from ``state``, or None at the first illegal one."""
        try:
            for move in moves:
                state = self.step(state, move)
        except (ValueError, KeyError, TypeError):
            return None
        return state

    def check(self, entry: dict[str, Any], parsed: Any) -> bool:
        """Whether a parsed answer is valid for a task whose ``verify`` spec sets ``check`` (many valid answers)."""
        raise NotImplementedError(f"{self.name} has no checker")

    def template(self, name: str) -> Template:
        for t in self.templates:
            if t.name == name:
                return t
        raise KeyError(f"{self.name} has no task {name!r}; it has {', '.join(t.name for t in self.templates)}")


@lru_cache(maxsize=4096)
def _solved(game: Game, key: str) -> Any:
    return game.solve(json.loads(key))


def int_distractors(rng: random.Random, gold: int, n: int = 7, low: int = 0) -> list[str]:
    """``n`` distinct plausible wrong integers near ``gold`` (never below ``low``)."""
    pool = [v for d in (1, 2, 3, 4, 5, 6, 8, 10) for v in (gold - d, gold + d) if v >= low and v != gold]
    rng.shuffle(pool)
    return [str(v) for v in pool[:n]]


def coord_distractors(rng: random.Random, gold: tuple[int, ...], cells: list[tuple[int, ...]], n: int = 7) -> list[str]:
    """``n`` other cells as wrong answers, nearest first (then random among equals)."""
    others = [c for c in cells if tuple(c) != tuple(gold)]
    rng.shuffle(others)
    others.sort(key=lambda c: sum(abs(a - b) for a, b in zip(c, gold)))
    return [fmt_coord(c) for c in others[:n]]


def fmt_coord(c) -> str:
    return "(" + ", ".join(str(int(x)) for x in c) + ")"


def fmt_grid(grid) -> str:
    return "\n".join(" ".join(str(x) for x in row) for row in grid)


NEIGHBOURS4 = ((-1, 0, "U"), (1, 0, "D"), (0, -1, "L"), (0, 1, "R"))
NEIGHBOURS8 = tuple((dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc)
