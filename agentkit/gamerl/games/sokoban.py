"""Sokoban (strategic planning): push every box onto a target; a box moves when the player walks into it and the
cell behind it is free.

Puzzles are made by playing backwards from the solved position (random pulls), so every one is solvable; the
solver is a breadth-first search over (player, boxes), which gives the fewest moves.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from agentkit.gamerl.games.base import NEIGHBOURS4, Game, Level, Task, Template, fmt_coord, int_distractors
from agentkit.gamerl.render import draw_grid
from agentkit.gamerl.verifiers import DIRECTIONS

ROOM = {"Easy": (5, 1, 0), "Medium": (6, 1, 2), "Hard": (6, 2, 2)}  # interior side, boxes, inner walls
PULLS = {"Easy": 6, "Medium": 10, "Hard": 14}
WALKS = {"Easy": 3, "Medium": 5, "Hard": 7}
DELTA = {d: (dr, dc) for dr, dc, d in NEIGHBOURS4}
Cell = tuple[int, int]


def _key(player: Cell, boxes) -> tuple[Cell, tuple[Cell, ...]]:
    return tuple(player), tuple(sorted(map(tuple, boxes)))


class Sokoban(Game):
    name = "sokoban"
    category = "strategic_planning"
    rules = (
        "Sokoban: '#' is a wall, '.' floor, 'o' a target, 'B' a box, 'X' a box on a target, 'P' the player, 'Y' the "
        "player on a target. The player moves up (U), down (D), left (L) or right (R); walking into a box pushes it "
        "one cell if the cell behind it is floor or a target. The puzzle is solved when every box is on a target. "
        "Cells are (row, column) from 0 at the top left."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        n, n_boxes, n_walls = ROOM[level]
        while True:
            walls = {(r, c) for r in range(n + 2) for c in range(n + 2) if r in (0, n + 1) or c in (0, n + 1)}
            inner = [(r, c) for r in range(1, n + 1) for c in range(1, n + 1)]
            walls |= set(rng.sample(inner, n_walls))
            free = [c for c in inner if c not in walls]
            targets = rng.sample(free, n_boxes)
            player = rng.choice([c for c in free if c not in targets])
            boxes = list(targets)
            for _ in range(PULLS[level] * 3):  # random walk with pulls, backwards from the solved position
                dr, dc = rng.choice(NEIGHBOURS4)[:2]
                nxt = (player[0] + dr, player[1] + dc)
                if nxt in walls or nxt in boxes:
                    continue
                behind = (player[0] - dr, player[1] - dc)
                if behind in boxes and rng.random() < 0.7:
                    boxes[boxes.index(behind)] = player
                player = nxt
            state = {
                "size": n + 2,
                "walls": sorted(map(list, walls)),
                "targets": sorted(map(list, targets)),
                "boxes": sorted(map(list, boxes)),
                "player": list(player),
            }
            if not self.solved(state) and len(self.solve(state)) >= 2:
                return state

    def solved(self, state) -> bool:
        return sorted(map(tuple, state["boxes"])) == sorted(map(tuple, state["targets"]))

    def moves(self, state: dict[str, Any]) -> list[str]:
        walls, boxes = set(map(tuple, state["walls"])), set(map(tuple, state["boxes"]))
        r, c = state["player"]
        out = []
        for dr, dc, d in NEIGHBOURS4:
            nxt = (r + dr, c + dc)
            if nxt in walls:
                continue
            if nxt in boxes and ((r + 2 * dr, c + 2 * dc) in walls or (r + 2 * dr, c + 2 * dc) in boxes):
                continue
            out.append(d)
        return out

    def step(self, state: dict[str, Any], move: str) -> dict[str, Any]:
        if move not in self.moves(state):
            raise ValueError(f"illegal move {move!r}")
        dr, dc = DELTA[move]
        r, c = state["player"]
        nxt = [r + dr, c + dc]
        boxes = [[r + 2 * dr, c + 2 * dc] if b == nxt else b for b in state["boxes"]]
        return {**state, "player": nxt, "boxes": sorted(boxes)}

    def solve(self, state: dict[str, Any]) -> list[str]:
        """A solution in the fewest moves (breadth-first over player and box positions)."""
        walls, targets = set(map(tuple, state["walls"])), tuple(sorted(map(tuple, state["targets"])))
        start = _key(state["player"], state["boxes"])
        parent: dict[Any, Any] = {start: None}
        queue = deque([start])
        while queue:
            key = queue.popleft()
            (r, c), boxes = key
            if boxes == targets:
                path = []
                while parent[key] is not None:
                    key, move = parent[key]
                    path.append(move)
                return path[::-1]
            for dr, dc, d in NEIGHBOURS4:
                nxt = (r + dr, c + dc)
                if nxt in walls:
                    continue
                nb = boxes
                if nxt in boxes:
                    pushed = (r + 2 * dr, c + 2 * dc)
                    if pushed in walls or pushed in boxes:
                        continue
                    nb = tuple(sorted(pushed if b == nxt else b for b in boxes))
                k2 = (nxt, nb)
                if k2 not in parent:
                    parent[k2] = (key, d)
                    queue.append(k2)
        raise ValueError("unsolvable")

    def _chars(self, state) -> list[list[str]]:
        n = state["size"]
        g = [["."] * n for _ in range(n)]
        for r, c in state["walls"]:
            g[r][c] = "#"
        for r, c in state["targets"]:
            g[r][c] = "o"
        for r, c in state["boxes"]:
            g[r][c] = "X" if g[r][c] == "o" else "B"
        r, c = state["player"]
        g[r][c] = "Y" if g[r][c] == "o" else "P"
        return g

    def text(self, state: dict[str, Any]) -> str:
        return "\n".join("".join(row) for row in self._chars(state))

    def draw(self, state: dict[str, Any]):
        g = self._chars(state)
        palette = {
            "#": ("wall", ""), ".": ("floor", ""), "o": ("target", "o"), "B": ("box", "B"),
            "X": ("box", "X"), "P": ("player", "P"), "Y": ("player", "Y"),
        }  # fmt: skip
        return draw_grid(len(g), len(g), lambda r, c: palette[g[r][c]], "sokoban")

    def check(self, entry: dict[str, Any], parsed: Any) -> bool:
        """A legal move sequence that solves the puzzle in the fewest moves."""
        state = entry["metadata"]["state"]
        end = self.replay(state, parsed)
        return end is not None and self.solved(end) and len(parsed) == len(self.solution(state))

    # ---- task templates ----------------------------------------------------------------------------------
    def _boxes(self, state, rng, level) -> Task:
        boxes = sorted(map(tuple, state["boxes"]))
        return Task(
            "StatePerception",
            "List the cells (row, column) of all boxes.",
            ", ".join(map(fmt_coord, boxes)),
            {"kind": "coords"},
            "Scanning the rows for 'B' and 'X': boxes at " + ", ".join(map(fmt_coord, boxes)) + ".",
        )

    def _after_moves(self, state, rng, level) -> Task:
        cur, moves, trace = state, [], []
        for _ in range(WALKS[level]):
            move = rng.choice(self.moves(cur))
            pushed = cur["boxes"] != self.step(cur, move)["boxes"]
            cur = self.step(cur, move)
            moves.append(move)
            trace.append(f"{move}: player {fmt_coord(cur['player'])}" + (" pushing a box" if pushed else ""))
        boxes = sorted(map(tuple, cur["boxes"]))
        return Task(
            "StatePrediction",
            f"The player makes the moves {' '.join(moves)}. Where are the boxes afterwards? List their cells.",
            ", ".join(map(fmt_coord, boxes)),
            {"kind": "coords"},
            "; ".join(trace) + ". Boxes end at " + ", ".join(map(fmt_coord, boxes)) + ".",
        )

    def _min_moves(self, state, rng, level) -> Task:
        path = self.solve(state)
        return Task(
            "StrategyOptimization",
            "What is the fewest number of moves (steps and pushes together) that solves the puzzle?",
            str(len(path)),
            {"kind": "int"},
            f"Breadth-first search over player and box positions first solves it after {len(path)} moves: "
            f"{' '.join(path)}.",
            int_distractors(rng, len(path), low=1),
        )

    def _solution(self, state, rng, level) -> Task:
        path = self.solve(state)
        return Task(
            "StrategyOptimization",
            "Give a shortest move sequence that solves the puzzle, as letters U, D, L, R separated by spaces.",
            " ".join(path),
            {"kind": "sequence", "aliases": DIRECTIONS, "check": True},
            f"Breadth-first search over player and box positions: the fewest moves are {len(path)}, e.g. "
            f"{' '.join(path)}.",
        )

    templates = (
        Template("boxes", "StatePerception", "Where the boxes are.", lambda g, *a: g._boxes(*a)),
        Template("after_moves", "StatePrediction", "Box positions after moves.", lambda g, *a: g._after_moves(*a)),
        Template("min_moves", "StrategyOptimization", "Fewest moves to solve.", lambda g, *a: g._min_moves(*a)),
        Template("solution", "StrategyOptimization", "A shortest solution (any).", lambda g, *a: g._solution(*a)),
    )
