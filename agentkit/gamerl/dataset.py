"""Game datasets with reasoning-gym's shapes, GameQA's schema, composites and a level curriculum.

``create_dataset(name, size, seed, level="Easy", **cfg)`` returns a ``GameDataset``: entry ``idx`` is
``{"question", "answer", "metadata"}`` built from ``Random(f"{name}:{seed}:{idx}")`` (reproducible per entry, no
two seeds sharing entries, unlike ``Random(seed + idx)``), and ``score_answer(answer, entry)`` is the rule verifier.
The metadata carries GameQA's fields (``data_id, qa_type, question_id, question_description, state, plot_level,
qa_level, options, analysis``) plus ``game``, ``category``, ``task`` and the ``verify`` spec.

``"composite"`` mixes datasets by weight (``datasets={"maze": 1, "life": 2}`` or a list of ``DatasetSpec``);
``"rg:<name>"`` wraps one of reasoning-gym's datasets (``agentkit.gamerl.reasoning_gym``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentkit.errors import AgentkitError, did_you_mean
from agentkit.gamerl.games import GAMES, get_game
from agentkit.gamerl.games.base import LEVELS, Level, Task
from agentkit.gamerl.verifiers import labels, score_answer

IMAGE_BOARD = "The board is shown in the image."
INSTRUCTION = "Think step by step, then give only the final answer inside <answer></answer>."


@dataclass
class GameConfig:
    """One game's dataset. level: Easy / Medium / Hard (board size and steps), or "mixed" (drawn per entry).
    tasks: template names to draw from (empty: all). format: fill (free answers), choice (multiple choice where the
    task has distractors) or mixed (half and half). n_options: options of a multiple-choice question.
    instruction: the answer-format line closing each question. board: text (the board written out in the question)
    or image (the question says the board is in the image; ``entry_image`` draws it: GameQA's visual setting)."""

    level: Level | str = "Easy"
    tasks: list[str] = field(default_factory=list)
    format: str = "fill"
    n_options: int = 4
    instruction: str = INSTRUCTION
    board: str = "text"

    def problems(self, game) -> list[str]:
        out = []
        if self.level not in (*LEVELS, "mixed"):
            out.append(f"level: {self.level!r} is not one of Easy, Medium, Hard, mixed")
        if self.format not in ("fill", "choice", "mixed"):
            out.append(f"format: {self.format!r} is not one of fill, choice, mixed")
        names = [t.name for t in game.templates]
        out += [f"tasks: {game.name} has no task {t!r}{did_you_mean(t, names)}" for t in self.tasks if t not in names]
        if not 2 <= self.n_options <= 8:
            out.append(f"n_options: {self.n_options} is not within 2..8")
        if self.board not in ("text", "image"):
            out.append(f"board: {self.board!r} is not one of text, image")
        return out


class GameDataset:
    """``size`` seeded entries of one game (reasoning-gym's ``ProceduralDataset`` shape: len, index, iterate,
    ``score_answer``)."""

    def __init__(self, game: str, size: int, seed: int, config: GameConfig | None = None):
        self.game, self.size, self.seed = get_game(game), size, seed
        self.config = config or GameConfig()
        problems = self.config.problems(self.game)
        if problems:
            raise AgentkitError(f"dataset {game!r}: " + "; ".join(problems))

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(self.size))

    def __getitem__(self, idx: int) -> dict[str, Any]:
        if not 0 <= idx < self.size:
            raise IndexError(idx)
        return make_entry(self.game, self.config, random.Random(f"{self.game.name}:{self.seed}:{idx}"), idx, self.seed)

    score_answer = staticmethod(score_answer)


def make_entry(game, config: GameConfig, rng: random.Random, idx: int = 0, seed: int = 0) -> dict[str, Any]:
    """One GameQA entry of ``game`` drawn with ``rng``."""
    level = rng.choice(LEVELS) if config.level == "mixed" else config.level
    names = config.tasks or [t.name for t in game.templates]
    template = game.template(rng.choice(names))
    state = game.generate(rng, level)
    task: Task = template.make(game, state, rng, level)
    choice = config.format == "choice" or (config.format == "mixed" and rng.random() < 0.5)
    verify, answer, options = dict(task.verify), task.answer, list(task.verify.get("options", []))
    if choice and task.distractors and verify["kind"] != "choice":
        options = [task.answer, *task.distractors[: config.n_options - 1]]
        rng.shuffle(options)
        answer = labels(len(options))[options.index(task.answer)]
        verify = {"kind": "choice", "options": options}
    board = game.text(state) if config.board == "text" else IMAGE_BOARD
    question = f"{game.rules}\n\n{board}\n\n{task.question}"
    if options:
        question += "\nOptions:\n" + "\n".join(f"{lab}. {o}" for lab, o in zip(labels(len(options)), options))
    qid = [t.name for t in game.templates].index(template.name)
    form = "mcq" if verify["kind"] == "choice" else "fill"
    return {
        "question": question + "\n" + config.instruction,
        "answer": answer,
        "metadata": {
            "source_dataset": game.name,
            "source_index": idx,
            "data_id": f"{game.name}-{form}-{seed}-{idx}-{template.name}",
            "game": game.name,
            "category": game.category,
            "task": template.name,
            "qa_type": task.qa_type,
            "question_id": qid,
            "question_description": template.description,
            "state": state,
            "plot_level": LEVELS.index(level) + 1,
            "qa_level": level,
            "options": options,
            "analysis": task.analysis,
            "verify": verify,
            "board": config.board,
        },
    }


def entry_image(entry: dict[str, Any]):
    """The board of an image-board entry (``GameConfig.board == "image"``) as a PIL image; None for a text board."""
    m = entry.get("metadata", {})
    return get_game(m["game"]).draw(m["state"]) if m.get("board") == "image" else None


# ---- composites ---------------------------------------------------------------------------------------------------
@dataclass
class DatasetSpec:
    """One part of a composite: a dataset name, its weight, and its own config (``GameConfig`` fields, or a
    reasoning-gym dataset's for ``rg:<name>``)."""

    name: str
    weight: float = 1.0
    config: dict[str, Any] = field(default_factory=dict)


class CompositeDataset:
    """Entries drawn from several datasets by weight: entry ``idx`` picks its part with ``Random(seed, idx)`` and
    takes that part's entry ``idx`` (so an entry is the same whatever the other parts are, given the pick)."""

    def __init__(self, specs: Sequence[DatasetSpec], size: int, seed: int):
        if not specs or any(s.weight < 0 for s in specs) or not sum(s.weight for s in specs):
            raise AgentkitError("composite: give at least one dataset with a positive weight")
        self.specs, self.size, self.seed = list(specs), size, seed
        self.parts = {s.name: create_dataset(s.name, size, seed, **s.config) for s in self.specs}

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(self.size))

    def __getitem__(self, idx: int) -> dict[str, Any]:
        rng = random.Random(f"composite:{self.seed}:{idx}")
        spec = rng.choices(self.specs, weights=[s.weight for s in self.specs])[0]
        entry = self.parts[spec.name][idx]
        entry["metadata"] = {**entry["metadata"], "source_dataset": spec.name, "source_index": idx}
        return entry

    def score_answer(self, answer: str | None, entry: dict[str, Any]) -> float:
        return self.parts[entry["metadata"]["source_dataset"]].score_answer(answer, entry)


def create_dataset(name: str, size: int = 500, seed: int = 0, **cfg):
    """reasoning-gym's factory, for our games and theirs.

    Args:
        name: a game name, ``"composite"`` or ``"rg:<reasoning-gym name>"``.
        size: entries.
        seed: the entries' seed (entry i depends only on seed and i).
        **cfg: a game's ``GameConfig`` fields (``level=``, ``tasks=``, ``format=``…), a composite's ``datasets=``
            (a {name: weight} dict or ``DatasetSpec`` list), or reasoning-gym's own options.

    Returns:
        A dataset: ``len``, indexing, iteration, and ``score_answer(answer, entry)``.

    >>> ds = create_dataset("maze", size=2, seed=0, level="Easy", tasks=["shortest_length"])
    >>> e = ds[1]; ds.score_answer(f"<answer>{e['answer']}</answer>", e), e == ds[1]
    (1.0, True)
    """
    if name == "composite":
        parts = cfg.pop("datasets")
        if isinstance(parts, dict):
            parts = [DatasetSpec(k, float(w)) for k, w in parts.items()]
        specs = [p if isinstance(p, DatasetSpec) else DatasetSpec(**p) for p in parts]
        return CompositeDataset(specs, size, seed)
    if name.startswith("rg:"):
        from agentkit.gamerl.reasoning_gym import ReasoningGymDataset

        return ReasoningGymDataset(name[3:], size, seed, **cfg)
    if name not in GAMES:
        raise AgentkitError(f"unknown game dataset {name!r}", did_you_mean(name, GAMES.names()))
    unknown = set(cfg) - set(GameConfig.__dataclass_fields__)
    if unknown:
        raise AgentkitError(
            f"dataset {name!r}: unknown option {sorted(unknown)[0]!r}",
            did_you_mean(sorted(unknown)[0], list(GameConfig.__dataclass_fields__)),
        )
    return GameDataset(name, size, seed, GameConfig(**cfg))


def level_sizes(games: Sequence[str], per_level: int = 40, seed: int = 0) -> dict[str, dict[str, dict[str, float]]]:
    """What a level changes on each game's generator: the mean characters of the board as the question writes it and
    of the entry's analysis (its worked solution), over ``per_level`` entries a level.

    Returns ``{game: {level: {"board_chars", "analysis_chars"}}}``.

    >>> by_level = level_sizes(["tictactoe"], per_level=2)["tictactoe"]  # a 3×3 board at every level
    >>> {level: sizes["board_chars"] for level, sizes in by_level.items()}
    {'Easy': 11.0, 'Medium': 11.0, 'Hard': 11.0}
    """
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name in games:
        game = get_game(name)
        out[name] = {}
        for level in LEVELS:
            entries = list(create_dataset(name, per_level, seed, level=level))
            out[name][level] = {
                "board_chars": sum(len(game.text(e["metadata"]["state"])) for e in entries) / per_level,
                "analysis_chars": sum(len(e["metadata"]["analysis"]) for e in entries) / per_level,
            }
    return out


# ---- export -------------------------------------------------------------------------------------------------------
def to_hf(entries, images: bool = False):
    """A ``datasets.Dataset`` in GameQA's schema (``state``, ``verify`` and ``options`` as JSON text, so every row
    has one type); ``images=True`` adds the ``image`` column (the game's PNG rendering of each state). The text
    variant writes the board out in the question; the image variant (entries drawn with ``board="image"``, exported
    with ``images=True``) shows it only in the image."""
    import datasets

    from agentkit.gamerl.render import png_bytes

    rows = []
    for e in entries:
        m = e["metadata"]
        row = {
            "data_id": m["data_id"],
            "game": m["game"],
            "category": m["category"],
            "task": m["task"],
            "qa_type": m["qa_type"],
            "question_id": m["question_id"],
            "question_description": m["question_description"],
            "plot_level": m["plot_level"],
            "qa_level": m["qa_level"],
            "question": e["question"],
            "answer": e["answer"],
            "analysis": m["analysis"],
            "options": json.dumps(m["options"]),
            "state": json.dumps(m["state"]),
            "verify": json.dumps(m["verify"]),
            "board": m.get("board", "text"),
        }
        if images:
            row["image"] = {"bytes": png_bytes(get_game(m["game"]).draw(m["state"])), "path": None}
        rows.append(row)
    ds = datasets.Dataset.from_list(rows)
    return ds.cast_column("image", datasets.Image()) if images else ds


def from_hf_row(row: dict[str, Any]) -> dict[str, Any]:
    """An exported row back to an entry ``score_answer`` takes."""
    meta = {k: row[k] for k in row if k not in ("question", "answer", "image")}
    for k in ("options", "state", "verify"):
        meta[k] = json.loads(row[k])
    return {"question": row["question"], "answer": row["answer"], "metadata": meta}
