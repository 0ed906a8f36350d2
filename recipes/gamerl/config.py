"""Config of the gamerl recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import ModelName, NonNegFloat, PosInt
from agentkit.errors import did_you_mean
from agentkit.gamerl.curriculum import CurriculumConfig
from agentkit.gamerl.games.base import Level
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.rl.config import RLSettings

TRAIN_GAMES = ["tictactoe", "life", "langton", "blocks3d"]


@dataclass
class GameRLConfig:
    """Game-RL on the built-in games: the starting model's accuracy per game and level, GRPO with rule-verified
    rewards on the training games (a level curriculum), and held-out accuracy per game before and after, in-domain
    (fresh questions of the training games) and out-of-domain (the held-out games).

    model: catalog name, directory or hub id of the policy. games: the games trained on; held_out: games only
    evaluated (default: agentkit.gamerl.HELD_OUT). Either may name reasoning-gym's datasets as ``rg:<name>``
    (no levels: the curriculum leaves them as they are, the level table skips them). tasks: restrict to these ``game.task`` names (empty: all of each
    game's tasks). format: choice (multiple choice wherever a task has distractors), fill or mixed. n_options:
    options per multiple-choice question.

    curriculum: each training game starts at curriculum.start and moves up (down) when its success rate over the
    last curriculum.window samples reaches curriculum.up (falls to curriculum.down); use_curriculum false keeps
    every question at curriculum.start. train_questions / train_seed: rows per game (a row's question is redrawn
    at its game's level each step). rl: the GRPO settings (max_turns is 1: one answer per question).
    format_score: reward for answering inside <answer></answer> on top of correctness (0: the paper's binary).
    judge: a model consulted only when no rule can read an answer (none: such answers score 0).

    eval_questions / eval_seed / eval_level: the held-out questions per game (none of them a training question),
    answered greedily with at most eval_max_tokens tokens. level_questions: questions per game and level for the
    starting model's accuracy by level (0: skip). seeds: one GRPO run per seed. engine: hf (rollouts by the policy
    in process) or vllm.
    """

    model: ModelName = DEFAULT_CHAT_MODEL
    games: Annotated[list[str], at.MinLen(1)] = field(default_factory=lambda: list(TRAIN_GAMES))
    held_out: list[str] | None = None
    tasks: list[str] = field(default_factory=list)
    format: Literal["choice", "fill", "mixed"] = "choice"
    n_options: Annotated[int, at.Interval(ge=2, le=8)] = 4
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    use_curriculum: bool = True
    train_questions: PosInt = 64
    train_seed: int = 0
    rl: RLSettings = field(
        default_factory=lambda: RLSettings(
            steps=20, questions_per_step=4, group_size=4, micro_batch=8, learning_rate=1e-4, max_turns=1,
            max_tokens_per_turn=64, max_total_tokens=64, lora_r=16, save_steps=5,
        )
    )  # fmt: skip
    format_score: NonNegFloat = 0.0
    judge: str | None = None
    eval_questions: PosInt = 32
    eval_seed: int = 1000
    eval_level: Level = "Easy"
    eval_max_tokens: PosInt = 64
    level_questions: Annotated[int, at.Ge(0)] = 12
    seeds: Annotated[list[int], at.MinLen(1)] = field(default_factory=lambda: [0, 1, 2])
    engine: Literal["hf", "vllm"] = "hf"
    inputs: Literal["text", "image"] = "text"

    def problems(self) -> list[str]:
        from agentkit.gamerl.games import GAMES, get_game

        names = GAMES.names()
        known = lambda g: g in names or g.startswith("rg:") and _rg_known(g[3:])  # noqa: E731
        out = [f"games: unknown game {g!r}{did_you_mean(g, names)}" for g in self.games if not known(g)]
        out += [f"held_out: unknown game {g!r}{did_you_mean(g, names)}" for g in self.held_out or [] if not known(g)]
        out += [f"held_out: {g!r} is also a training game" for g in self.held_out or [] if g in self.games]
        for t in self.tasks:
            game, _, task = t.partition(".")
            if game not in names:
                out.append(f"tasks: {t!r} names no game (use game.task, e.g. maze.shortest_length)")
            elif task not in [x.name for x in get_game(game).templates]:
                out.append(
                    f"tasks: {game} has no task {task!r}{did_you_mean(task, [x.name for x in get_game(game).templates])}"
                )
        if self.rl.max_turns != 1:
            out.append("rl.max_turns: game questions take one turn; set 1")
        if self.inputs == "image":
            out += [f"inputs: image boards come from the built-in games; {g!r} has none" for g in self._rg()]
            if self.engine != "hf":
                out.append("inputs: image rollouts run on the hf engine; set engine: hf")
            out += self._vision_problem()
        return out

    def _rg(self) -> list[str]:
        return [g for g in [*self.games, *(self.held_out or [])] if g.startswith("rg:")]

    def _vision_problem(self) -> list[str]:
        """inputs=image needs a model that takes images (read from its config; nothing is loaded)."""
        from agentkit.errors import AgentkitError
        from agentkit.models.catalog import is_vision_model, model_problem

        if model_problem(self.model):
            return []  # the model field's own check says what is wrong
        try:
            vision = is_vision_model(self.model)
        except AgentkitError as e:
            return [f"model: {e}"]
        hint = " (an image-text-to-text checkpoint, e.g. tiny-random-vlm in tests)"
        return [] if vision else [f"inputs: image needs a vision-language model; {self.model!r} is text-only{hint}"]


def _rg_known(name: str) -> bool:
    """Whether reasoning-gym (when installed) has the dataset ``name``."""
    try:
        import reasoning_gym
    except ImportError:
        return False
    return name in reasoning_gym.factory.DATASETS
