"""The built-in games, a lazy registry (third parties add theirs through the ``agentkit.games`` entry points).

Categories follow GameQA's four; ``HELD_OUT`` is the fixed out-of-domain split (GameQA holds Sudoku and
Minesweeper out too): no recipe trains on these games unless told to.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from agentkit.gamerl.games.base import Game
from agentkit.registry import Registry

GAMES: Registry[type[Game]] = Registry("game", group="agentkit.games")
for _name, _cls in {
    "maze": "Maze",
    "sokoban": "Sokoban",
    "tictactoe": "TicTacToe",
    "sudoku": "Sudoku",
    "life": "Life",
    "langton": "LangtonAnt",
    "minesweeper": "Minesweeper",
    "wordsearch": "WordSearch",
    "tetris": "Tetris",
    "g2048": "Game2048",
    "tents": "Tents",
    "blocks3d": "Blocks3D",
}.items():
    GAMES.register(_name, f"agentkit.gamerl.games.{_name}:{_cls}")

HELD_OUT: tuple[str, ...] = ("sudoku", "minesweeper", "g2048", "tents")


@cache
def get_game(name: str) -> Game:
    """The game's (stateless) instance."""
    return GAMES.get(name)()


def in_domain() -> list[str]:
    return [g for g in GAMES.names() if g not in HELD_OUT]


def game_checker(entry: dict[str, Any]):
    """The ``check`` of the entry's game (for answers that many values satisfy)."""
    return get_game(entry["metadata"]["game"]).check
