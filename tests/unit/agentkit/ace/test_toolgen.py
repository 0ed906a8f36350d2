"""The tool-using generator: the playbook goes into the agent's system prompt, the code runs in the real python
sandbox, the answer comes from ``<answer>``, the bullets used are the ids the turns cite, and the reflector reads
the trajectory (what the code printed) as the reasoning."""

import pytest

from agentkit.ace.playbook import Bullet, Playbook
from agentkit.ace.roles import Sample
from agentkit.ace.toolgen import ToolGenerator
from agentkit.agent.loop import TIR_SYSTEM_PROMPT, AgentConfig
from agentkit.data.tasks import Task
from agentkit.engines.base import SamplingParams
from agentkit.testing.scripted import ScriptedEngine
from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig

SCRIPT = {
    "Convert 12 miles to kilometres.": [
        'As [calc-00001] says: <python>print(f"{12 * 1.609344:.2f} km")</python>',
        "<answer>19.31 km</answer>",
    ],
    "Convert 3 feet to metres.": ["<python>print(3 * 0.3048 +)</python>", "<answer>0.91</answer>"],
}


@pytest.fixture(scope="module")
def python():
    tool = PythonTool(SandboxConfig(pool_size=1))
    yield tool
    tool.close()


def test_the_tool_generator_runs_the_agent_with_the_playbook_and_reads_its_citations(python):
    pb = Playbook()
    b = Bullet(pb.new_id("FORMULAS & CALCULATIONS"), "FORMULAS & CALCULATIONS", "A mile is 1.609344 km.")
    pb.bullets[b.id] = b
    engine = ScriptedEngine(SCRIPT)
    gen = ToolGenerator(
        engine,
        [python],
        AgentConfig(max_turns=3, sampling=SamplingParams(max_tokens=256, temperature=0.0, seed=0, entropy=True)),
    )  # bytes: the tiny tokenizer
    tasks = [
        Task("u1", "Convert 12 miles to kilometres.", "19.31 km", "", "exact"),
        Task("u2", "Convert 3 feet to metres.", "0.91 m", "", "exact"),
    ]
    samples = [Sample(t) for t in tasks]
    gen.answer(samples, [pb.to_text()] * 2, known=set(pb.bullets) | {"err-00009"})
    ok, bad = samples
    assert ok.answer == "19.31 km" and ok.bullet_ids == ["calc-00001"] and "<result>\n19.31 km" in ok.reasoning
    assert bad.answer == "0.91" and bad.bullet_ids == [] and "SyntaxError" in bad.reasoning  # execution feedback
    assert ok.context == pb.to_text()
    system = gen.system(pb.to_text())
    assert system.startswith(TIR_SYSTEM_PROMPT) and "[calc-00001]" in system and "cite" in system
    assert "cite" not in gen.system("a cheatsheet", cite=False) and gen.system("") == TIR_SYSTEM_PROMPT
    # a call per model turn (two each), prompt tokens include what earlier turns and results added
    assert gen.stats.calls == 4 and gen.stats.completion_tokens > 0
    assert gen.stats.prompt_tokens > 4 * len(engine.encode([{"role": "system", "content": system}]))
    assert len(engine.calls) == 2  # both trajectories in one batched engine call per turn


def test_notes_on_a_previous_attempt_reach_the_system_prompt():
    gen = ToolGenerator(ScriptedEngine(SCRIPT), [], AgentConfig())
    assert "Notes on your previous attempt at this question:\nround to two decimals" in gen.system(
        "", "round to two decimals"
    )
