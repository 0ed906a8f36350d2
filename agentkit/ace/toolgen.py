"""ACE's generator as a tool-using agent: the playbook goes into the agent loop's system prompt.

``ToolGenerator`` answers like ``Generator`` (``answer(samples, contexts, notes, known)``) but runs
``agentkit.agent.continue_rollout`` with a tool (the python sandbox for arithmetic and unit conversions), so a
strategy such as "convert with ``print(f'{x * 1.609344:.2f} km')``" is something the model can act on. What the
reflector then reads as the generator's reasoning is the trajectory itself: the code it ran and what came back,
errors included (the execution feedback of the label-free variant). The bullets used are the ids the turns cite.
"""

from __future__ import annotations

from dataclasses import replace

from agentkit.ace.roles import RoleStats, Sample, cited_ids
from agentkit.agent.loop import AgentConfig, agent_prompt, continue_rollout
from agentkit.agent.trajectory import Trajectory
from agentkit.tools.base import Tool

CITE = (
    "A playbook of strategies learned from earlier questions follows. Use the bullets that apply and cite the ids "
    "of those you use in square brackets, e.g. [calc-00001]."
)


class ToolGenerator:
    """``answer`` runs one trajectory per sample, all in one batched rollout; ``stats`` counts each model turn as
    a call (prompt tokens: everything the turn was conditioned on)."""

    def __init__(
        self, engine, tools: dict[str, Tool] | list[Tool], agent: AgentConfig, max_reasoning_chars: int = 1200
    ):
        self.engine = engine
        self.tools = tools if isinstance(tools, dict) else {t.name: t for t in tools}
        self.agent = agent
        self.max_reasoning_chars = max_reasoning_chars
        self.stats = RoleStats()

    def system(self, playbook: str, notes: str = "", cite: bool = True) -> str:
        """The agent's system prompt with the playbook (``cite``: and the ask to cite its ids; off for a context
        without ids, such as Dynamic Cheatsheet's)."""
        parts = [self.agent.system_prompt]
        if playbook.strip():
            parts += [CITE, f"Playbook:\n{playbook}"] if cite else [f"Cheatsheet from earlier questions:\n{playbook}"]
        if notes:
            parts.append(f"Notes on your previous attempt at this question:\n{notes}")
        return "\n\n".join(parts)

    def answer(
        self,
        samples: list[Sample],
        contexts: list[str],
        notes: list[str] | None = None,
        known: set[str] | None = None,
        draws: list[int] | None = None,
    ) -> None:
        """``Generator.answer``'s interface; ``draws``: each trajectory's sample index (its seed), so repeated
        answers to one question differ."""
        notes = notes or [""] * len(samples)
        draws = draws or [0] * len(samples)
        trajs = []
        for s, c, n, d in zip(samples, contexts, notes, draws):
            cfg = replace(self.agent, system_prompt=self.system(c, n, cite=known is not None))
            prompt = agent_prompt(s.task.question, self.tools, cfg)
            trajs.append(Trajectory(s.task.id, prompt, self.engine.encode(prompt), meta={"sample": d}))
        continue_rollout(self.engine, trajs, self.tools, self.agent)
        for s, c, t in zip(samples, contexts, trajs):
            self._count(t)
            text = t.text
            s.context = c
            # the end of a long trajectory is what decided the answer: keep that part for the reflector
            s.reasoning = text if len(text) <= self.max_reasoning_chars else "…" + text[-self.max_reasoning_chars :]
            s.answer = (t.answer or "").strip()
            if known is not None:
                s.bullet_ids = cited_ids(text, known)

    def _count(self, t: Trajectory) -> None:
        seen = len(t.prompt_ids)
        for seg in t.segments:
            if seg.kind == "model":
                self.stats.calls += 1
                self.stats.prompt_tokens += seen
                self.stats.completion_tokens += len(seg.token_ids)
            seen += len(seg.token_ids)
