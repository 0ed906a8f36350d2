"""Lights Out on an n × n board of lights (1 on, 0 off). Pressing a light toggles it and its neighbours up, down,
left and right. The goal is to switch every light off with the fewest presses.

Not a built-in game of agentkit: an input for the Code2Logic pipeline (``agentkit gamerl code2logic``).
"""

import itertools
import random


def new_board(rng: random.Random, n: int = 3, presses: int = 3) -> list[list[int]]:
    """A solvable board: all lights off, then ``presses`` random presses."""
    board = [[0] * n for _ in range(n)]
    for _ in range(presses):
        board = press(board, rng.randrange(n), rng.randrange(n))
    return board


def press(board: list[list[int]], r: int, c: int) -> list[list[int]]:
    """The board after pressing (r, c)."""
    n = len(board)
    out = [row[:] for row in board]
    for dr, dc in ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)):
        if 0 <= r + dr < n and 0 <= c + dc < n:
            out[r + dr][c + dc] ^= 1
    return out


def lights_on(board: list[list[int]]) -> int:
    return sum(map(sum, board))


def solve(board: list[list[int]]) -> list[tuple[int, int]]:
    """A smallest set of presses that switches every light off (pressing twice undoes a press, so each cell is
    pressed at most once; brute force over subsets, smallest first)."""
    n = len(board)
    cells = [(r, c) for r in range(n) for c in range(n)]
    for size in range(len(cells) + 1):
        for chosen in itertools.combinations(cells, size):
            b = board
            for r, c in chosen:
                b = press(b, r, c)
            if lights_on(b) == 0:
                return list(chosen)
    raise ValueError("unsolvable board")


def render(board: list[list[int]]) -> str:
    return "\n".join(" ".join(map(str, row)) for row in board)
