"""Config of the ace recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.ace.refine import RefineConfig
from agentkit.ace.roles import RoleConfig
from agentkit.config import NonNegInt, PosInt
from agentkit.engines import EngineConfig

Method = Literal["base", "dc", "ace_offline", "ace_online", "eval"]


@dataclass
class AceConfig:
    """ACE against the base prompt and a Dynamic-Cheatsheet baseline, with one model in every role.

    engine: the model of every role (generator, reflector, curator; DC's rewriter). suite: units (conversions in a
    house style that only feedback teaches), arithmetic (suite (a): products, bracketed chains, word problems,
    linear equations) or arithmetic-easy. train_questions / val_questions / test_questions: the splits (test is
    held out; train and val are drawn with seed + 1000 and + 2000).
    methods: base (empty context), dc (the cheatsheet rewritten each batch), ace_offline (epochs over train,
    the best playbook version on val kept, then test), ace_online (test in windows: answer a window, then adapt
    on it), eval (eval-only: the test with ``playbook``, a playbook file, JSON or text, never updated). seeds:
    one run per method and seed (the training order and training questions). labels: the reflector (DC's
    rewriter) sees the reference (False: label-free, the checker's verdict only).
    batch_size: questions per step, their deltas merged as one batch. epochs, eval_every: offline training
    (validation every eval_every steps). window: online window. max_rounds: reflections per wrong answer.
    top_k: 0 sends the whole playbook, k > 0 the k nearest bullets. tool: the generator is an agent with the
    suite's tool (python: it computes instead of guessing digits), the playbook in its system prompt; off, it
    answers in JSON. agent_turns, tokens_per_turn: its loop's limits. refine, roles: grow-and-refine and the
    roles' JSON settings (the reflector's and curator's, and the generator's without a tool).
    """

    engine: EngineConfig = field(default_factory=EngineConfig)
    suite: Literal["units", "arithmetic", "arithmetic-easy"] = "units"
    train_questions: PosInt = 64
    val_questions: PosInt = 24
    test_questions: PosInt = 48
    methods: Annotated[list[Method], at.MinLen(1)] = field(
        default_factory=lambda: ["base", "dc", "ace_offline", "ace_online"]
    )
    seeds: Annotated[list[int], at.MinLen(1)] = field(default_factory=lambda: [0, 1, 2])
    labels: bool = True
    batch_size: PosInt = 8
    epochs: PosInt = 1
    eval_every: NonNegInt = 4
    window: PosInt = 16
    max_rounds: PosInt = 1
    top_k: NonNegInt = 0
    tool: bool = True
    agent_turns: PosInt = 3
    tokens_per_turn: PosInt = 64
    refine: RefineConfig = field(default_factory=lambda: RefineConfig(budget_tokens=1500))
    roles: RoleConfig = field(default_factory=RoleConfig)
    playbook: str | None = None
