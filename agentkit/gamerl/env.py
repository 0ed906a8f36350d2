"""Game-RL's games as TRL environments: ``GRPOTrainer(environment_factory=GameEnv, ...)``.

TRL (1.16, experimental) makes one environment per rollout and calls ``reset(**row)`` with the dataset row; every
public method of the environment is a tool the model may call (its JSON schema from the type hints and the
docstring), and ``get_reward()`` scores the finished rollout from the environment's own state. Here:

- ``reset(**row)``: the row's game and state (a Game-RL training row, whose ``entry`` column holds the GameQA
  entry as JSON, or an exported GameQA row); its text, appended to the question, says which tools there are;
- the **moves as tools**: ``legal_moves()``, ``play(move)`` (the new board, or why the move is illegal),
  ``undo()`` and ``board()``; the model explores the game from the question's state with the game's own rules;
- ``answer(answer)`` submits the answer; ``get_reward()`` is the **rule verifier's** verdict on it
  (``agentkit.gamerl.verifiers.score_answer``: 1.0 or 0.0; 0.0 without an answer), the same verdict the Game-RL
  recipe's reward gives.

Moves are written as JSON (``"U"``, ``[2, 3]``), as ``legal_moves`` lists them.

>>> from agentkit.gamerl.dataset import create_dataset
>>> entry = create_dataset("maze", size=1, seed=0)[0]
>>> env = GameEnv()
>>> "play(move)" in env.reset(entry=entry)
True
>>> env.answer(entry["answer"]), env.get_reward()
('Answer recorded.', 1.0)
"""

from __future__ import annotations

import json
from typing import Any

from agentkit.gamerl.dataset import from_hf_row
from agentkit.gamerl.games import get_game
from agentkit.gamerl.reward import entry_of
from agentkit.gamerl.verifiers import score_answer

MAX_PLAYS = 64  # moves one rollout may play (its tool calls are bounded by TRL's max_tool_calling_iterations too)


class GameEnv:
    """One rollout's game: its state as the model plays, and the answer it submits."""

    def __init__(self) -> None:
        self.entry: dict[str, Any] | None = None
        self.game = None
        self.history: list[dict[str, Any]] = []  # states, the question's first
        self.submitted: str | None = None
        self.plays = 0

    def reset(self, **row: Any) -> str:
        """Start from the row's state; returns the text added to the question (the tools it may use)."""
        self.entry = entry_of(row) if "entry" in row else from_hf_row(row)
        self.game = get_game(self.entry["metadata"]["game"])
        self.history = [self.entry["metadata"]["state"]]
        self.submitted, self.plays = None, 0
        return (
            "\n\nYou may explore the game from this state with the tools legal_moves(), play(move), undo() and "
            "board() (moves as legal_moves lists them), then give your final answer with answer(answer)."
        )

    @property
    def state(self) -> dict[str, Any]:
        return self.history[-1]

    def _legal(self) -> list[Any]:
        try:
            return list(self.game.moves(self.state))
        except NotImplementedError:
            return []

    def legal_moves(self) -> str:
        """List the legal moves from the current state of the game.

        Returns:
            The legal moves, one per line, each written as play(move) takes it.
        """
        moves = self._legal()
        return "\n".join(json.dumps(m) for m in moves) if moves else "No move is possible from this state."

    def play(self, move: str) -> str:
        """Play one move from the current state of the game.

        Args:
            move: One of the legal moves, written as legal_moves lists it (for example "U" or [2, 3]).

        Returns:
            The board after the move, or why the move cannot be played.
        """
        if self.plays >= MAX_PLAYS:
            return f"Error: at most {MAX_PLAYS} moves per game; give your answer with answer(answer)."
        try:
            wanted = json.loads(move) if isinstance(move, str) else move
        except json.JSONDecodeError:
            wanted = move
        legal = {json.dumps(m): m for m in self._legal()}
        key = json.dumps(wanted)
        if key not in legal:
            return f"Error: {move!r} is not a legal move here; legal moves: {', '.join(legal) or 'none'}."
        self.history.append(self.game.step(self.state, legal[key]))
        self.plays += 1
        return self._shown()

    def undo(self) -> str:
        """Take back the last move played.

        Returns:
            The board after taking the move back.
        """
        if len(self.history) > 1:
            self.history.pop()
        return self._shown()

    def board(self) -> str:
        """Show the current state of the game.

        Returns:
            The board as text (rows numbered from 0, columns from 0).
        """
        return self._shown()

    def _shown(self) -> str:
        """The board, and the short parts of the state that moves changed but the board may not draw (the maze
        runner's position)."""
        start, now = self.history[0], self.state
        changed = [f"{k}: {json.dumps(v)}" for k, v in now.items() if v != start.get(k) and len(json.dumps(v)) <= 80]
        return self.game.text(now) + ("\n" + "\n".join(changed) if changed else "")

    def answer(self, answer: str) -> str:
        """Submit the final answer to the question (the last one submitted counts).

        Args:
            answer: The answer, in the form the question asks for.

        Returns:
            A confirmation.
        """
        self.submitted = str(answer)
        return "Answer recorded."

    def get_reward(self) -> float:
        """The rule verifier's verdict on the submitted answer (0.0 when none was submitted)."""
        return score_answer(self.submitted, self.entry) if self.submitted is not None else 0.0
