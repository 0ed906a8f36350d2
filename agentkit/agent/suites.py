"""A built-in suite ready for the agent loop: its tasks, the tool that solves them, and the few-shot examples that
show a model never tuned for tools the tag format (``TIR_EXAMPLES`` and friends). The one place a recipe or a
benchmark turns a suite name into a rollout's inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentkit.agent.loop import SEARCH_EXAMPLES, STEPS_EXAMPLES, TIR_EXAMPLES
from agentkit.data.multihop import MultiHopKB
from agentkit.data.suites import suite_tasks
from agentkit.data.tasks import Task
from agentkit.errors import AgentkitError, did_you_mean
from agentkit.tools.base import Tool
from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig
from agentkit.tools.search import SearchTool

# suite -> (tool, few-shot examples). The multi-hop suite needs its world's corpus, so it searches.
AGENT_SUITES: dict[str, tuple[str, list[dict[str, str]]]] = {
    "arithmetic": ("python", TIR_EXAMPLES),
    "arithmetic-easy": ("python", TIR_EXAMPLES),
    "steps": ("python", STEPS_EXAMPLES),
    "multihop": ("search", SEARCH_EXAMPLES),
    "units": ("python", TIR_EXAMPLES),
}


@dataclass
class AgentSuite:
    """``n`` tasks of one suite with its tool (closed by ``close``) and examples (empty when ``few_shot`` is off)."""

    name: str
    tasks: list[Task]
    tool: Tool
    examples: list[dict[str, str]]

    def close(self) -> None:
        self.tool.close()

    def __enter__(self) -> AgentSuite:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def agent_suite(
    name: str,
    n: int,
    seed: int = 0,
    *,
    few_shot: bool = True,
    kb: MultiHopKB | int = 0,
    top_k: int = 3,
    sandbox: SandboxConfig | None = None,
) -> AgentSuite:
    """Suite ``name`` (a key of ``AGENT_SUITES``) with its tool: the python sandbox (``sandbox``, default
    ``SandboxConfig()``) or search over the world ``kb`` (or the seed that builds it), ``top_k``
    results per query."""
    if name not in AGENT_SUITES:
        raise AgentkitError(f"suite {name!r} has no agent tool", did_you_mean(name, AGENT_SUITES))
    if isinstance(kb, int) and AGENT_SUITES[name][0] == "search":
        kb = MultiHopKB.build(kb)  # once, for the tasks and the tool's corpus
    tool, examples = suite_tool(name, kb, top_k=top_k, sandbox=sandbox)
    return AgentSuite(name, suite_tasks(name, n, seed, kb), tool, examples if few_shot else [])


def suite_tool(
    name: str, kb: MultiHopKB | int = 0, *, top_k: int = 3, sandbox: SandboxConfig | None = None
) -> tuple[Tool, list[dict[str, str]]]:
    """The tool that solves suite ``name`` (the caller closes it) and its few-shot examples."""
    if name not in AGENT_SUITES:
        raise AgentkitError(f"suite {name!r} has no agent tool", did_you_mean(name, AGENT_SUITES))
    tool_name, examples = AGENT_SUITES[name]
    if tool_name == "search":
        kb = MultiHopKB.build(kb) if isinstance(kb, int) else kb
        return SearchTool(kb.corpus(), top_k=top_k), list(examples)
    return PythonTool(sandbox), list(examples)
