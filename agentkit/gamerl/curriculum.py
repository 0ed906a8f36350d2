"""A level curriculum over games: each game's level rises when its recent success rate is high and falls when it
is low (reasoning-gym's curricula step difficulty attributes by hand; here the training signal moves them).

    level_g ← next(level_g)   if mean(last ``window`` scores of g) ≥ ``up``
    level_g ← prev(level_g)   if mean(last ``window`` scores of g) ≤ ``down``

The window empties after each change, so a level is judged on its own samples. ``state_dict`` / ``load_state_dict``
make it resumable with the trainer's checkpoints.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from agentkit.config import Fraction, PosInt, option
from agentkit.gamerl.games.base import LEVELS, Level


@dataclass
class CurriculumConfig:
    """The level curriculum: each game moves up or down on its recent success rate."""

    start: Level = option("Easy", "every game's first level")
    window: PosInt = option(32, "recent scores per game a level change is judged on")
    up: Fraction = option(0.75, "success rate over the window that raises a game's level")
    down: Fraction = option(0.0, "success rate that lowers it (0: never lower); must be below up")
    max_level: Level = option("Hard", "the highest level a game may reach")

    def problems(self) -> list[str]:
        if self.down >= self.up:
            return [f"down: {self.down} must be below up ({self.up})"]
        if LEVELS.index(self.start) > LEVELS.index(self.max_level):
            return [f"start: {self.start} is above max_level {self.max_level}"]
        return []


@dataclass
class Curriculum:
    """Per-game levels moved by recorded scores (see the module docstring)."""

    games: list[str]
    config: CurriculumConfig = field(default_factory=CurriculumConfig)

    def __post_init__(self):
        self.levels: dict[str, Level] = dict.fromkeys(self.games, self.config.start)
        self.recent: dict[str, deque[float]] = {g: deque(maxlen=self.config.window) for g in self.games}
        self.changes: list[tuple[str, Level, Level]] = []

    def level(self, game: str) -> Level:
        return self.levels[game]

    def record(self, game: str, score: float) -> Level | None:
        """Add one score; the new level when this one moved it, else None."""
        c, recent = self.config, self.recent[game]
        recent.append(float(score))
        if len(recent) < c.window:
            return None
        rate = sum(recent) / len(recent)
        i, top = LEVELS.index(self.levels[game]), LEVELS.index(c.max_level)
        j = i + 1 if rate >= c.up and i < top else i - 1 if c.down > 0 and rate <= c.down and i > 0 else i
        if j == i:
            return None
        self.changes.append((game, self.levels[game], LEVELS[j]))
        self.levels[game] = LEVELS[j]
        recent.clear()
        return LEVELS[j]

    def state_dict(self) -> dict[str, Any]:
        return {
            "levels": dict(self.levels),
            "recent": {g: list(v) for g, v in self.recent.items()},
            "changes": self.changes,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.levels.update(state["levels"])
        for g, v in state["recent"].items():
            if g in self.recent:
                self.recent[g].clear()
                self.recent[g].extend(v)
        self.changes = [tuple(x) for x in state.get("changes", [])]
