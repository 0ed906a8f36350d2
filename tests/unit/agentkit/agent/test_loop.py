"""The agent loop on a scripted engine with the real sandbox and search tools."""

import time

import pytest

from agentkit.agent import AgentConfig, from_dataset, load_jsonl, rollout, save_jsonl, to_dataset
from agentkit.engines.base import SamplingParams
from agentkit.testing.scripted import ScriptedEngine
from agentkit.tools.base import ToolResult
from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig

SCRIPT = {
    "17 x 23": ["I will compute. <python>print(17 * 23)</python>", "So it is <answer>391</answer> done"],
    "no tools": ["Easy: <answer>4</answer>"],
    "two steps": ["<python>x = 6</python>", "<python>print(x * 7)</python>", "<answer>42</answer>"],
    "broken": ["<python></python>", "<answer>gave up</answer>"],
    "loops": ["<python>print(1)</python>"],
    "silent": ["I have nothing to add."],
}


@pytest.fixture(scope="module")
def python_tool():
    tool = PythonTool(SandboxConfig(pool_size=2, cpu_s=2, wall_s=5))
    yield tool
    tool.close()


def test_tool_call_then_answer(python_tool):
    eng = ScriptedEngine(SCRIPT)
    (t,) = rollout(eng, [{"id": "a", "question": "What is 17 x 23?"}], [python_tool])
    assert t.finish == "answer" and t.answer == "391" and t.tool_calls == 1
    kinds = [s.kind for s in t.segments]
    assert kinds == ["model", "tool", "model"]
    assert t.segments[1].text == "\n<result>\n391\n</result>\n" and t.segments[1].ok
    assert t.segments[0].text.endswith("</python>") and t.segments[2].text.endswith("</answer>")
    # the mask marks exactly the tool tokens as 0 and lines up with the ids
    assert len(t.mask) == len(t.completion_ids) == len(t.entropies)
    tool_len = len(t.segments[1].token_ids)
    assert t.mask.count(0) == tool_len and t.entropies.count(None) == tool_len
    # the next turn was prompted with exactly prompt + everything so far
    full = eng.tokenizer.decode(t.prompt_ids + t.completion_ids)
    assert full.split("<|im_start|>assistant")[-1].count("<result>") == 1


def test_sessions_keep_python_state_per_trajectory(python_tool):
    (t,) = rollout(ScriptedEngine(SCRIPT), ["two steps"], {"python": python_tool})
    assert t.answer == "42" and "42" in t.segments[3].text


def test_batched_turns_and_finish_reasons(python_tool):
    eng = ScriptedEngine(SCRIPT)
    trajs = rollout(
        eng,
        ["17 x 23", "no tools", "broken", "loops", "silent"],
        [python_tool],
        AgentConfig(max_turns=3, max_tool_calls=2),
    )
    by = {t.task_id: t for t in trajs}
    assert eng.calls[0] == 5  # one engine call per turn for all active trajectories
    assert by["task-1"].finish == "answer" and by["task-1"].tool_calls == 0
    assert "Error: empty <python> call" in by["task-2"].segments[1].text and by["task-2"].answer == "gave up"
    assert by["task-3"].finish == "max_tool_calls" and by["task-3"].tool_calls == 2
    assert by["task-4"].finish == "no_call"


def test_token_and_turn_limits(python_tool):
    (t,) = rollout(ScriptedEngine(SCRIPT), ["loops"], [python_tool], AgentConfig(max_turns=2, max_tool_calls=9))
    assert t.finish == "max_turns" and t.meta["turns"] == 2
    (t,) = rollout(ScriptedEngine(SCRIPT), ["17 x 23"], [python_tool], AgentConfig(max_total_tokens=20))
    assert t.finish == "max_tokens" and len(t.completion_ids) <= 20


def test_samples_of_one_question_differ(tiny_engine):
    """The n trajectories of a question are separate prompts: each draws with its own seed, reproducibly."""
    cfg = AgentConfig(max_turns=1, sampling=SamplingParams(n=4, temperature=1.0, max_tokens=12, seed=3, entropy=True))
    trajs = rollout(tiny_engine, ["What is 2 + 2?"], [], cfg)
    assert len({tuple(t.completion_ids) for t in trajs}) > 1
    again = rollout(tiny_engine, ["What is 2 + 2?"], [], cfg)
    assert [t.completion_ids for t in again] == [t.completion_ids for t in trajs]


def test_per_tool_budget(python_tool):
    cfg = AgentConfig(max_turns=4, max_tool_calls=9, max_calls_per_tool={"python": 1})
    (t,) = rollout(ScriptedEngine(SCRIPT), ["two steps"], [python_tool], cfg)
    assert t.finish == "max_tool_calls" and t.tool_calls == 1
    (t,) = rollout(ScriptedEngine(SCRIPT), ["two steps"], [python_tool], AgentConfig(max_calls_per_tool={"python": 2}))
    assert t.finish == "answer" and t.tool_calls == 2


def test_tool_calls_run_concurrently():
    class Slow:
        name, description, parameters = "python", "sleeps", {"type": "object"}

        def __call__(self, code=""):
            time.sleep(0.5)
            return ToolResult("done")

    start = time.perf_counter()
    trajs = rollout(ScriptedEngine(SCRIPT), ["17 x 23"] * 6, [Slow()], AgentConfig(tool_workers=8))
    assert all(t.tool_calls == 1 for t in trajs) and time.perf_counter() - start < 1.5


def test_n_samples_and_serialisation(python_tool, tmp_path):
    trajs = rollout(
        ScriptedEngine(SCRIPT),
        ["17 x 23", "no tools"],
        [python_tool],
        AgentConfig(sampling=SamplingParams(n=2, temperature=0.0, max_tokens=256, seed=0, entropy=True)),
    )
    assert [(t.task_id, t.meta["sample"]) for t in trajs] == [
        ("task-0", 0),
        ("task-0", 1),
        ("task-1", 0),
        ("task-1", 1),
    ]
    save_jsonl(trajs, tmp_path / "t.jsonl")
    back = load_jsonl(tmp_path / "t.jsonl")
    assert [t.to_dict() for t in back] == [t.to_dict() for t in trajs]
    ds = to_dataset(trajs)
    assert ds.num_rows == 4 and ds[0]["mask"] == trajs[0].mask
    assert [t.to_dict() for t in from_dataset(ds)] == [t.to_dict() for t in trajs]


def test_prefix_cache_gives_identical_rollouts(python_tool):
    """On a real (tiny) model, turns continued from stored keys/values equal turns re-encoded from scratch."""
    from agentkit.engines.hf import HFEngine

    reuse = HFEngine("tiny-random", max_batch_size=8)
    fresh = HFEngine(reuse.model, reuse.tokenizer, prefix_cache_mb=0)
    cfg = AgentConfig(max_turns=3, sampling=SamplingParams(max_tokens=12, temperature=0, n=2, seed=0, entropy=True))
    tasks = ["first task", "second, longer task text"]
    a, b = rollout(reuse, tasks, [python_tool], cfg), rollout(fresh, tasks, [python_tool], cfg)
    assert [t.completion_ids for t in a] == [t.completion_ids for t in b]
    assert all(t.meta["turns"] == 3 for t in a) and reuse.prefix_cache.hits >= 8
    for x, y in zip(a, b):
        for sx, sy in zip(x.segments, y.segments):
            assert sx.logprobs == pytest.approx(sy.logprobs, abs=1e-4)


def test_json_style_tool_calls(python_tool):
    script = {
        "json please": [
            'Let me compute. <tool_call>{"name": "python", "arguments": {"code": "print(17 * 23)"}}</tool_call>',
            '<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>'
            '<tool_call>{"name": "python", "arguments": {"code": "print(2)"}}</tool_call>',
            "The result is 391.",
        ],
        "bad json": ['<tool_call>{"name": "python", "arguments": </tool_call>', "I give up."],
    }
    eng = ScriptedEngine(script)
    good, bad = rollout(eng, ["json please", "bad json"], [python_tool], AgentConfig(style="json", max_turns=4))
    assert '"name": "python"' in eng.tokenizer.decode(good.prompt_ids)  # the tool schema is in the system prompt
    # the second turn stops at its first closing tag, so it makes one call
    assert good.finish == "answer" and good.answer == "The result is 391." and good.tool_calls == 2
    assert good.segments[1].text == "\n<tool_response>\n391\n</tool_response>\n"
    assert good.segments[3].text == "\n<tool_response>\n1\n</tool_response>\n"
    assert bad.segments[1].text.startswith("\n<tool_response>\nError: the tool call is not valid JSON")
    assert bad.answer == "I give up."
    with pytest.raises(ValueError, match="style"):
        rollout(eng, ["json please"], [python_tool], AgentConfig(style="xml"))


def test_chat_tool_turns_follow_the_chat_template(python_tool):
    """tool_turns="chat": the model's turn ends after its call, the result comes back as the template's tool
    message, the answer is a new assistant turn; the ids are the template's rendering of that conversation."""
    call = '<tool_call>{"name": "python", "arguments": {"code": "print(17 * 23)"}}</tool_call><|im_end|>'
    eng = ScriptedEngine({"json please": [call, "The result is 391.<|im_end|>"]})
    cfg = AgentConfig(style="json", tool_turns="chat", max_turns=4)
    (t,) = rollout(eng, ["json please"], [python_tool], cfg)
    assert (
        t.finish == "answer"
        and t.tool_calls == 1
        and t.mask
        == [1] * len(t.segments[0].token_ids) + [0] * len(t.segments[1].token_ids) + [1] * len(t.segments[2].token_ids)
    )
    assert t.segments[1].text == "\n<|im_start|>tool\n391\n<|im_end|>\n<|im_start|>assistant\n"
    chat = t.prompt + [
        {"role": "assistant", "content": call.removesuffix("<|im_end|>")},
        {"role": "tool", "name": "python", "content": "391\n"},
    ]
    n = len(t.prompt_ids) + len(t.segments[0].token_ids) + len(t.segments[1].token_ids)
    assert (t.prompt_ids + t.completion_ids)[:n] == eng.encode(chat)
    for bad in (AgentConfig(tool_turns="chat"), AgentConfig(style="json", tool_turns="turns")):
        with pytest.raises(ValueError, match="tool_turns"):
            rollout(eng, ["json please"], [python_tool], bad)


def test_tool_turn_suffix_errors_and_pieces(tiny_engine):
    from agentkit.agent.loop import _split_at
    from agentkit.engines.base import tool_turn_suffix
    from agentkit.errors import AgentkitError

    text = tool_turn_suffix(tiny_engine.tokenizer, [("search", "A"), ("python", "B")])
    assert text == "<|im_end|>\n<|im_start|>tool\nA<|im_end|>\n<|im_start|>tool\nB<|im_end|>\n<|im_start|>assistant\n"
    pieces = _split_at(text, ["A", "B"])
    assert "".join(pieces) == text and pieces[1].startswith("B") and pieces[0].endswith("tool\n")
    assert "".join(_split_at(text, ["A", "missing"])) == text

    class NoTools:  # like Gemma 3's template, which raises on roles other than user and model
        def apply_chat_template(self, chat, **_):
            raise ValueError("Conversation roles must alternate user/assistant/user/assistant/...")

    with pytest.raises(AgentkitError, match="cannot render tool messages"):
        tool_turn_suffix(NoTools(), [("search", "A")])


def test_few_shot_examples_sit_between_system_and_question(python_tool):
    shots = [{"role": "user", "content": "What is 1+1?"}, {"role": "assistant", "content": "<answer>2</answer>"}]
    (t,) = rollout(ScriptedEngine(SCRIPT), ["17 x 23"], [python_tool], AgentConfig(examples=shots))
    assert [m["role"] for m in t.prompt] == ["system", "user", "assistant", "user"]
    assert t.prompt[1:3] == shots and t.answer == "391"


def test_wall_time_limit_is_opt_in(python_tool):
    """No wall-time limit unless asked (a batch job on a busy machine keeps its trajectories); with one, the
    trajectories still running when it passes end as wall_time."""
    assert AgentConfig().max_wall_s == float("inf")
    (t,) = rollout(ScriptedEngine(SCRIPT), ["17 x 23"], [python_tool], AgentConfig(max_wall_s=0.0))
    assert t.finish == "wall_time" and not t.segments
