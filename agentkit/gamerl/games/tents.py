"""Tents (strategic planning; held out): place one tent next to (not diagonally) each tree, tents never touching
each other, not even diagonally, with the tents per row and column as given. Generated from a random valid
placement and kept only when the solver finds no other tent set, so the solution is unique. Solver: backtracking
over trees in order, each given a free neighbouring cell, pruned by the row and column counts."""

from __future__ import annotations

import random
from typing import Any

from agentkit.gamerl.games.base import NEIGHBOURS4, NEIGHBOURS8, Game, Level, Task, Template, fmt_coord, int_distractors
from agentkit.gamerl.render import draw_grid

BOARD = {"Easy": (5, 3), "Medium": (6, 5), "Hard": (7, 7)}  # side, trees
Cell = tuple[int, int]


def solutions(n: int, trees: list[Cell], rows: list[int], cols: list[int], limit: int = 2) -> list[frozenset[Cell]]:
    """Distinct tent sets (up to ``limit``) satisfying every rule."""
    tree_set, found = set(trees), []
    tents: list[Cell] = []
    row_n, col_n = [0] * n, [0] * n

    def free(cell: Cell) -> bool:
        r, c = cell
        if not (0 <= r < n and 0 <= c < n) or cell in tree_set or cell in tents:
            return False
        if row_n[r] >= rows[r] or col_n[c] >= cols[c]:
            return False
        return all((r + dr, c + dc) not in tents for dr, dc in NEIGHBOURS8)

    def rec(i: int) -> None:
        if len(found) >= limit:
            return
        if i == len(trees):
            if row_n == rows and col_n == cols and frozenset(tents) not in found:
                found.append(frozenset(tents))
            return
        r, c = trees[i]
        for dr, dc, _ in NEIGHBOURS4:
            cell = (r + dr, c + dc)
            if free(cell):
                tents.append(cell)
                row_n[cell[0]] += 1
                col_n[cell[1]] += 1
                rec(i + 1)
                tents.pop()
                row_n[cell[0]] -= 1
                col_n[cell[1]] -= 1

    rec(0)
    return found


class Tents(Game):
    name = "tents"
    category = "strategic_planning"
    rules = (
        "Tents: 'T' is a tree, '.' an empty cell. Place exactly one tent in a cell next to each tree (up, down, left "
        "or right of it, on an empty cell); tents never touch each other, not even diagonally; the numbers give how "
        "many tents each row and each column holds. Cells are (row, column) from 0 at the top left."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        n, k = BOARD[level]
        while True:
            trees, tents = [], []
            cells = [(r, c) for r in range(n) for c in range(n)]
            rng.shuffle(cells)
            for tree in cells:
                if len(trees) == k:
                    break
                if tree in tents or tree in trees:
                    continue
                spots = [(tree[0] + dr, tree[1] + dc) for dr, dc, _ in NEIGHBOURS4]
                spots = [
                    s for s in spots
                    if 0 <= s[0] < n and 0 <= s[1] < n and s not in trees
                    and all((s[0] + dr, s[1] + dc) not in tents for dr, dc in NEIGHBOURS8) and s not in tents
                ]  # fmt: skip
                if spots:
                    trees.append(tree)
                    tents.append(rng.choice(spots))
            if len(trees) < k:
                continue
            rows = [sum(t[0] == r for t in tents) for r in range(n)]
            cols = [sum(t[1] == c for t in tents) for c in range(n)]
            trees.sort()
            if len(solutions(n, trees, rows, cols)) == 1:
                return {"size": n, "trees": [list(t) for t in trees], "rows": rows, "cols": cols}

    def moves(self, state: dict[str, Any]) -> list[Cell]:
        trees, placed = set(map(tuple, state["trees"])), set(map(tuple, state.get("tents", [])))
        n = state["size"]
        return [(r, c) for r in range(n) for c in range(n) if (r, c) not in trees and (r, c) not in placed]

    def step(self, state: dict[str, Any], move) -> dict[str, Any]:
        if tuple(move) not in self.moves(state):
            raise ValueError(f"cannot place a tent at {move!r}")
        return {**state, "tents": sorted([*state.get("tents", []), list(move)])}

    def solve(self, state: dict[str, Any]) -> frozenset[Cell]:
        """The unique tent set."""
        found = solutions(state["size"], [tuple(t) for t in state["trees"]], state["rows"], state["cols"])
        if len(found) != 1:
            raise ValueError(f"the puzzle has {len(found)} solutions")
        return found[0]

    def text(self, state: dict[str, Any]) -> str:
        n, trees = state["size"], set(map(tuple, state["trees"]))
        lines = [
            " ".join("T" if (r, c) in trees else "." for c in range(n)) + f"  {state['rows'][r]}" for r in range(n)
        ]
        return (
            "\n".join(lines + [" ".join(map(str, state["cols"]))])
            + "\n(numbers: tents per row, at the right, and per column, below)"
        )

    def draw(self, state: dict[str, Any]):
        trees = set(map(tuple, state["trees"]))
        tents = set(map(tuple, state.get("tents", [])))
        n = state["size"]
        return draw_grid(
            n,
            n,
            lambda r, c: ("tree", "T") if (r, c) in trees else ("tent", "^") if (r, c) in tents else ("floor", ""),
            f"tents  rows {state['rows']}  columns {state['cols']}",
        )

    # ---- task templates ----------------------------------------------------------------------------------
    def _trees(self, state, rng, level) -> Task:
        k = len(state["trees"])
        return Task(
            "StatePerception",
            "How many trees are on the board?",
            str(k),
            {"kind": "int"},
            "Trees at " + ", ".join(map(fmt_coord, state["trees"])) + f": {k}.",
            int_distractors(rng, k, low=1),
        )

    def _solution(self, state, rng, level) -> Task:
        tents = sorted(self.solve(state))
        return Task(
            "StrategyOptimization",
            "List the cells (row, column) of all tents in the solution.",
            ", ".join(map(fmt_coord, tents)),
            {"kind": "coords"},
            "Giving each tree in turn a free neighbouring cell, backing up whenever a row or column count is exceeded "
            "or two tents touch, leaves exactly one placement: " + ", ".join(map(fmt_coord, tents)) + ".",
        )

    def _tent_of(self, state, rng, level) -> Task:
        tents = self.solve(state)
        tree = tuple(rng.choice(state["trees"]))
        near = sorted(t for t in tents if abs(t[0] - tree[0]) + abs(t[1] - tree[1]) == 1)
        k = len(near)
        return Task(
            "StatePrediction",
            f"In the solution, how many tents are directly next to (up, down, left or right of) the tree at "
            f"{fmt_coord(tree)}?",
            str(k),
            {"kind": "int"},
            "The solution's tents are "
            + ", ".join(map(fmt_coord, sorted(tents)))
            + f"; next to {fmt_coord(tree)}: "
            + (", ".join(map(fmt_coord, near)) or "none")
            + ".",
            int_distractors(rng, k),
        )

    templates = (
        Template("trees", "StatePerception", "Trees on the board.", lambda g, *a: g._trees(*a)),
        Template("tent_of", "StatePrediction", "Tents next to a tree.", lambda g, *a: g._tent_of(*a)),
        Template("solution", "StrategyOptimization", "The unique tent placement.", lambda g, *a: g._solution(*a)),
    )
