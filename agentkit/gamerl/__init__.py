"""Game-RL / Code2Logic (arXiv 2505.13886): games as verifiable reasoning environments.

- ``games``: 12 built-in games in GameQA's four categories (state, legal moves, exact solver, text and PNG),
  a lazy registry and the fixed held-out split;
- ``dataset``: ``create_dataset(name, size, seed, level=…)`` with reasoning-gym's shapes and GameQA's schema,
  composites, HF export with text and image variants;
- ``verify``: rule-first answer verification (extraction, a parser per answer kind, game checkers, a judge only
  where no rule decides, the deciding path per sample);
- ``curriculum``: per-game levels moved by the success rate;
- ``reasoning_gym``: reasoning-gym's datasets behind the same API.
"""

from agentkit.gamerl.curriculum import Curriculum, CurriculumConfig
from agentkit.gamerl.dataset import CompositeDataset, DatasetSpec, GameDataset, create_dataset, to_hf
from agentkit.gamerl.games import GAMES, HELD_OUT, get_game, in_domain
from agentkit.gamerl.verifiers import Judge, Verdict, score_answer, verify, verify_batch

__all__ = [
    "GAMES",
    "HELD_OUT",
    "CompositeDataset",
    "Curriculum",
    "CurriculumConfig",
    "DatasetSpec",
    "GameDataset",
    "Judge",
    "Verdict",
    "create_dataset",
    "get_game",
    "in_domain",
    "score_answer",
    "to_hf",
    "verify",
    "verify_batch",
]
