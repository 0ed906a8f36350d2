"""agentkit.agent.suites: a suite comes with the tool that solves it and the examples that show its tag format."""

import pytest

from agentkit.agent.loop import SEARCH_EXAMPLES, STEPS_EXAMPLES, TIR_EXAMPLES
from agentkit.agent.suites import AGENT_SUITES, agent_suite, suite_tool
from agentkit.errors import AgentkitError
from agentkit.tools.sandbox import SandboxConfig


def test_multihop_searches_its_own_world():
    with agent_suite("multihop", 3, seed=1, kb=2, top_k=2) as s:
        assert s.tool.name == "search" and s.examples == SEARCH_EXAMPLES
        first_hop = s.tasks[0].meta["support"][0]
        assert first_hop in s.tool(s.tasks[0].question).output  # the gold document is among the results


def test_steps_run_in_the_sandbox_and_few_shot_can_be_off():
    with agent_suite("steps", 2, few_shot=False, sandbox=SandboxConfig(pool_size=1)) as s:
        assert s.tool.name == "python" and s.examples == [] and s.tool("print(6 * 7)").output.strip() == "42"
    with agent_suite("steps", 1, sandbox=SandboxConfig(pool_size=1)) as s:
        assert s.examples == STEPS_EXAMPLES
    assert set(AGENT_SUITES) == {"arithmetic", "arithmetic-easy", "steps", "units", "multihop"}


def test_suite_tool_gives_the_tool_alone():
    tool, examples = suite_tool("units", sandbox=SandboxConfig(pool_size=1))
    try:
        assert tool.name == "python" and examples == TIR_EXAMPLES
        assert tool('print(f"{12 * 1.609344:.2f} km")').output.strip() == "19.31 km"
    finally:
        tool.close()
    with pytest.raises(AgentkitError, match="no agent tool"):
        suite_tool("multihop-open")


def test_a_suite_without_a_tool_is_refused():
    with pytest.raises(AgentkitError, match="'multihop-open' has no agent tool"):
        agent_suite("multihop-open", 2)
