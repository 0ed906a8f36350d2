"""The Dynamic Cheatsheet baseline (DC-Cu, Suzgun et al. 2025), the one ACE is measured against: after each batch
one model call rewrites the whole cheatsheet from the old one and the batch's outcomes. Rewrites are where
context collapse comes from (ACE §2.2: 18,282 tokens to 122), so the recipe tracks the cheatsheet's size next to
the playbook's.

The generator is ACE's (same prompt, same JSON), with the cheatsheet in the playbook's place, so the two differ
only in how the context evolves.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentkit.ace.adapt import Feedback, _mean, checker_feedback, judge, summary
from agentkit.ace.roles import Generator, RoleConfig, RoleStats, Sample
from agentkit.ace.toolgen import ToolGenerator

REWRITE_SYSTEM = (
    "You keep a cheatsheet of strategies for answering questions of one kind. Given the current cheatsheet and "
    "how the latest answers went, write the complete updated cheatsheet: keep what helps, fix what misled, add "
    "what was missing. Reply with the cheatsheet only."
)


class Cheatsheet:
    """``answer(tasks)``, ``step(tasks, step)``, ``evaluate(tasks)`` like ``Adapter``; ``text`` is the
    cheatsheet (rewritten whole each step, in at most ``max_tokens``: give it the playbook's budget, so the two
    have the same room)."""

    def __init__(
        self,
        generator: Generator | ToolGenerator,
        engine,
        cfg: RoleConfig | None = None,
        labels: bool = True,
        feedback: Feedback = checker_feedback,
        text: str = "",
        max_tokens: int | None = None,
    ):
        self.generator, self.engine = generator, engine
        self.cfg = cfg or RoleConfig()
        self.labels, self.feedback = labels, feedback
        self.text = text
        self.max_tokens = max_tokens or self.cfg.sampling.max_tokens
        self.rewriter = RoleStats()

    @property
    def usage(self) -> dict[str, dict[str, int]]:
        return {"generator": vars(self.generator.stats).copy(), "rewriter": vars(self.rewriter).copy()}

    def answer(self, tasks: list[Any], feedback: Feedback = checker_feedback) -> list[Sample]:
        """Answer with the cheatsheet and judge (default the checker: evaluation; ``step`` uses its feedback)."""
        samples = [Sample(t) for t in tasks]  # the generator records the context it answered with
        self.generator.answer(samples, [self.text] * len(samples))
        return judge(feedback, samples)

    def step(self, tasks: list[Any], step: int) -> dict[str, Any]:
        samples = self.answer(tasks, self.feedback)
        lines = []
        for s in samples:
            verdict = {True: "correct", False: "wrong", None: "not judged"}[s.correct]
            ref = f"; reference: {s.task.answer}" if self.labels else ""
            lines.append(f"- Q: {s.task.question}\n  A: {s.answer or '(none)'} ({verdict}{ref}) {s.feedback}".rstrip())
        body = f"Current cheatsheet:\n{self.text or '(empty)'}\n\nLatest answers:\n" + "\n".join(lines)
        chat = [{"role": "system", "content": REWRITE_SYSTEM}, {"role": "user", "content": body}]
        params = replace(self.cfg.sampling, max_tokens=self.max_tokens, seed=self.cfg.sampling.seed + step)
        (c,) = self.engine.generate([chat], params)[0]
        self.rewriter.calls += 1
        self.rewriter.prompt_tokens += c.prompt_tokens
        self.rewriter.completion_tokens += c.completion_tokens
        self.text = c.text.strip()
        return {"step": step, "accuracy_first": _mean([s.correct for s in samples]), "chars": len(self.text)}

    def evaluate(self, tasks: list[Any]) -> dict[str, float]:
        return summary(self.answer(tasks))
