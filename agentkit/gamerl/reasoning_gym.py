"""reasoning-gym's datasets (PyPI ``reasoning-gym``) behind the same API, verifier path and trainer as the games.

``create_dataset("rg:<name>", size, seed, **cfg)`` wraps ``reasoning_gym.create_dataset(name, …)``: its entries
keep their question, answer and metadata, and gain ``game``, ``qa_level`` and a ``verify`` spec of kind ``rg``, so
``agentkit.gamerl.verifiers`` extracts the answer as for any game (``<answer>``, ``\\boxed{}``, last line) and then
scores it with the dataset's own ``score_answer`` (reasoning-gym's scores are in [0, 1]; partial credit stays).
"""

from __future__ import annotations

from typing import Any

from agentkit.errors import AgentkitError, did_you_mean
from agentkit.gamerl.verifiers import reasoning_gym, score_answer


class ReasoningGymDataset:
    """``size`` entries of reasoning-gym's dataset ``name`` (its own seeding), with our metadata added."""

    def __init__(self, name: str, size: int, seed: int, **cfg: Any):
        rg = reasoning_gym()
        if name not in rg.factory.DATASETS:
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

    score_answer = staticmethod(score_answer)
