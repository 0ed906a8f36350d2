"""Conway's Game of Life (multi-step reasoning) on a bounded board (cells outside it are dead). A live cell with
2 or 3 live neighbours lives on, a dead cell with exactly 3 comes alive, every other cell dies or stays dead.
"Solving" is simulating: ``solve`` returns the board after ``state["steps"]`` generations."""

from __future__ import annotations

import random
from typing import Any

from agentkit.gamerl.games.base import NEIGHBOURS8, Game, Level, Task, Template, fmt_grid, int_distractors
from agentkit.gamerl.render import draw_chars

SIZE = {"Easy": 5, "Medium": 6, "Hard": 8}
STEPS = {"Easy": 1, "Medium": 2, "Hard": 3}
DENSITY = 0.35


def neighbours(grid: list[str], r: int, c: int) -> int:
    n, m = len(grid), len(grid[0])
    return sum(0 <= r + dr < n and 0 <= c + dc < m and grid[r + dr][c + dc] == "O" for dr, dc in NEIGHBOURS8)


def advance(grid: list[str]) -> list[str]:
    out = []
    for r, row in enumerate(grid):
        cells = []
        for c, ch in enumerate(row):
            k = neighbours(grid, r, c)
            cells.append("O" if k == 3 or (ch == "O" and k == 2) else ".")
        out.append("".join(cells))
    return out


class Life(Game):
    name = "life"
    category = "multi_step_reasoning"
    rules = (
        "Conway's Game of Life: 'O' is a live cell, '.' a dead one; cells beyond the board are dead. Each generation, "
        "a live cell with 2 or 3 live neighbours (of its 8) stays alive, a dead cell with exactly 3 becomes alive, "
        "and every other cell is dead in the next generation. Cells are (row, column) from 0 at the top left."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        n = SIZE[level]
        while True:
            grid = ["".join("O" if rng.random() < DENSITY else "." for _ in range(n)) for _ in range(n)]
            if any("O" in row for row in advance(grid)):  # not a board that dies at once
                return {"grid": grid, "steps": STEPS[level]}

    def moves(self, state: dict[str, Any]) -> list[str]:
        return ["tick"]  # the one transition: the next generation

    def step(self, state: dict[str, Any], move: str = "tick") -> dict[str, Any]:
        return {**state, "grid": advance(state["grid"])}

    def solve(self, state: dict[str, Any]) -> list[str]:
        grid = state["grid"]
        for _ in range(state["steps"]):
            grid = advance(grid)
        return grid

    def text(self, state: dict[str, Any]) -> str:
        return "\n".join(state["grid"])

    def draw(self, state: dict[str, Any]):
        return draw_chars(state["grid"], {"O": ("alive", ""), ".": ("dead", "")}, "game of life")

    def _trace(self, state) -> str:
        grid, out = state["grid"], []
        for k in range(state["steps"]):
            grid = advance(grid)
            out.append(f"generation {k + 1}: " + " / ".join(grid) + f" ({sum(r.count('O') for r in grid)} alive)")
        return "; ".join(out)

    # ---- task templates ----------------------------------------------------------------------------------
    def _neighbours(self, state, rng, level) -> Task:
        g = state["grid"]
        r, c = rng.randrange(len(g)), rng.randrange(len(g))
        k = neighbours(g, r, c)
        cells = [(r + dr, c + dc) for dr, dc in NEIGHBOURS8 if 0 <= r + dr < len(g) and 0 <= c + dc < len(g)]
        live = [f"({a}, {b})" for a, b in cells if g[a][b] == "O"]
        return Task(
            "StatePerception",
            f"How many live neighbours does cell ({r}, {c}) have?",
            str(k),
            {"kind": "int"},
            f"Its neighbours on the board are {len(cells)} cells; the live ones are {', '.join(live) or 'none'}: {k}.",
            int_distractors(rng, k),
        )

    def _alive_after(self, state, rng, level) -> Task:
        k = sum(row.count("O") for row in self.solve(state))
        s = state["steps"]
        return Task(
            "StatePrediction",
            f"How many cells are alive after {s} generation{'s' * (s > 1)}?",
            str(k),
            {"kind": "int"},
            self._trace(state) + ".",
            int_distractors(rng, k),
        )

    def _cell_after(self, state, rng, level) -> Task:
        final, g = self.solve(state), state["grid"]
        r, c = rng.randrange(len(g)), rng.randrange(len(g))
        alive = final[r][c] == "O"
        s = state["steps"]
        return Task(
            "StatePrediction",
            f"Is cell ({r}, {c}) alive or dead after {s} generation{'s' * (s > 1)}?",
            "A" if alive else "B",
            {"kind": "choice", "options": ["alive", "dead"]},
            self._trace(state) + f". Cell ({r}, {c}) is {'alive' if alive else 'dead'}.",
        )

    def _next_grid(self, state, rng, level) -> Task:
        nxt = advance(state["grid"])
        n = len(nxt)
        return Task(
            "StatePrediction",
            "Give the board after one generation, in the same notation (one row per line).",
            "\n".join(nxt),
            {"kind": "grid", "rows": n, "cols": n},
            "Counting each cell's live neighbours and applying the rules gives:\n" + fmt_grid(nxt),
        )

    templates = (
        Template("neighbours", "StatePerception", "Live neighbours of a cell.", lambda g, *a: g._neighbours(*a)),
        Template("alive_after", "StatePrediction", "Live cells after k generations.", lambda g, *a: g._alive_after(*a)),
        Template("cell_after", "StatePrediction", "A cell after k generations.", lambda g, *a: g._cell_after(*a)),
        Template("next_grid", "StatePrediction", "The next generation.", lambda g, *a: g._next_grid(*a)),
    )
