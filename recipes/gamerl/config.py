"""Config of the gamerl recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.agent.loop import AgentConfig
from agentkit.config import ModelName, NonNegFloat, PosInt, option
from agentkit.engines import EngineConfig, SamplingParams
from agentkit.engines.config import HFConfig, rollout_engine_problems
from agentkit.errors import did_you_mean
from agentkit.gamerl.curriculum import CurriculumConfig
from agentkit.gamerl.evaluate import SYSTEM_PROMPT
from agentkit.gamerl.games.base import Level
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.rl.config import RLSettings

TRAIN_GAMES = ["tictactoe", "life", "langton", "blocks3d"]


@dataclass
class GameRLConfig:
    """Game-RL on the built-in games: the starting model's accuracy per game and level, GRPO with rule-verified
    rewards on the training games (a level curriculum), and held-out accuracy per game before and after, in-domain
    (fresh questions of the training games) and out-of-domain (the held-out games)."""

    model: ModelName = option(
        DEFAULT_CHAT_MODEL,
        "the policy: a catalog name, directory or hub id (a vision-language model for inputs: image)",
    )
    games: Annotated[list[str], at.MinLen(1)] = option(
        list(TRAIN_GAMES), "games trained on: built-in names or reasoning-gym datasets as rg:<name> (no levels)"
    )
    held_out: list[str] | None = option(None, "games only evaluated, out of domain (None: agentkit.gamerl.HELD_OUT)")
    tasks: list[str] = option(
        list(), "restrict to these game.task names, e.g. maze.shortest_length (empty: every task of each game)"
    )
    format: Literal["choice", "fill", "mixed"] = option(
        "choice", "question format: choice (multiple choice wherever a task has distractors), fill or mixed"
    )
    n_options: Annotated[int, at.Interval(ge=2, le=8)] = option(4, "options per multiple-choice question")
    curriculum: CurriculumConfig = option(
        CurriculumConfig(), "how each training game's level moves with its success rate"
    )
    use_curriculum: bool = option(
        True, "move levels with the curriculum; false keeps every question at curriculum.start"
    )
    train_questions: PosInt = option(
        64, "training rows per game (a row's question is redrawn at its game's level each step)"
    )
    train_seed: int = option(0, "the training rows' seed")
    rl: RLSettings = option(RLSettings(
            steps=20, questions_per_step=4, group_size=4, micro_batch=8, learning_rate=1e-4, lora_r=16, save_steps=5,
            agent=AgentConfig(
                max_turns=1, max_total_tokens=64, system_prompt=SYSTEM_PROMPT,
                sampling=SamplingParams(temperature=1.0, max_tokens=64, seed=0),
            ),
        ), "the GRPO settings; one model turn per question (rl.agent.max_turns 1)")  # fmt: skip
    format_score: NonNegFloat = option(
        0.0, "reward for answering inside <answer></answer>, on top of correctness (0: the paper's binary reward)"
    )
    judge: str | None = option(
        None, "a model consulted only when no rule can read an answer (None: such answers score 0)"
    )
    eval_questions: PosInt = option(32, "held-out questions per game, none of them a training question")
    eval_seed: int = option(1000, "the held-out questions' seed")
    eval_level: Level = option("Easy", "the held-out questions' level")
    eval_max_tokens: PosInt = option(64, "tokens of each greedy evaluation answer")
    level_questions: Annotated[int, at.Ge(0)] = option(
        12, "questions per game and level for the starting model's accuracy by level (0: skip it)"
    )
    seeds: Annotated[list[int], at.MinLen(1)] = option([0, 1, 2], "one GRPO run per seed")
    engine: EngineConfig = option(
        HFConfig(model=None),
        "the engine of rollouts, evaluation and the judge (kind and options; model stays unset: it runs the policy)",
    )
    inputs: Literal["text", "image"] = option(
        "text", "text: the board written out in each question; image: shown as a picture (a vision-language model)"
    )

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
        if self.rl.agent.max_turns != 1:
            out.append("rl.agent.max_turns: game questions take one turn; set 1")
        out += rollout_engine_problems(self.engine)
        if self.inputs == "image":
            out += [f"inputs: image boards come from the built-in games; {g!r} has none" for g in self._rg()]
            if not self.engine.VISION:
                out.append(
                    f"inputs: image rollouts need an engine that runs vision-language models, not {self.engine.kind}"
                )
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
