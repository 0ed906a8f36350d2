"""Correct tool-integrated trajectories for SFT, generated from the seeded suites (no TIR SFT set is available
offline; users can bring Tool-Star-style trajectories instead).

Rules, per task:

- suite (a), default kinds (large numbers): one ``<python>print(EXPR)</python>`` call computing the answer, the
  sandbox's real output, then ``<answer>N</answer>``;
- suite (a), ``EASY_KINDS`` (small numbers): the answer directly, no call (a call there is unnecessary);
- suite (b): one ``<search>ENTITY</search>`` per hop of the question's chain, with the real BM25 results, then
  the answer.

Each trajectory is built token by token the way ``agentkit.agent.rollout`` records one (prompt ids from the chat
template, model segments, tool segments masked), and the last model segment ends with the end-of-turn token, so
the model learns to stop after answering.
"""

from __future__ import annotations

from typing import Any

from agentkit.agent.loop import AgentConfig, agent_prompt, result_texts
from agentkit.agent.trajectory import Segment, Trajectory
from agentkit.data.tasks import Task
from agentkit.engines.base import encode_prompt
from agentkit.tools.parsers import format_hermes_call, parse_answer, parse_tag_call


def plan(task: Task, titles: dict[str, str] | None = None) -> list[tuple[str, str | None]]:
    """The ideal turns of ``task``: ``[(model text, tool name or None), …]``; a tool turn ends with its call."""
    if task.metric == "numeric":
        if "expr" not in task.meta:  # the small-number kinds: answered without a tool
            return [(f"<answer>{task.answer}</answer>", None)]
        return [(f"<python>print({task.meta['expr']})</python>", "python"), (f"<answer>{task.answer}</answer>", None)]
    if "support" in task.meta and titles:
        hops = [(f"<search>{titles[d]}</search>", "search") for d in task.meta["support"]]
        return hops + [(f"<answer>{task.answer}</answer>", None)]
    raise ValueError(f"task {task.id}: no tool plan for metric {task.metric!r} without support documents")


def make_trajectories(
    tasks: list[Task],
    tokenizer,
    tools: dict[str, Any],
    titles: dict[str, str] | None = None,
    agent: AgentConfig | None = None,
    end_token: str | None = None,
) -> list[Trajectory]:
    """Run each task's plan with the real tools and record it as a ``Trajectory``, in the prompt and tool-call
    format ``agent`` gives the rollouts (tags by default; ``style="json"``: hermes calls and a plain answer, the
    results inline or, with ``tool_turns="chat"``, as the chat template's tool messages)."""
    cfg = agent or AgentConfig()
    end = end_token if end_token is not None else (tokenizer.eos_token or "")
    out = []
    for task in tasks:
        prompt = agent_prompt(task.question, tools, cfg)
        traj = Trajectory(task.id, prompt, encode_prompt(tokenizer, prompt), meta={"kind": task.kind, "sft": True})
        steps = plan(task, titles)
        for i, (text, tool) in enumerate(steps):
            call = parse_tag_call(text, tuple(tools)) if tool else None
            if cfg.style == "json":
                text = format_hermes_call(call) if call else parse_answer(text)
            if i == len(steps) - 1 or (call and cfg.tool_turns == "chat"):  # chat: each turn ends with its token
                text += end
            traj.segments.append(Segment("model", text, tokenizer(text, add_special_tokens=False).input_ids))
            if call is None:
                continue
            res = tools[tool](**call.arguments)
            if not res.ok:
                raise RuntimeError(f"task {task.id}: the planned {tool} call failed: {res.output[:200]}")
            (result,) = result_texts(tokenizer, [(traj, call)], [res], cfg)
            traj.segments.append(
                Segment(
                    "tool",
                    result,
                    tokenizer(result, add_special_tokens=False).input_ids,
                    tool=tool,
                    arguments=call.arguments,
                    ok=True,
                )
            )
        traj.answer, traj.finish = task.answer, "answer"
        out.append(traj)
    return out
