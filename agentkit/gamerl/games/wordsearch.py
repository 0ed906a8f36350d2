"""Word search (pattern recognition): words hidden in a letter grid along rows, columns and (Hard) diagonals and
backwards. Generation keeps a grid only when each hidden word occurs exactly once, so "where does it start" has
one answer. Solver: scan every cell and direction."""

from __future__ import annotations

import random
from typing import Any

from agentkit.gamerl.games.base import Game, Level, Task, Template, coord_distractors, fmt_coord, int_distractors
from agentkit.gamerl.render import draw_grid

WORDS = (
    "CAT DOG SUN MAP RED BOX KEY OWL ANT BEE FOX HAT CUP PEN ICE "
    "TREE BIRD FISH LAMP MOON STAR ROAD SHIP GOLD RAIN SNOW WIND LEAF ROCK SAND "
    "APPLE RIVER STONE CLOUD GRAPE HORSE PLANT TRAIN LIGHT OCEAN"
).split()
SIZE = {"Easy": 5, "Medium": 7, "Hard": 9}
HIDDEN = {"Easy": 2, "Medium": 3, "Hard": 4}
DIRS = {
    "right": (0, 1), "down": (1, 0), "left": (0, -1), "up": (-1, 0),
    "down-right": (1, 1), "up-left": (-1, -1), "down-left": (1, -1), "up-right": (-1, 1),
}  # fmt: skip
ALLOWED = {"Easy": ("right", "down"), "Medium": ("right", "down", "down-right"), "Hard": tuple(DIRS)}


def occurrences(grid: list[str], word: str) -> list[tuple[int, int, str]]:
    """Every (row, column, direction) where ``word`` starts."""
    n, out = len(grid), []
    for r in range(n):
        for c in range(n):
            for name, (dr, dc) in DIRS.items():
                end_r, end_c = r + dr * (len(word) - 1), c + dc * (len(word) - 1)
                if (
                    0 <= end_r < n
                    and 0 <= end_c < n
                    and all(grid[r + dr * i][c + dc * i] == ch for i, ch in enumerate(word))
                ):
                    out.append((r, c, name))
    return out


class WordSearch(Game):
    name = "wordsearch"
    category = "pattern_recognition"
    rules = (
        "Word search: the words are hidden in the letter grid in a straight line, horizontally, vertically or "
        "diagonally, forwards or backwards. Cells are (row, column) from 0 at the top left; a word starts at the "
        "cell of its first letter."
    )

    def generate(self, rng: random.Random, level: Level) -> dict[str, Any]:
        n = SIZE[level]
        while True:
            grid = [[""] * n for _ in range(n)]
            words = []
            for word in rng.sample([w for w in WORDS if len(w) <= n], HIDDEN[level] * 3):
                if len(words) == HIDDEN[level]:
                    break
                for _ in range(30):
                    dr, dc = DIRS[rng.choice(ALLOWED[level])]
                    r, c = rng.randrange(n), rng.randrange(n)
                    cells = [(r + dr * i, c + dc * i) for i in range(len(word))]
                    if all(0 <= a < n and 0 <= b < n and grid[a][b] in ("", ch) for (a, b), ch in zip(cells, word)):
                        for (a, b), ch in zip(cells, word):
                            grid[a][b] = ch
                        words.append(word)
                        break
            filled = ["".join(ch or rng.choice("ABCDEFGHIKLMNOPRSTUW") for ch in row) for row in grid]
            if len(words) == HIDDEN[level] and all(len(occurrences(filled, w)) == 1 for w in words):
                return {"grid": filled, "words": words}

    def moves(self, state: dict[str, Any]) -> list[str]:
        return list(state["words"])  # "find" a word

    def step(self, state: dict[str, Any], move: str) -> dict[str, Any]:
        if move not in state["words"]:
            raise ValueError(f"{move!r} is not hidden here")
        return {**state, "words": [w for w in state["words"] if w != move]}

    def solve(self, state: dict[str, Any]) -> dict[str, tuple[int, int, str]]:
        """Each word's start cell and direction."""
        return {w: occurrences(state["grid"], w)[0] for w in state["words"]}

    def text(self, state: dict[str, Any]) -> str:
        return "\n".join(" ".join(row) for row in state["grid"]) + "\nWords: " + ", ".join(state["words"])

    def draw(self, state: dict[str, Any]):
        g = state["grid"]
        return draw_grid(len(g), len(g), lambda r, c: ("floor", g[r][c]), "words: " + ", ".join(state["words"]))

    # ---- task templates ----------------------------------------------------------------------------------
    def _letter_count(self, state, rng, level) -> Task:
        g = state["grid"]
        r = rng.randrange(len(g))
        letter = rng.choice(g[r])
        k = g[r].count(letter)
        return Task(
            "StatePerception",
            f"How many times does the letter {letter} appear in row {r}?",
            str(k),
            {"kind": "int"},
            f"Row {r} reads {' '.join(g[r])}; {letter} appears {k} time{'s' * (k != 1)}.",
            int_distractors(rng, k, low=1),
        )

    def _start(self, state, rng, level) -> Task:
        word = rng.choice(state["words"])
        r, c, d = self.solve(state)[word]
        n = len(state["grid"])
        return Task(
            "StrategyOptimization",
            f"At which cell (row, column) does the word {word} start?",
            fmt_coord((r, c)),
            {"kind": "coord"},
            f"The cells holding {word[0]} are the candidates; reading from each in all eight directions, only "
            f"({r}, {c}) going {d} spells {word}.",
            coord_distractors(
                rng, (r, c), [(a, b) for a in range(n) for b in range(n) if state["grid"][a][b] == word[0]] or [(0, 0)]
            ),
        )

    def _direction(self, state, rng, level) -> Task:
        word = rng.choice(state["words"])
        r, c, d = self.solve(state)[word]
        options = list(DIRS)
        return Task(
            "StrategyOptimization",
            f"In which direction does the word {word} run from its first letter?",
            "ABCDEFGH"[options.index(d)],
            {"kind": "choice", "options": options},
            f"{word} starts at ({r}, {c}); its letters continue {d}.",
        )

    templates = (
        Template("letter_count", "StatePerception", "A letter's count in a row.", lambda g, *a: g._letter_count(*a)),
        Template("start", "StrategyOptimization", "Where a word starts.", lambda g, *a: g._start(*a)),
        Template("direction", "StrategyOptimization", "Which way a word runs.", lambda g, *a: g._direction(*a)),
    )
