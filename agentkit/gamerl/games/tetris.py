"""Tetris (pattern recognition): a board of settled cells and a tetromino to drop straight down from above a
column (in a given rotation). Full rows are cleared. Solver: try every rotation and column; report the drop that
clears the most rows."""

from __future__ import annotations

import random
from typing import Any

from agentkit.gamerl.games.base import Game, Level, Task, Template, int_distractors
from agentkit.gamerl.render import draw_grid

# each piece's cells at rotation 0, as (row, column) offsets; rotations turn them 90° clockwise
PIECES = {
    "I": [(0, 0), (0, 1), (0, 2), (0, 3)],
    "O": [(0, 0), (0, 1), (1, 0), (1, 1)],
    "T": [(0, 0), (0, 1), (0, 2), (1, 1)],
    "S": [(0, 1), (0, 2), (1, 0), (1, 1)],
    "Z": [(0, 0), (0, 1), (1, 1), (1, 2)],
    "J": [(0, 0), (1, 0), (1, 1), (1, 2)],
    "L": [(0, 2), (1, 0), (1, 1), (1, 2)],
}
BOARD = {"Easy": (6, 6), "Medium": (8, 8), "Hard": (10, 10)}  # rows, columns
FILL = {"Easy": 2, "Medium": 3, "Hard": 4}  # rows of rubble at the bottom


def shape(piece: str, rotation: int) -> list[tuple[int, int]]:
    cells = PIECES[piece]
    for _ in range(rotation % 4):
        cells = [(c, -r) for r, c in cells]
    r0, c0 = min(r for r, _ in cells), min(c for _, c in cells)
    return sorted((r - r0, c - c0) for r, c in cells)


def drop(grid: list[str], piece: str, rotation: int, col: int) -> tuple[list[str], int, int] | None:
    """(board after the drop and clears, rows cleared, top row where the piece lands) or None if it does not fit."""
    cells = shape(piece, rotation)
    rows, cols = len(grid), len(grid[0])
    if col < 0 or col + max(c for _, c in cells) >= cols:
        return None
    top = None
    for t in range(rows - max(r for r, _ in cells)):
        if all(grid[t + r][col + c] == "." for r, c in cells):
            top = t
        else:
            break
    if top is None:
        return None
    g = [list(row) for row in grid]
    for r, c in cells:
        g[top + r][col + c] = "#"
    kept = ["".join(row) for row in g if "." in row]
    cleared = rows - len(kept)
    return ["." * cols] * cleared + kept, cleared, top


class Tetris(Game):
    name = "tetris"
    category = "pattern_recognition"
    rules = (
        "Tetris: '#' is a settled block, '.' empty. A piece falls straight down from above the board, keeping its "
        "column, until it rests on a block or the floor; then every completely filled row is cleared and the rows "
        "above move down. A piece's column is that of its leftmost cell. Rows and columns count from 0 at the top "
        "left."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        rows, cols = BOARD[level]
        while True:
            grid = ["." * cols] * (rows - FILL[level])
            for _ in range(FILL[level]):
                holes = rng.sample(range(cols), rng.randint(1, 2))
                grid.append("".join("." if c in holes else "#" for c in range(cols)))
            piece, rotation = rng.choice(sorted(PIECES)), rng.randrange(4)
            width = max(c for _, c in shape(piece, rotation)) + 1
            state = {"grid": grid, "piece": piece, "rotation": rotation, "col": rng.randrange(cols - width + 1)}
            if drop(grid, piece, rotation, state["col"]) is not None:
                return state

    def moves(self, state: dict[str, Any]) -> list[tuple[int, int]]:
        cols = len(state["grid"][0])
        return [(rot, col) for rot in range(4) for col in range(cols) if drop(state["grid"], state["piece"], rot, col)]

    def step(self, state: dict[str, Any], move) -> dict[str, Any]:
        rot, col = move
        out = drop(state["grid"], state["piece"], rot, col)
        if out is None:
            raise ValueError(f"illegal drop {move!r}")
        return {**state, "grid": out[0]}

    def solve(self, state: dict[str, Any]) -> tuple[int, list[tuple[int, int]]]:
        """(most rows one drop can clear, the (rotation, column) drops that do)."""
        results = {m: drop(state["grid"], state["piece"], *m)[1] for m in self.moves(state)}
        best = max(results.values())
        return best, [m for m, v in results.items() if v == best]

    def _piece_text(self, state) -> str:
        cells = shape(state["piece"], state["rotation"])
        h, w = max(r for r, _ in cells) + 1, max(c for _, c in cells) + 1
        return "\n".join("".join("X" if (r, c) in cells else "." for c in range(w)) for r in range(h))

    def text(self, state: dict[str, Any]) -> str:
        return (
            "\n".join(state["grid"])
            + f"\nFalling piece ({state['piece']}), as it will land ('X' its cells):\n{self._piece_text(state)}"
            + f"\nIt falls in column {state['col']}."
        )

    def draw(self, state: dict[str, Any]):
        g = state["grid"]
        cells = {(r, state["col"] + c) for r, c in shape(state["piece"], state["rotation"])}
        return draw_grid(
            len(g) + 2, len(g[0]),
            lambda r, c: ("piece", "") if r < 2 and (r, c) in cells else
            ("floor", "") if r < 2 else ("filled" if g[r - 2][c] == "#" else "floor", ""),
            f"tetris: {state['piece']} piece above the board",
            ["", ""] + [str(r) for r in range(len(g))],
        )  # fmt: skip

    # ---- task templates ----------------------------------------------------------------------------------
    def _filled(self, state, rng, level) -> Task:
        g = state["grid"]
        r = rng.randrange(len(g) - FILL[level], len(g))
        k = g[r].count("#")
        return Task(
            "StatePerception",
            f"How many blocks are in row {r}?",
            str(k),
            {"kind": "int"},
            f"Row {r} reads {g[r]}: {k} '#'.",
            int_distractors(rng, k),
        )

    def _cleared(self, state, rng, level) -> Task:
        _, cleared, top = drop(state["grid"], state["piece"], state["rotation"], state["col"])
        return Task(
            "StatePrediction",
            "How many rows are cleared when the piece lands?",
            str(cleared),
            {"kind": "int"},
            f"The piece falls in column {state['col']} and comes to rest with its top row at row {top}; "
            f"{cleared} row{'s' * (cleared != 1)} are then full.",
            int_distractors(rng, cleared),
        )

    def _landing(self, state, rng, level) -> Task:
        _, _, top = drop(state["grid"], state["piece"], state["rotation"], state["col"])
        return Task(
            "StatePrediction",
            "In which row does the top of the piece come to rest?",
            str(top),
            {"kind": "int"},
            f"Lowering the piece one row at a time in column {state['col']}, row {top} is the last where all its cells "
            "are empty.",
            int_distractors(rng, top),
        )

    def _max_clear(self, state, rng, level) -> Task:
        best, drops = self.solve(state)
        return Task(
            "StrategyOptimization",
            "If you may turn the piece (any rotation) and choose its column, what is the largest number of rows one "
            "drop can clear?",
            str(best),
            {"kind": "int"},
            f"Trying all {len(self.moves(state))} rotations and columns, at most {best} rows clear, e.g. rotation "
            f"{drops[0][0]} × 90° in column {drops[0][1]}.",
            int_distractors(rng, best),
        )

    templates = (
        Template("filled", "StatePerception", "Blocks in a row.", lambda g, *a: g._filled(*a)),
        Template("cleared", "StatePrediction", "Rows the drop clears.", lambda g, *a: g._cleared(*a)),
        Template("landing", "StatePrediction", "Where the piece rests.", lambda g, *a: g._landing(*a)),
        Template("max_clear", "StrategyOptimization", "Most rows one drop can clear.", lambda g, *a: g._max_clear(*a)),
    )
