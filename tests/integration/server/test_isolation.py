"""Two users of one served agent never meet in a python session: the real server on loopback, the real kernel
sandbox, the official openai client. The model is scripted, because what is under test is what model-written code
can reach, and the attacker writes that code (through the prompt) in the real world too."""

import threading

import openai
import pytest

from agentkit.server import create_app
from agentkit.testing.scripted import ScriptedEngine
from agentkit.testing.servers import serve_in_thread
from agentkit.tools.python import PythonTool
from agentkit.tools.sandbox import SandboxConfig

# Each user's code first reports every trace of anyone it can see (globals, files in the writable places), then
# leaves its own: a global and a file in each place. The questions name the users by words the code does not hold
# (the scripted engine finds its place in the conversation after the last mention of the question's key).
PROBE = (
    "<python>import glob\n"
    "print('SEEN', [k for k in globals() if k[:3] == 'cn_'] + glob.glob('cn-*') + glob.glob('/tmp/cn-*'))\n"
    "cn_{who} = 77\n"
    "for d in '.', '/tmp': open(d + '/cn-{who}', 'w').write('77')\n</python>"
)
USERS = {"alice": "user one", "bob": "user two"}
SCRIPT = {key: [PROBE.format(who=who), "<answer>done</answer>"] for who, key in USERS.items()}


@pytest.fixture(scope="module")
def served():
    tool = PythonTool(SandboxConfig(pool_size=2, wall_s=10))
    app = create_app(ScriptedEngine(SCRIPT), "scripted", api_key="sk-test", tools={"python": tool})
    with serve_in_thread(app) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0), tool
    tool.close()


def _ask(client, who: str, stream: bool) -> str:
    """What the user's code saw (the tool output of the agent's trace)."""
    kw = dict(model="agentkit/tir", max_tokens=300, messages=[{"role": "user", "content": f"{USERS[who]}: go"}])
    if stream:
        chunks = list(client.chat.completions.create(stream=True, **kw))
        events = [(c.model_extra or {}).get("agentkit") for c in chunks]
        outputs = [e["output"] for e in events if e and e.get("type") == "tool"]
    else:
        trace = client.chat.completions.create(**kw).model_extra["agentkit"][0]["trace"]
        outputs = [s["text"] for s in trace if s["kind"] == "tool"]
    assert len(outputs) == 1 and "SEEN" in outputs[0], outputs
    return outputs[0]


def test_two_users_alternating_never_see_each_other(served):
    client, tool = served
    for i in range(100):  # 200 requests, alternating; every third one streamed
        for k, who in enumerate(("alice", "bob")):
            out = _ask(client, who, stream=(2 * i + k) % 3 == 0)
            assert "SEEN []" in out, f"round {i}, {who} saw: {out}"
    assert not tool.sandbox._sessions  # every request's session was closed when it ended


def test_concurrent_users_never_see_each_other(served):
    client, tool = served
    seen, errors = [], []

    def user(who):
        try:
            for i in range(10):
                seen.append(_ask(client, who, stream=i % 2 == 0))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=user, args=(w,)) for w in ("alice", "bob", "alice", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(seen) == 40
    assert all("SEEN []" in out for out in seen), [o for o in seen if "SEEN []" not in o]
    assert not tool.sandbox._sessions
