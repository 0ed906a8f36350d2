"""Nim: a few piles of stones. A move takes one or more stones from a single pile; whoever takes the last stone
wins. A position is lost for the player to move exactly when the XOR of the pile sizes (the nim-sum) is 0.

Not a built-in game of agentkit: an input for the Code2Logic pipeline (``agentkit gamerl code2logic``).
"""

import random
from functools import reduce
from operator import xor


def new_game(rng: random.Random, piles: int = 3, most: int = 7) -> list[int]:
    """Random pile sizes, each between 1 and ``most``."""
    return [rng.randint(1, most) for _ in range(piles)]


def legal_moves(piles: list[int]) -> list[tuple[int, int]]:
    """Every (pile index, stones taken)."""
    return [(i, k) for i, p in enumerate(piles) for k in range(1, p + 1)]


def play(piles: list[int], move: tuple[int, int]) -> list[int]:
    """The piles after taking ``k`` stones from pile ``i``."""
    i, k = move
    if not 1 <= k <= piles[i]:
        raise ValueError(f"cannot take {k} from pile {i} of {piles[i]}")
    return [p - k if j == i else p for j, p in enumerate(piles)]


def nim_sum(piles: list[int]) -> int:
    return reduce(xor, piles, 0)


def winning_moves(piles: list[int]) -> list[tuple[int, int]]:
    """The moves that leave a nim-sum of 0 (none when the position is already lost)."""
    return [m for m in legal_moves(piles) if nim_sum(play(piles, m)) == 0]


def is_over(piles: list[int]) -> bool:
    return sum(piles) == 0


def render(piles: list[int]) -> str:
    return "\n".join(f"Pile {i}: {'o' * p} ({p})" for i, p in enumerate(piles))
