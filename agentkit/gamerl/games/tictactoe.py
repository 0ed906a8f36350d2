"""Tic-tac-toe (strategic planning) on a 3×3 board; X moves first. Solver: minimax over the whole game tree
(memoised), giving the value for the side to move and every optimal move (the best-move checker accepts any)."""

from __future__ import annotations

import random
from functools import cache
from typing import Any

from agentkit.gamerl.games.base import Game, Level, Task, Template, fmt_coord
from agentkit.gamerl.render import draw_grid

LINES = [[(r, c) for c in range(3)] for r in range(3)] + [[(r, c) for r in range(3)] for c in range(3)]
LINES += [[(i, i) for i in range(3)], [(i, 2 - i) for i in range(3)]]
PLAYED = {"Easy": (5, 7), "Medium": (3, 5), "Hard": (1, 3)}  # pieces on the board: fewer left = easier to search


def winner(board: str) -> str | None:
    """``X``, ``O``, ``draw`` or None (game on); ``board`` is 9 characters, row by row."""
    for line in LINES:
        a, b, c = (board[r * 3 + col] for r, col in line)
        if a != "." and a == b == c:
            return a
    return "draw" if "." not in board else None


def to_move(board: str) -> str:
    return "X" if board.count("X") == board.count("O") else "O"


@cache
def value(board: str) -> int:
    """+1 if the side to move wins with perfect play, 0 draw, -1 loss."""
    w = winner(board)
    if w is not None:
        return 0 if w == "draw" else -1  # the previous player made the line
    me = to_move(board)
    return max(-value(board[:i] + me + board[i + 1 :]) for i in range(9) if board[i] == ".")


def best_moves(board: str) -> list[int]:
    me, v = to_move(board), value(board)
    return [i for i in range(9) if board[i] == "." and -value(board[:i] + me + board[i + 1 :]) == v]


class TicTacToe(Game):
    name = "tictactoe"
    category = "strategic_planning"
    rules = (
        "Tic-tac-toe on a 3×3 board: 'X' and 'O' are pieces, '.' is empty; X moves first and the players alternate. "
        "Three in a row, column or diagonal wins. Cells are (row, column) from 0 at the top left."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        low, high = PLAYED[level]
        while True:
            board, k = "." * 9, rng.randint(low, high)
            for _ in range(k):
                i = rng.choice([j for j in range(9) if board[j] == "."])
                board = board[:i] + to_move(board) + board[i + 1 :]
                if winner(board):
                    break
            if winner(board) is None:
                return {"board": board}

    def moves(self, state: dict[str, Any]) -> list[tuple[int, int]]:
        b = state["board"]
        return [] if winner(b) else [(i // 3, i % 3) for i in range(9) if b[i] == "."]

    def step(self, state: dict[str, Any], move) -> dict[str, Any]:
        r, c = move
        if (r, c) not in self.moves(state):
            raise ValueError(f"illegal move {move!r}")
        b = state["board"]
        i = r * 3 + c
        return {"board": b[:i] + to_move(b) + b[i + 1 :]}

    def solve(self, state: dict[str, Any]) -> tuple[int, list[tuple[int, int]]]:
        """(value for the side to move, every optimal move)."""
        return value(state["board"]), [(i // 3, i % 3) for i in best_moves(state["board"])]

    def text(self, state: dict[str, Any]) -> str:
        b = state["board"]
        return "\n".join(b[r * 3 : r * 3 + 3] for r in range(3))

    def draw(self, state: dict[str, Any]):
        b = state["board"]
        return draw_grid(3, 3, lambda r, c: ("floor", b[r * 3 + c].replace(".", "")), "tic-tac-toe")

    def check(self, entry: dict[str, Any], parsed: Any) -> bool:
        """Any move that keeps the best result the side to move can force."""
        return parsed is not None and tuple(parsed) in self.solution(entry["metadata"]["state"])[1]

    # ---- task templates ----------------------------------------------------------------------------------
    def _turn(self, state, rng, level) -> Task:
        b = state["board"]
        me = to_move(b)
        return Task(
            "StatePerception",
            "Whose turn is it?",
            "AB"[["X", "O"].index(me)],
            {"kind": "choice", "options": ["X", "O"]},
            f"X has {b.count('X')} pieces and O has {b.count('O')}; X moves first, so it is {me}'s turn.",
        )

    def _winning_moves(self, state, rng, level) -> Task:
        b, me = state["board"], to_move(state["board"])
        wins = [(i // 3, i % 3) for i in range(9) if b[i] == "." and winner(b[:i] + me + b[i + 1 :]) == me]
        return Task(
            "StatePrediction",
            f"List every cell where {me}, to move, completes three in a line at once (answer 'none' if there is none).",
            ", ".join(map(fmt_coord, wins)) or "none",
            {"kind": "coords"},
            f"Trying each empty cell for {me}: "
            + (", ".join(map(fmt_coord, wins)) + " complete a line." if wins else "none completes a line."),
        )

    def _outcome(self, state, rng, level) -> Task:
        b, me = state["board"], to_move(state["board"])
        v = value(b)
        result = "draw" if v == 0 else me + " wins" if v > 0 else ("O" if me == "X" else "X") + " wins"
        options = ["X wins", "O wins", "draw"]
        return Task(
            "StatePrediction",
            "If both players play perfectly from here, what is the result?",
            "ABC"[options.index(result)],
            {"kind": "choice", "options": options},
            f"Minimax over the remaining {b.count('.')} empty cells with {me} to move gives value {v:+d} for {me}: "
            f"{result}.",
        )

    def _best_move(self, state, rng, level) -> Task:
        v, best = self.solve(state)
        me = to_move(state["board"])
        return Task(
            "StrategyOptimization",
            f"{me} is to move. Give a best move (row, column): one that secures the best result {me} can force.",
            fmt_coord(best[0]),
            {"kind": "coord", "check": True},
            f"Minimax: the value for {me} is {v:+d}; the moves reaching it are "
            + ", ".join(map(fmt_coord, best))
            + ".",
        )

    templates = (
        Template("turn", "StatePerception", "Whose turn it is.", lambda g, *a: g._turn(*a)),
        Template("winning_moves", "StatePrediction", "Moves that win at once.", lambda g, *a: g._winning_moves(*a)),
        Template("outcome", "StatePrediction", "Result under perfect play.", lambda g, *a: g._outcome(*a)),
        Template("best_move", "StrategyOptimization", "An optimal move (any).", lambda g, *a: g._best_move(*a)),
    )
