"""Config of the uncertainty_ensemble recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import annotated_types as at

from agentkit.config import Fraction, ModelName, NonNegInt, PosFloat, PosInt, option
from agentkit.models.catalog import DEFAULT_CHAT_MODEL


@dataclass
class MemberConfig:
    """One ensemble member: a model fine-tuned on its own questions until it matches the reference."""

    name: Annotated[str, at.MinLen(1)] = option(help="its key in saved generations and its folder under models/")
    base: ModelName = option(DEFAULT_CHAT_MODEL, "the model it starts from")
    data_seed: int = option(
        1, "the seed of its training questions (members with different seeds get disjoint questions)"
    )
    max_steps: NonNegInt = option(120, "SFT steps at most (0: the base as it is)")
    min_steps: NonNegInt = option(0, "steps before dev accuracy may stop training")
    eval_every: PosInt | None = option(None, "steps between its dev checks (None: the recipe's eval_every)")
    learning_rate: PosFloat = option(1e-4, "the SFT learning rate")
    lora_r: NonNegInt = option(16, "LoRA rank (0: full fine-tuning)")
    batch_size: PosInt = option(8, "questions per SFT step")
    train_seed: int = option(0, "the SFT run's seed (data order, LoRA init)")


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
    then saved under models/<name> and listed in ensemble.json (``uncertainty generate --models @ensemble.json``)."""

    reference: ModelName = option(DEFAULT_CHAT_MODEL, "the model whose answers are judged (not trained)")
    members: Annotated[list[MemberConfig], at.MinLen(1)] = option(
        _default_members(), "the members, each a mapping of MemberConfig fields (name required)"
    )
    suites: str = option(
        "arithmetic-easy,multihop-open", "suites trained and matched on, comma-separated (agentkit.data.suites)"
    )
    train_questions: PosInt = option(400, "training questions per suite and member")
    dev_questions: PosInt = option(50, "dev questions per suite")
    dev_seed: int = option(
        500, "the dev set's seed (it must differ from every member's data_seed and the experiment's 0)"
    )
    tolerance: Fraction = option(0.04, "|member − reference| dev accuracy at which a member stops training")
    eval_every: PosInt = option(20, "SFT steps between dev evaluations (each saves a checkpoint, the resume point)")
    max_tokens: PosInt = option(24, "answer tokens at evaluation")
    few_shot: bool = option(True, "show the worked examples before each question, as uncertainty generate does")

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
