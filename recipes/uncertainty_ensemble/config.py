"""Config of the uncertainty_ensemble recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import annotated_types as at

from agentkit.config import Fraction, ModelName, NonNegInt, PosFloat, PosInt
from agentkit.models.catalog import DEFAULT_CHAT_MODEL


@dataclass
class MemberConfig:
    """One member. name: its key in saved generations (and its folder under models/). base: the model it starts
    from. data_seed: the seed of its training questions (members with different seeds get disjoint questions).
    max_steps: SFT steps at most (0: the base as it is); min_steps: steps before accuracy may stop training.
    eval_every: steps between its dev checks (none: the recipe's eval_every). learning_rate, lora_r (0: full
    fine-tuning), batch_size, train_seed: the SFT run."""

    name: Annotated[str, at.MinLen(1)]
    base: ModelName = DEFAULT_CHAT_MODEL
    data_seed: int = 1
    max_steps: NonNegInt = 120
    min_steps: NonNegInt = 0
    eval_every: PosInt | None = None
    learning_rate: PosFloat = 1e-4
    lora_r: NonNegInt = 16
    batch_size: PosInt = 8
    train_seed: int = 0


def _default_members() -> list[MemberConfig]:
    return [
        # Measured: at lr 1e-4 Gemma went from 0.08 to 0.62 dev accuracy in 20 steps (SmolLM2: 0.23), so it is
        # checked every 3 steps at a lower rate. SmolLM2 variants at lr 1e-5 kept the reference's dev answers after 6
        # steps (0.23 on every kind): a near copy is no ensemble member, so they train at 1e-4, checked every 2 steps.
        MemberConfig("gemma-sft", "gemma3-270m", data_seed=11, max_steps=30, eval_every=3, learning_rate=3e-5),
        MemberConfig(
            "smol-a", DEFAULT_CHAT_MODEL, data_seed=21, max_steps=12, min_steps=2, eval_every=2, learning_rate=1e-4
        ),
        MemberConfig(
            "smol-b", DEFAULT_CHAT_MODEL, data_seed=31, max_steps=12, min_steps=2, eval_every=2, learning_rate=1e-4
        ),
    ]


@dataclass
class EnsembleConfig:
    """A scale-matched ensemble for cross-model EU (``agentkit.uncertainty.ensemble``): each member is fine-tuned
    on its own suite questions until its greedy dev accuracy is within ``tolerance`` of the reference model's,
    then saved under models/<name> and listed in ensemble.json (``uncertainty generate --models @ensemble.json``).

    reference: the model whose answers are judged (not trained). members: see MemberConfig. suites: the suites
    trained and matched on, comma-separated (agentkit.data.suites). train_questions: per suite and member.
    dev_questions / dev_seed: the dev set per suite (its seed differs from every member's data_seed and from the
    experiment's seed 0). tolerance: |member − reference| dev accuracy at which training stops. eval_every: SFT
    steps between dev evaluations (each saves a checkpoint, so a run resumes from the last one). max_tokens:
    answer tokens at evaluation. few_shot: the worked examples before each question, as generate shows them.
    """

    reference: ModelName = DEFAULT_CHAT_MODEL
    members: Annotated[list[MemberConfig], at.MinLen(1)] = field(default_factory=_default_members)
    suites: str = "arithmetic-easy,multihop-open"
    train_questions: PosInt = 400
    dev_questions: PosInt = 50
    dev_seed: int = 500
    tolerance: Fraction = 0.04
    eval_every: PosInt = 20
    max_tokens: PosInt = 24
    few_shot: bool = True

    def problems(self) -> list[str]:
        from agentkit.data.suites import SUITE_NAMES

        out = [f"suites: unknown suite {s!r}" for s in self._suites() if s not in SUITE_NAMES]
        names = [m.name for m in self.members]
        out += [f"members: the name {n!r} is used twice" for n in set(names) if names.count(n) > 1]
        seeds = [m.data_seed for m in self.members if m.max_steps]
        out += [
            f"members: data_seed {s} is shared: members must train on disjoint questions"
            for s in set(seeds)
            if seeds.count(s) > 1
        ]
        out += [
            f"members.{m.name}.data_seed: {m.data_seed} is the dev seed"
            for m in self.members
            if m.data_seed == self.dev_seed
        ]
        out += [
            f"members.{m.name}.data_seed: 0 is the experiment's seed"
            for m in self.members
            if m.data_seed == 0 and m.max_steps
        ]
        out += [
            f"members.{m.name}: min_steps {m.min_steps} > max_steps {m.max_steps}"
            for m in self.members
            if m.min_steps > m.max_steps
        ]
        return out

    def _suites(self) -> list[str]:
        return [s.strip() for s in self.suites.split(",") if s.strip()]
