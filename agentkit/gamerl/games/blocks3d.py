"""3D block structure (3D spatial): stacks of unit cubes on a grid, given as a height map (GameQA's 3D
reconstruction, in text). Questions ask for views and counts that need the third dimension: cubes in total, the
squares seen from the front or the side, the exposed surface. The PNG draws the structure in isometric projection.
Moves add or remove a cube on a stack; the solver computes every view."""

from __future__ import annotations

import random
from typing import Any

from agentkit.gamerl.games.base import Game, Level, Task, Template, fmt_grid, int_distractors

SIZE = {"Easy": 3, "Medium": 4, "Hard": 5}
MAX_H = {"Easy": 2, "Medium": 3, "Hard": 4}


def views(h: list[list[int]]) -> dict[str, Any]:
    """Cubes, front view (column maxima, seen from row n-1 looking at row 0), side view (row maxima, seen from the
    right), top view (stacks present) and exposed surface (every face not touching another cube or the ground
    counts, the bottom faces do not)."""
    n = len(h)
    front = [max(h[r][c] for r in range(n)) for c in range(n)]
    side = [max(row) for row in h]
    surface = 0
    for r in range(n):
        for c in range(n):
            if h[r][c]:
                surface += 1  # top
                for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                    nb = h[r + dr][c + dc] if 0 <= r + dr < n and 0 <= c + dc < n else 0
                    surface += max(0, h[r][c] - nb)
    return {
        "cubes": sum(map(sum, h)),
        "front": front,
        "side": side,
        "top": sum(x > 0 for row in h for x in row),
        "surface": surface,
    }


class Blocks3D(Game):
    name = "blocks3d"
    category = "3d_spatial"
    rules = (
        "A structure of unit cubes stands on a square grid. The grid of numbers is the view from above: the number in "
        "row r, column c is how many cubes are stacked on that square (0: none). Row 0 is at the back, the last row "
        "at the front; column 0 is on the left."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        n = SIZE[level]
        while True:
            h = [[rng.choice(range(MAX_H[level] + 1)) for _ in range(n)] for _ in range(n)]
            if sum(map(sum, h)) >= n:
                return {"heights": h}

    def moves(self, state: dict[str, Any]) -> list[tuple[str, int, int]]:
        h = state["heights"]
        n = len(h)
        return [("add", r, c) for r in range(n) for c in range(n)] + [
            ("remove", r, c) for r in range(n) for c in range(n) if h[r][c]
        ]

    def step(self, state: dict[str, Any], move) -> dict[str, Any]:
        op, r, c = move
        if tuple(move) not in self.moves(state):
            raise ValueError(f"illegal move {move!r}")
        h = [row[:] for row in state["heights"]]
        h[r][c] += 1 if op == "add" else -1
        return {"heights": h}

    def solve(self, state: dict[str, Any]) -> dict[str, Any]:
        return views(state["heights"])

    def text(self, state: dict[str, Any]) -> str:
        return fmt_grid(state["heights"])

    def draw(self, state: dict[str, Any]):
        """Isometric cubes, painted back to front and bottom to top."""
        from PIL import Image, ImageDraw

        h = state["heights"]
        n, s = len(h), 22
        w = (2 * n + 2) * s
        img = Image.new("RGB", (w, w + (max(map(max, h)) + 1) * s), "white")
        d = ImageDraw.Draw(img)
        ox, oy = w // 2, (max(map(max, h)) + 1) * s

        def iso(x, y, z):
            return ox + (x - y) * s, oy + (x + y) * s // 2 - z * s

        for r in range(n):
            for c in range(n):
                for z in range(h[r][c]):
                    x, y = c, r
                    top = [iso(x, y, z + 1), iso(x + 1, y, z + 1), iso(x + 1, y + 1, z + 1), iso(x, y + 1, z + 1)]
                    left = [iso(x, y + 1, z + 1), iso(x + 1, y + 1, z + 1), iso(x + 1, y + 1, z), iso(x, y + 1, z)]
                    right = [iso(x + 1, y, z + 1), iso(x + 1, y + 1, z + 1), iso(x + 1, y + 1, z), iso(x + 1, y, z)]
                    for face, fill in ((left, (120, 150, 210)), (right, (90, 110, 170)), (top, (190, 210, 245))):
                        d.polygon(face, fill=fill, outline=(40, 40, 60))
        return img

    # ---- task templates ----------------------------------------------------------------------------------
    def _cubes(self, state, rng, level) -> Task:
        h, k = state["heights"], views(state["heights"])["cubes"]
        return Task(
            "StatePerception",
            "How many cubes does the structure have?",
            str(k),
            {"kind": "int"},
            "Row sums " + " + ".join(str(sum(row)) for row in h) + f" = {k}.",
            int_distractors(rng, k, low=1),
        )

    def _front(self, state, rng, level) -> Task:
        v = views(state["heights"])
        k = sum(v["front"])
        return Task(
            "StatePrediction",
            "Looking at the structure from the front, how many unit squares does its silhouette cover?",
            str(k),
            {"kind": "int"},
            f"From the front each column shows its tallest stack: {v['front']}, together {k}.",
            int_distractors(rng, k, low=1),
        )

    def _side(self, state, rng, level) -> Task:
        v = views(state["heights"])
        k = sum(v["side"])
        return Task(
            "StatePrediction",
            "Looking at the structure from the right side, how many unit squares does its silhouette cover?",
            str(k),
            {"kind": "int"},
            f"From the side each row shows its tallest stack: {v['side']}, together {k}.",
            int_distractors(rng, k, low=1),
        )

    def _surface(self, state, rng, level) -> Task:
        k = views(state["heights"])["surface"]
        return Task(
            "StrategyOptimization",
            "How many unit faces of the cubes are exposed to the air (not touching another cube or the ground)?",
            str(k),
            {"kind": "int"},
            f"Each stack shows its top, plus on each of its four sides the height it rises above its neighbour: {k}.",
            int_distractors(rng, k, low=1),
        )

    templates = (
        Template("cubes", "StatePerception", "Cubes in the structure.", lambda g, *a: g._cubes(*a)),
        Template("front", "StatePrediction", "Squares of the front view.", lambda g, *a: g._front(*a)),
        Template("side", "StatePrediction", "Squares of the side view.", lambda g, *a: g._side(*a)),
        Template("surface", "StrategyOptimization", "Exposed faces.", lambda g, *a: g._surface(*a)),
    )
