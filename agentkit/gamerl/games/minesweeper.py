"""Minesweeper (pattern recognition; held out): a partly opened board of numbers (mines among the 8 neighbours)
and covered cells. Solver: every assignment of mines to the covered cells next to a number that agrees with all
the numbers (backtracking); a cell is certainly a mine (safe) when it is one (is not) in every assignment."""

from __future__ import annotations

import random
from typing import Any

from agentkit.gamerl.games.base import NEIGHBOURS8, Game, Level, Task, Template, fmt_coord, int_distractors
from agentkit.gamerl.render import draw_grid

BOARD = {"Easy": (5, 3), "Medium": (6, 5), "Hard": (8, 10)}  # side, mines
Cell = tuple[int, int]


def _around(n: int, r: int, c: int) -> list[Cell]:
    return [(r + dr, c + dc) for dr, dc in NEIGHBOURS8 if 0 <= r + dr < n and 0 <= c + dc < n]


def count(n: int, mines: set[Cell], r: int, c: int) -> int:
    return sum(x in mines for x in _around(n, r, c))


def deduce(n: int, numbers: dict[Cell, int], covered: set[Cell]) -> tuple[set[Cell], set[Cell]]:
    """(certain mines, certain safe cells) among the covered cells next to a number."""
    frontier = sorted({x for (r, c) in numbers for x in _around(n, r, c) if x in covered})
    index = {x: i for i, x in enumerate(frontier)}
    checks = [([index[x] for x in _around(n, r, c) if x in index], k) for (r, c), k in numbers.items()]
    by_cell: list[list[int]] = [[] for _ in frontier]
    for j, (cells, _) in enumerate(checks):
        for i in cells:
            by_cell[i].append(j)
    value = [0] * len(frontier)
    mine_always, safe_always = [True] * len(frontier), [True] * len(frontier)
    placed, left = [0] * len(checks), [len(cells) for cells, _ in checks]

    def rec(i: int) -> None:
        if i == len(frontier):
            for j in range(len(frontier)):
                mine_always[j] &= value[j] == 1
                safe_always[j] &= value[j] == 0
            return
        for v in (0, 1):
            ok = True
            for j in by_cell[i]:
                placed[j] += v
                left[j] -= 1
                k = checks[j][1]
                if placed[j] > k or placed[j] + left[j] < k:
                    ok = False
            if ok:
                value[i] = v
                rec(i + 1)
            for j in by_cell[i]:
                placed[j] -= v
                left[j] += 1

    rec(0)
    return {x for x, m in zip(frontier, mine_always) if m}, {x for x, s in zip(frontier, safe_always) if s}


class Minesweeper(Game):
    name = "minesweeper"
    category = "pattern_recognition"
    rules = (
        "Minesweeper: '?' is a covered cell, a digit is an opened cell showing how many of its 8 neighbours hold a "
        "mine ('0' none). Opened cells never hold a mine. Cells are (row, column) from 0 at the top left."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        n, k = BOARD[level]
        while True:
            cells = [(r, c) for r in range(n) for c in range(n)]
            mines = set(rng.sample(cells, k))
            zeros = [x for x in cells if x not in mines and count(n, mines, *x) == 0]
            if not zeros:
                continue
            opened, todo = set(), [rng.choice(zeros)]
            while todo:  # the flood fill of a click on a zero
                x = todo.pop()
                if x in opened:
                    continue
                opened.add(x)
                if count(n, mines, *x) == 0:
                    todo += [y for y in _around(n, *x) if y not in opened]
            if len(opened) < n * n - k:
                state = {"size": n, "mines": sorted(map(list, mines)), "opened": sorted(map(list, opened))}
                if any(self.solve(state)):
                    return state

    def _numbers(self, state) -> tuple[dict[Cell, int], set[Cell]]:
        n, mines = state["size"], set(map(tuple, state["mines"]))
        opened = set(map(tuple, state["opened"]))
        numbers = {x: count(n, mines, *x) for x in opened}
        covered = {(r, c) for r in range(n) for c in range(n)} - opened
        return numbers, covered

    def moves(self, state: dict[str, Any]) -> list[Cell]:
        return sorted(self._numbers(state)[1])  # open a covered cell

    def step(self, state: dict[str, Any], move) -> dict[str, Any]:
        if tuple(move) not in self.moves(state):
            raise ValueError(f"illegal move {move!r}")
        return {**state, "opened": sorted([*state["opened"], list(move)])}

    def solve(self, state: dict[str, Any]) -> tuple[set[Cell], set[Cell]]:
        """(certain mines, certain safe cells) from the numbers shown."""
        numbers, covered = self._numbers(state)
        return deduce(state["size"], numbers, covered)

    def text(self, state: dict[str, Any]) -> str:
        numbers, _ = self._numbers(state)
        n = state["size"]
        return "\n".join(
            "".join(str(numbers[(r, c)]) if (r, c) in numbers else "?" for c in range(n)) for r in range(n)
        )

    def draw(self, state: dict[str, Any]):
        numbers, _ = self._numbers(state)
        n = state["size"]
        return draw_grid(
            n,
            n,
            lambda r, c: ("revealed", str(numbers[(r, c)] or "")) if (r, c) in numbers else ("covered", ""),
            "minesweeper",
        )

    # ---- task templates ----------------------------------------------------------------------------------
    def _covered(self, state, rng, level) -> Task:
        k = len(self._numbers(state)[1])
        return Task(
            "StatePerception",
            "How many cells are still covered?",
            str(k),
            {"kind": "int"},
            f"Counting the '?' cells row by row gives {k}.",
            int_distractors(rng, k, low=1),
        )

    def _certain_mines(self, state, rng, level) -> Task:
        mines, _ = self.solve(state)
        return Task(
            "StrategyOptimization",
            "List every covered cell that must hold a mine, given the numbers shown ('none' if there is none).",
            ", ".join(map(fmt_coord, sorted(mines))) or "none",
            {"kind": "coords"},
            "Enumerating every placement of mines around the numbers that agrees with all of them, these cells hold a "
            "mine in each: " + (", ".join(map(fmt_coord, sorted(mines))) or "none") + ".",
        )

    def _certain_safe(self, state, rng, level) -> Task:
        _, safe = self.solve(state)
        return Task(
            "StrategyOptimization",
            "List every covered cell next to a number that is certainly safe to open ('none' if there is none).",
            ", ".join(map(fmt_coord, sorted(safe))) or "none",
            {"kind": "coords"},
            "Enumerating every placement of mines around the numbers that agrees with all of them, these cells hold no "
            "mine in any: " + (", ".join(map(fmt_coord, sorted(safe))) or "none") + ".",
        )

    templates = (
        Template("covered", "StatePerception", "Covered cells.", lambda g, *a: g._covered(*a)),
        Template(
            "certain_mines", "StrategyOptimization", "Cells that must be mines.", lambda g, *a: g._certain_mines(*a)
        ),
        Template("certain_safe", "StrategyOptimization", "Cells that must be safe.", lambda g, *a: g._certain_safe(*a)),
    )
