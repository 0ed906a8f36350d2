"""2048 (multi-step reasoning; held out): slide every tile up, down, left or right; two equal tiles that meet
merge once per move into their sum, which is the move's score. No new tile appears in these questions, so a move
sequence is deterministic. Solver: the best single move and its score."""

from __future__ import annotations

import random
from typing import Any

from agentkit.gamerl.games.base import Game, Level, Task, Template, fmt_grid, int_distractors
from agentkit.gamerl.render import draw_grid

SIZE = {"Easy": 3, "Medium": 4, "Hard": 4}
TILES = {"Easy": 4, "Medium": 7, "Hard": 10}
SEQUENCE = {"Easy": 1, "Medium": 2, "Hard": 3}
WORD = {"U": "up", "D": "down", "L": "left", "R": "right"}


def slide_row(row: list[int]) -> tuple[list[int], int]:
    """A row slid to the left: (new row, score)."""
    tiles, out, score, i = [x for x in row if x], [], 0, 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(tiles[i] * 2)
            score += tiles[i] * 2
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return out + [0] * (len(row) - len(out)), score


def slide(board: list[list[int]], move: str) -> tuple[list[list[int]], int]:
    """(board after ``move``, score)."""
    n = len(board)
    if move in ("L", "R"):
        lines = [row[:] if move == "L" else row[::-1] for row in board]
    else:
        cols = [[board[r][c] for r in range(n)] for c in range(n)]
        lines = [col if move == "U" else col[::-1] for col in cols]
    moved, score = [], 0
    for line in lines:
        new, s = slide_row(line)
        moved.append(new if move in ("L", "U") else new[::-1])
        score += s
    if move in ("U", "D"):
        moved = [[moved[c][r] for c in range(n)] for r in range(n)]
    return moved, score


class Game2048(Game):
    name = "g2048"
    category = "multi_step_reasoning"
    rules = (
        "2048: numbers are tiles, 0 an empty cell. A move (up, down, left, right) slides every tile as far as it "
        "goes that way; two equal tiles that collide merge into one tile of their sum (a tile merges at most once per "
        "move, tiles nearest the wall merge first), and each merge scores the new tile's value. In these questions no "
        "new tile appears after a move."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        n = SIZE[level]
        while True:
            board = [[0] * n for _ in range(n)]
            for r, c in rng.sample([(r, c) for r in range(n) for c in range(n)], TILES[level]):
                board[r][c] = rng.choice((2, 2, 2, 4, 4, 8, 16))
            state = {"board": board, "sequence": [rng.choice("UDLR") for _ in range(SEQUENCE[level])]}
            if self.moves(state) and self.solve(state)[0] > 0:
                return state

    def moves(self, state: dict[str, Any]) -> list[str]:
        return [m for m in "UDLR" if slide(state["board"], m)[0] != state["board"]]

    def step(self, state: dict[str, Any], move: str) -> dict[str, Any]:
        if move not in "UDLR":
            raise ValueError(f"illegal move {move!r}")
        return {**state, "board": slide(state["board"], move)[0]}

    def solve(self, state: dict[str, Any]) -> tuple[int, list[str]]:
        """(best score of one move, the moves that reach it)."""
        scores = {m: slide(state["board"], m)[1] for m in self.moves(state)}
        best = max(scores.values(), default=0)
        return best, [m for m, s in scores.items() if s == best]

    def text(self, state: dict[str, Any]) -> str:
        return fmt_grid(state["board"])

    def draw(self, state: dict[str, Any]):
        b = state["board"]
        shade = lambda v: (250, 250 - min(200, 20 * v.bit_length()), 200 - min(180, 15 * v.bit_length()))  # noqa: E731
        return draw_grid(len(b), len(b), lambda r, c: (shade(b[r][c]), str(b[r][c] or "")), "2048")

    def check(self, entry: dict[str, Any], parsed: Any) -> bool:
        """Any move that scores the most."""
        options = entry["metadata"]["verify"]["options"]
        if parsed is None:
            return False
        move = {v: k for k, v in WORD.items()}[options["ABCD".index(parsed)]]
        return move in self.solution(entry["metadata"]["state"])[1]

    def _run(self, state) -> tuple[list[list[int]], int, str]:
        board, total, trace = state["board"], 0, []
        for m in state["sequence"]:
            board, s = slide(board, m)
            total += s
            trace.append(f"{WORD[m]} scores {s}: " + " / ".join(" ".join(map(str, row)) for row in board))
        return board, total, "; ".join(trace)

    # ---- task templates ----------------------------------------------------------------------------------
    def _after(self, state, rng, level) -> Task:
        board, _, trace = self._run(state)
        n = len(board)
        moves = ", ".join(WORD[m] for m in state["sequence"])
        return Task(
            "StatePrediction",
            f"Give the board after the moves {moves}, in the same notation (one row per line).",
            fmt_grid(board),
            {"kind": "grid", "rows": n, "cols": n},
            trace + ".",
        )

    def _score(self, state, rng, level) -> Task:
        _, total, trace = self._run(state)
        moves = ", ".join(WORD[m] for m in state["sequence"])
        return Task(
            "StatePrediction",
            f"What is the total score of the moves {moves}?",
            str(total),
            {"kind": "int"},
            trace + f". Total {total}.",
            [str(x) for x in sorted({total + d for d in (-8, -4, 4, 8, 16) if total + d >= 0} - {total})][:3],
        )

    def _max_tile(self, state, rng, level) -> Task:
        board, _, trace = self._run(state)
        k = max(max(row) for row in board)
        moves = ", ".join(WORD[m] for m in state["sequence"])
        return Task(
            "StatePerception",
            f"What is the largest tile after the moves {moves}?",
            str(k),
            {"kind": "int"},
            trace + f". Largest tile {k}.",
            int_distractors(rng, k, low=2),
        )

    def _best_move(self, state, rng, level) -> Task:
        best, moves = self.solve(state)
        options = ["up", "down", "left", "right"]
        return Task(
            "StrategyOptimization",
            "Which single move scores the most points?",
            "ABCD"[options.index(WORD[moves[0]])],
            {"kind": "choice", "options": options, "check": True},
            "Scores of each move: "
            + ", ".join(f"{WORD[m]} {slide(state['board'], m)[1]}" for m in self.moves(state))
            + f"; the best is {best} ({', '.join(WORD[m] for m in moves)}).",
        )

    templates = (
        Template("max_tile", "StatePerception", "Largest tile after moves.", lambda g, *a: g._max_tile(*a)),
        Template("after", "StatePrediction", "The board after moves.", lambda g, *a: g._after(*a)),
        Template("score", "StatePrediction", "Score of a move sequence.", lambda g, *a: g._score(*a)),
        Template(
            "best_move", "StrategyOptimization", "The highest-scoring move (any).", lambda g, *a: g._best_move(*a)
        ),
    )
