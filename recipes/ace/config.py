"""Config of the ace recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

import annotated_types as at

from agentkit.ace.refine import RefineConfig
from agentkit.ace.roles import RoleConfig
from agentkit.agent.loop import AgentConfig
from agentkit.config import ExistingPath, NonNegInt, PosInt, option
from agentkit.engines import EngineConfig, SamplingParams
from agentkit.engines.config import HFConfig

Method = Literal["base", "dc", "ace_offline", "ace_online", "eval"]


@dataclass
class AceConfig:
    """ACE against the base prompt and a Dynamic-Cheatsheet baseline, with one model in every role (generator,
    reflector, curator; DC's rewriter). Test questions are held out; train and val questions are drawn with seeds
    1000 + seed and 2000, minus any that are test questions."""

    RENAMED: ClassVar[dict[str, str]] = {
        "agent_turns": "agent.max_turns",
        "tokens_per_turn": "agent.sampling.max_tokens",
    }

    engine: EngineConfig = option(HFConfig(), "the engine of every role (kind, model and the kind's options)")
    suite: Literal["units", "arithmetic", "arithmetic-easy"] = option(
        "units",
        "units: conversions in a house style only feedback teaches; arithmetic: suite (a) products, bracketed "
        "chains, word problems, linear equations; arithmetic-easy: its easier kinds",
    )
    train_questions: PosInt = option(64, "questions drawn for training (before the held-out ones are removed)")
    val_questions: PosInt = option(24, "validation questions: ace_offline keeps the playbook version best on them")
    test_questions: PosInt = option(48, "held-out test questions every method is scored on")
    methods: Annotated[list[Method], at.MinLen(1)] = option(
        ["base", "dc", "ace_offline", "ace_online"],
        "base (empty context), dc (the cheatsheet rewritten each batch), ace_offline (epochs over train, then "
        "test), ace_online (test in windows: answer a window, then adapt on it), eval (the test with the playbook "
        "file, never updated)",
    )
    seeds: Annotated[list[int], at.MinLen(1)] = option(
        [0, 1, 2], "one run per method and seed (training order and questions)"
    )
    labels: bool = option(
        True,
        "the reflector (DC's rewriter) sees the reference and the checker judges; false: label-free, judged by label_free",
    )
    label_free: Literal["self_consistency", "checker"] = option(
        "self_consistency",
        "labels=false's judge: self_consistency (agreement with consistency_samples fresh answers; reads no "
        "reference) or checker (the task's scorer: it reads the reference, as a unit test would)",
    )
    consistency_samples: Annotated[int, at.Interval(ge=1, le=16)] = option(
        4, "label-free self-consistency: fresh answers each answer is compared with"
    )
    consistency_temperature: Annotated[float, at.Interval(gt=0, le=2)] = option(
        0.7, "label-free self-consistency: the fresh answers' sampling temperature"
    )
    batch_size: PosInt = option(8, "questions per step; their deltas are merged as one batch")
    epochs: PosInt = option(1, "ace_offline: passes over the training questions")
    eval_every: NonNegInt = option(4, "ace_offline: validate every this many steps (0: only at the end)")
    window: PosInt = option(16, "ace_online: test questions answered before each adaptation")
    max_rounds: Annotated[int, at.Interval(ge=1, le=10)] = option(
        3, "reflections per wrong answer, each but the last followed by a new answer (official code: 3; paper: up to 5)"
    )
    top_k: NonNegInt = option(0, "0 sends the whole playbook to the generator, k > 0 its k nearest bullets")
    tool: bool = option(
        True,
        "the generator is an agent with the suite's tool (python computes instead of guessing digits), the "
        "playbook in its system prompt; false: it answers in JSON",
    )
    agent: AgentConfig = option(
        AgentConfig(
            max_turns=3,
            max_total_tokens=384,
            sampling=SamplingParams(max_tokens=64, temperature=0.0, seed=0, entropy=True),
        ),
        "the tool-using generator's loop (tool: true); the suite's few-shot examples are used when examples is empty",
    )
    refine: RefineConfig = option(
        RefineConfig(budget_tokens=1500), "grow-and-refine: the playbook's budget and de-duplication"
    )
    roles: RoleConfig = option(RoleConfig(), "how the roles sample their JSON answers")
    playbook: ExistingPath = option(None, "method eval: the playbook file (JSON or text) to test, never updated")

    def problems(self) -> list[str]:
        """Rules across fields (``agentkit.config.cross_checks``)."""
        if ("eval" in self.methods) != (self.playbook is not None):
            return ["methods: 'eval' and playbook go together (add --set playbook=FILE, or drop eval)"]
        return []
