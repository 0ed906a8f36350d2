"""Sudoku (strategic planning; held out): 4×4 (Easy), 6×6 (Medium) or 9×9 (Hard). Puzzles are dug out of a
random full grid one clue at a time, keeping only removals after which the solver still finds exactly one
solution, so the solution task has one answer (reasoning-gym scores sudokus with several solutions against one).
Solver: backtracking on the cell with the fewest candidates, counting solutions up to two."""

from __future__ import annotations

import random
from typing import Any

from agentkit.gamerl.games.base import Game, Level, Task, Template, fmt_grid, int_distractors
from agentkit.gamerl.render import draw_grid

SHAPE = {"Easy": (2, 2), "Medium": (2, 3), "Hard": (3, 3)}  # box rows × box columns
HOLES = {"Easy": 8, "Medium": 18, "Hard": 45}  # cells to empty at most


def _box(n: int, br: int, bc: int, r: int, c: int) -> int:
    return (r // br) * (n // bc) + c // bc


def candidates(grid: list[list[int]], br: int, bc: int, r: int, c: int) -> set[int]:
    n = len(grid)
    used = set(grid[r]) | {grid[i][c] for i in range(n)}
    r0, c0 = r - r % br, c - c % bc
    used |= {grid[i][j] for i in range(r0, r0 + br) for j in range(c0, c0 + bc)}
    return set(range(1, n + 1)) - used


def count_solutions(grid: list[list[int]], br: int, bc: int, limit: int = 2, rng=None) -> tuple[int, list]:
    """(number of solutions up to ``limit``, the first found); ``rng`` shuffles the value order (generation)."""
    grid = [row[:] for row in grid]
    found: list = []

    def rec() -> int:
        best, best_cands = None, None
        for r, row in enumerate(grid):
            for c, v in enumerate(row):
                if v == 0:
                    cands = candidates(grid, br, bc, r, c)
                    if best_cands is None or len(cands) < len(best_cands):
                        best, best_cands = (r, c), cands
                        if len(cands) <= 1:
                            break
            if best_cands is not None and len(best_cands) <= 1:
                break
        if best is None:
            if not found:
                found.append([row[:] for row in grid])
            return 1
        order = sorted(best_cands)
        if rng is not None:
            rng.shuffle(order)
        total = 0
        for v in order:
            grid[best[0]][best[1]] = v
            total += rec()
            grid[best[0]][best[1]] = 0
            if total >= limit:
                break
        return total

    return rec(), (found[0] if found else None)


class Sudoku(Game):
    name = "sudoku"
    category = "strategic_planning"
    rules = (
        "Sudoku: fill the empty cells ('.') so that every row, every column and every box (the blocks marked by "
        "the separators) contains each digit from 1 to the board size exactly once. Cells are (row, column) from 0 "
        "at the top left."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        br, bc = SHAPE[level]
        n = br * bc
        _, full = count_solutions([[0] * n for _ in range(n)], br, bc, limit=1, rng=rng)
        grid = [row[:] for row in full]
        cells = [(r, c) for r in range(n) for c in range(n)]
        rng.shuffle(cells)
        holes = 0
        for r, c in cells:
            if holes >= HOLES[level]:
                break
            keep, grid[r][c] = grid[r][c], 0
            if count_solutions(grid, br, bc)[0] != 1:
                grid[r][c] = keep
            else:
                holes += 1
        return {"grid": grid, "box": [br, bc]}

    def moves(self, state: dict[str, Any]) -> list[tuple[int, int, int]]:
        g, (br, bc) = state["grid"], state["box"]
        return [
            (r, c, v)
            for r, row in enumerate(g)
            for c, x in enumerate(row)
            if not x
            for v in candidates(g, br, bc, r, c)
        ]

    def step(self, state: dict[str, Any], move) -> dict[str, Any]:
        r, c, v = move
        if tuple(move) not in self.moves(state):
            raise ValueError(f"illegal move {move!r}")
        grid = [row[:] for row in state["grid"]]
        grid[r][c] = v
        return {**state, "grid": grid}

    def solve(self, state: dict[str, Any]) -> list[list[int]]:
        """The unique completed grid."""
        count, sol = count_solutions(state["grid"], *state["box"])
        if count != 1:
            raise ValueError(f"the puzzle has {count} solutions")
        return sol

    def text(self, state: dict[str, Any]) -> str:
        g, (br, bc) = state["grid"], state["box"]
        lines = []
        for r, row in enumerate(g):
            if r and r % br == 0:
                lines.append("-" * (2 * len(row) + 2 * (len(row) // bc - 1) - 1))
            cells = [str(x or ".") + (" |" if c % bc == bc - 1 and c < len(row) - 1 else "") for c, x in enumerate(row)]
            lines.append(" ".join(cells))
        return "\n".join(lines)

    def draw(self, state: dict[str, Any]):
        g, (br, bc) = state["grid"], state["box"]
        shade = lambda r, c: "highlight" if (_box(len(g), br, bc, r, c)) % 2 else "floor"  # noqa: E731
        return draw_grid(len(g), len(g), lambda r, c: (shade(r, c), str(g[r][c] or "")), "sudoku")

    # ---- task templates ----------------------------------------------------------------------------------
    def _empty(self, state, rng):
        return rng.choice([(r, c) for r, row in enumerate(state["grid"]) for c, x in enumerate(row) if not x])

    def _candidates(self, state, rng, level) -> Task:
        r, c = self._empty(state, rng)
        g, (br, bc) = state["grid"], state["box"]
        cands = sorted(candidates(g, br, bc, r, c))
        return Task(
            "StatePerception",
            f"Which digits could go in cell ({r}, {c}) without repeating one already in its row, column or box?",
            ", ".join(map(str, cands)),
            {"kind": "set"},
            f"Row {r} has {sorted(x for x in g[r] if x)}, column {c} has {sorted(g[i][c] for i in range(len(g)) if g[i][c])}"
            f" and its box the rest; the digits left are {cands}.",
        )

    def _cell_value(self, state, rng, level) -> Task:
        r, c = self._empty(state, rng)
        v = self.solve(state)[r][c]
        return Task(
            "StatePrediction",
            f"In the solved grid, which digit is in cell ({r}, {c})?",
            str(v),
            {"kind": "int"},
            f"Solving the puzzle (it has exactly one solution) puts {v} at ({r}, {c}).",
            int_distractors(rng, v, low=1),
        )

    def _solution(self, state, rng, level) -> Task:
        sol = self.solve(state)
        n = len(sol)
        return Task(
            "StrategyOptimization",
            "Give the solved grid: one row per line, digits separated by spaces.",
            fmt_grid(sol),
            {"kind": "grid", "rows": n, "cols": n},
            "Filling the cell with the fewest candidates first, and backtracking when one has none, gives the only "
            "solution:\n" + fmt_grid(sol),
        )

    templates = (
        Template("candidates", "StatePerception", "Digits allowed in a cell.", lambda g, *a: g._candidates(*a)),
        Template("cell_value", "StatePrediction", "A cell of the solution.", lambda g, *a: g._cell_value(*a)),
        Template("solution", "StrategyOptimization", "The whole solution.", lambda g, *a: g._solution(*a)),
    )
