"""Langton's ant (multi-step reasoning) on a wrapping board: on a white cell the ant turns right, on a black one
left; it flips the cell's colour and steps forward. ``solve`` simulates ``state["steps"]`` moves."""

from __future__ import annotations

import random
from typing import Any

from agentkit.gamerl.games.base import Game, Level, Task, Template, coord_distractors, fmt_coord, int_distractors
from agentkit.gamerl.render import draw_grid

SIZE = {"Easy": 5, "Medium": 7, "Hard": 9}
STEPS = {"Easy": (2, 4), "Medium": (5, 8), "Hard": (10, 15)}
HEADINGS = "URDL"  # clockwise
DELTA = {"U": (-1, 0), "R": (0, 1), "D": (1, 0), "L": (0, -1)}
WORD = {"U": "up", "R": "right", "D": "down", "L": "left"}


def advance(state: dict[str, Any]) -> dict[str, Any]:
    grid = [list(row) for row in state["grid"]]
    (r, c), h = state["ant"], state["heading"]
    turn = 1 if grid[r][c] == "." else -1
    h = HEADINGS[(HEADINGS.index(h) + turn) % 4]
    grid[r][c] = "#" if grid[r][c] == "." else "."
    n = len(grid)
    dr, dc = DELTA[h]
    return {**state, "grid": ["".join(row) for row in grid], "ant": [(r + dr) % n, (c + dc) % n], "heading": h}


class LangtonAnt(Game):
    name = "langton"
    category = "multi_step_reasoning"
    rules = (
        "Langton's ant: '.' is a white cell, '#' a black one, and the ant's cell and heading are given. Each step, on "
        "a white cell the ant turns 90° right, on a black cell 90° left; it then flips the colour of that cell and "
        "moves one cell forward. The board wraps around at its edges. Cells are (row, column) from 0 at the top left."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        n = SIZE[level]
        grid = ["".join("#" if rng.random() < 0.25 else "." for _ in range(n)) for _ in range(n)]
        return {
            "grid": grid,
            "ant": [rng.randrange(n), rng.randrange(n)],
            "heading": rng.choice(HEADINGS),
            "steps": rng.randint(*STEPS[level]),
        }

    def moves(self, state: dict[str, Any]) -> list[str]:
        return ["step"]

    def step(self, state: dict[str, Any], move: str = "step") -> dict[str, Any]:
        return advance(state)

    def solve(self, state: dict[str, Any]) -> dict[str, Any]:
        for _ in range(state["steps"]):
            state = advance(state)
        return state

    def text(self, state: dict[str, Any]) -> str:
        return "\n".join(state["grid"]) + (
            f"\nThe ant is at {fmt_coord(state['ant'])}, facing {WORD[state['heading']]}."
        )

    def draw(self, state: dict[str, Any]):
        g, ant = state["grid"], tuple(state["ant"])
        arrow = {"U": "^", "R": ">", "D": "v", "L": "<"}[state["heading"]]
        return draw_grid(
            len(g), len(g), lambda r, c: ("black" if g[r][c] == "#" else "white", arrow if (r, c) == ant else ""), "ant"
        )

    def _trace(self, state) -> str:
        out = []
        for k in range(state["steps"]):
            colour = "white" if state["grid"][state["ant"][0]][state["ant"][1]] == "." else "black"
            state = advance(state)
            out.append(
                f"{k + 1}: on {colour} turn {'right' if colour == 'white' else 'left'} → {fmt_coord(state['ant'])} {WORD[state['heading']]}"
            )
        return "; ".join(out)

    # ---- task templates ----------------------------------------------------------------------------------
    def _cell_colour(self, state, rng, level) -> Task:
        g = state["grid"]
        r, c = rng.randrange(len(g)), rng.randrange(len(g))
        black = g[r][c] == "#"
        return Task(
            "StatePerception",
            f"What colour is cell ({r}, {c}) now?",
            "A" if black else "B",
            {"kind": "choice", "options": ["black", "white"]},
            f"Row {r} reads '{g[r]}'; column {c} holds '{g[r][c]}': {'black' if black else 'white'}.",
        )

    def _position(self, state, rng, level) -> Task:
        end = self.solve(state)["ant"]
        n = len(state["grid"])
        return Task(
            "StatePrediction",
            f"Where is the ant (row, column) after {state['steps']} steps?",
            fmt_coord(end),
            {"kind": "coord"},
            self._trace(state) + ".",
            coord_distractors(rng, tuple(end), [(r, c) for r in range(n) for c in range(n)]),
        )

    def _heading(self, state, rng, level) -> Task:
        h = self.solve(state)["heading"]
        options = ["up", "right", "down", "left"]
        return Task(
            "StatePrediction",
            f"Which way is the ant facing after {state['steps']} steps?",
            "ABCD"[options.index(WORD[h])],
            {"kind": "choice", "options": options},
            self._trace(state) + ".",
        )

    def _black_after(self, state, rng, level) -> Task:
        k = sum(row.count("#") for row in self.solve(state)["grid"])
        return Task(
            "StatePrediction",
            f"How many black cells are there after {state['steps']} steps?",
            str(k),
            {"kind": "int"},
            f"There are {sum(row.count('#') for row in state['grid'])} black cells at first; each step flips one cell: "
            + self._trace(state)
            + f". Black cells at the end: {k}.",
            int_distractors(rng, k),
        )

    templates = (
        Template("cell_colour", "StatePerception", "Colour of a cell.", lambda g, *a: g._cell_colour(*a)),
        Template("position", "StatePrediction", "The ant's cell after k steps.", lambda g, *a: g._position(*a)),
        Template("heading", "StatePrediction", "The ant's heading after k steps.", lambda g, *a: g._heading(*a)),
        Template("black_after", "StatePrediction", "Black cells after k steps.", lambda g, *a: g._black_after(*a)),
    )
