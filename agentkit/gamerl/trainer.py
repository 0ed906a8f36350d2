"""GRPO on game questions with a level curriculum: ``agentkit.rl``'s ``AgentGRPOTrainer`` with rule-verified
rewards, and each batch's questions drawn at the level the curriculum holds for their game.

Rows (``game_rows``) name a game and a slot. With a curriculum, each generation batch replaces a row's question by
a fresh one drawn at the game's current level from ``Random(f"{row id}:{step}")``, so the G samples of a question
share it and a resumed run draws the same ones; the batch's scores (gathered over all processes, so every process
moves the levels alike) then go to the curriculum. Its state is saved with every checkpoint
(``curriculum.json``) and loaded back on resume.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from accelerate.utils import gather_object
from transformers import TrainerCallback

from agentkit.agent.loop import AgentConfig, agent_prompt
from agentkit.gamerl.curriculum import Curriculum
from agentkit.gamerl.dataset import GameConfig, entry_image, make_entry
from agentkit.gamerl.games import get_game
from agentkit.gamerl.games.base import LEVELS
from agentkit.rl.trainer import AgentGRPOTrainer


def draw(game: str, config: GameConfig, rng: random.Random, slot: int, seed: int = 0) -> dict[str, Any]:
    """One question of ``game`` drawn with ``rng``: a built-in game's at ``config``'s level, or (``rg:<name>``)
    an entry of reasoning-gym's dataset at an index ``rng`` picks (its datasets have no levels)."""
    if game.startswith("rg:"):
        from agentkit.gamerl.reasoning_gym import ReasoningGymDataset

        return ReasoningGymDataset(game[3:], size=2**31 - 1, seed=seed)[rng.randrange(2**31 - 1)]
    return make_entry(get_game(game), config, rng, slot, seed)


def game_rows(games: Sequence[str], per_game: int, seed: int, configs: dict[str, GameConfig], agent: AgentConfig):
    """A ``datasets.Dataset`` of ``per_game`` questions per game (one row each: id, game, slot, prompt, answers,
    entry as JSON, and the board ``image`` when the configs draw image boards), each game's drawn with its config
    (``rg:<name>``: reasoning-gym's dataset)."""
    import datasets

    rows = []
    for game in games:
        for slot in range(per_game):
            rng = random.Random(f"{game}:{seed}:{slot}")
            entry = draw(game, configs[game], rng, slot, seed)
            rows.append(_row(f"{game}-{slot}", game, slot, entry, agent))
    return datasets.Dataset.from_list(rows)


def _row(row_id: str, game: str, slot: int, entry: dict[str, Any], agent: AgentConfig) -> dict[str, Any]:
    row = {
        "id": row_id,
        "game": game,
        "slot": slot,
        "prompt": agent_prompt(entry["question"], [], agent),
        "answers": [str(entry["answer"])],
        "entry": json.dumps(entry),
    }
    image = entry_image(entry)
    if image is not None:  # TRL puts it into the prompt (before the question) and into the loss's forward pass
        row["image"] = image
    return row


class GameGRPOTrainer(AgentGRPOTrainer):
    """``AgentGRPOTrainer`` (no tools, one turn) on ``game_rows``; ``outcome`` is a ``GameReward``.

    Args:
        curriculum: moves each game's level by its success rate; None keeps the rows' questions.
        game_configs: how each game's questions are drawn (format, tasks…; the level is the curriculum's).
        question_seed: part of every redrawn question's seed.

    ``seen`` holds the text of every question trained on (to check a held-out set against).
    """

    def __init__(
        self,
        *args,
        curriculum: Curriculum | None = None,
        game_configs: dict[str, GameConfig],
        question_seed: int = 0,
        **kw,
    ):
        if curriculum is not None and kw.get("rollout_ahead"):
            from agentkit.errors import AgentkitError

            # the curriculum redraws each row's question at its step: a rollout sampled a step early is of another
            raise AgentkitError("rollout_ahead: the curriculum redraws questions at each step", "turn one of them off")
        self.curriculum, self.game_configs, self.question_seed = curriculum, game_configs, question_seed
        self.seen: set[str] = set()
        callbacks = list(kw.pop("callbacks", None) or [])
        if curriculum is not None:
            callbacks.append(CurriculumState(curriculum))
        super().__init__(*args, tools=[], callbacks=callbacks, **kw)

    def _redraw(self, row: dict[str, Any]) -> dict[str, Any]:
        level = self.curriculum.level(row["game"])
        rng = random.Random(f"{self.question_seed}:{row['id']}:{self.state.global_step}")
        entry = draw(row["game"], replace(self.game_configs[row["game"]], level=level), rng, row["slot"])
        return {**row, **_row(row["id"], row["game"], row["slot"], entry, self.agent_config)}

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if self.curriculum is not None:
            inputs = [self._redraw(r) for r in inputs]
        self.seen.update(json.loads(r["entry"])["question"] for r in inputs)
        out = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        if self.curriculum is not None and mode == "train":
            for game, score in gather_object([(r["game"], s["em"]) for r, s in zip(inputs, self._scores)]):
                self.curriculum.record(game, score)
            for game in self.curriculum.games:
                self._metrics[mode][f"level/{game}"].append(float(LEVELS.index(self.curriculum.level(game)) + 1))
        paths = getattr(self.outcome, "paths", None)
        if paths:
            total = sum(paths.values())
            for name in ("rule", "game", "judge", "none"):
                self._metrics[mode][f"verify/{name}"].append(paths[name] / total)
            paths.clear()
        return out


class CurriculumState(TrainerCallback):
    """Saves the curriculum with each checkpoint; ``restore`` loads it from the one a run resumes from."""

    FILE = "curriculum.json"

    def __init__(self, curriculum: Curriculum):
        self.curriculum = curriculum

    def on_save(self, args, state, control, **kwargs):
        where = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and where.is_dir():
            from agentkit.files import atomic_write

            atomic_write(where / self.FILE, json.dumps(self.curriculum.state_dict()))

    def restore(self, checkpoint: str | Path) -> bool:
        path = Path(checkpoint) / self.FILE
        if not path.is_file():
            return False
        self.curriculum.load_state_dict(json.loads(path.read_text()))
        return True
