"""reasoning-gym's datasets (PyPI ``reasoning-gym``) behind the same API, verifier path and trainer as the games.

``create_dataset("rg:<name>", size, seed, **cfg)`` wraps ``reasoning_gym.create_dataset(name, …)``: its entries
keep their question, answer and metadata, and gain ``game``, ``qa_level`` and a ``verify`` spec of kind ``rg``, so
``agentkit.gamerl.verifiers`` extracts the answer as for any game (``<answer>``, ``\\boxed{}``, last line) and then
scores it with the dataset's own ``score_answer`` (reasoning-gym's scores are in [0, 1]; partial credit stays).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from agentkit.errors import AgentkitError


def _rg():
    try:
        import reasoning_gym
    except ImportError as e:
        raise AgentkitError(
            "reasoning-gym is not installed", "pip install reasoning-gym (it is in the [dev] extra)"
        ) from e
    return reasoning_gym


@cache
def scorer(name: str):
    """The named dataset's ``score_answer``."""
    return _rg().get_score_answer_fn(name)


class ReasoningGymDataset:
    """``size`` entries of reasoning-gym's dataset ``name`` (its own seeding), with our metadata added."""

    def __init__(self, name: str, size: int, seed: int, **cfg: Any):
        rg = _rg()
        if name not in rg.factory.DATASETS:
            from agentkit.errors import did_you_mean

            raise AgentkitError(
                f"unknown reasoning-gym dataset {name!r}", did_you_mean(name, list(rg.factory.DATASETS))
            )
        self.name, self.size, self.seed = name, size, seed
        self.inner = rg.create_dataset(name, size=size, seed=seed, **cfg)

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        return (self[i] for i in range(self.size))

    def __getitem__(self, idx: int) -> dict[str, Any]:
        e = self.inner[idx]
        meta = dict(e["metadata"])
        meta.update(
            game=f"rg:{self.name}",
            task=self.name,
            category="reasoning_gym",
            qa_level=str(meta.get("difficulty", "")),
            verify={"kind": "rg", "dataset": self.name},
        )
        return {"question": e["question"], "answer": e["answer"], "metadata": meta}

    def score_answer(self, answer: str | None, entry: dict[str, Any]) -> float:
        from agentkit.gamerl.verifiers import score_answer

        return score_answer(answer, entry)
