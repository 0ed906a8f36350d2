"""Serving that scales out (issue 44, item 3): several `agentkit serve` processes behind a load balancer answer a
request the same whichever process takes it and whatever it is batched with, and several ACE servers learning
into one playbook lose nothing (the store's inter-process lock; its log replays byte for byte). The servers are
real `agentkit serve` processes; the ACE ones run a scripted engine registered as a plugin kind, so the roles'
replies are known and every commit can be counted."""

import json
from concurrent.futures import ThreadPoolExecutor

import openai

from agentkit.ace.deltas import Delta
from agentkit.ace.store import PlaybookStore
from agentkit.server.http import ServerProcess

from .test_ace_serving import GEN, REFL

SERVE = ["-m", "agentkit", "serve", "--model", "tiny-random", "--api-key", "k"]


def _ask(url: str, i: int) -> tuple:
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
    kind = i % 3
    if kind == 2:  # a plain completion, sampled with a seed
        r = client.completions.create(model="tiny-random", prompt=f"count to {i}:", max_tokens=8, seed=i, temperature=1)
        return r.choices[0].text, r.choices[0].finish_reason
    r = client.chat.completions.create(
        model="tiny-random",
        messages=[{"role": "user", "content": f"question {i}: what is {i} times {i}?"}],
        max_tokens=8,
        **({"temperature": 0} if kind == 0 else {"temperature": 0.9, "top_p": 0.95, "seed": 100 + i}),
    )
    return r.choices[0].message.content, r.choices[0].finish_reason, r.usage.prompt_tokens


def test_two_server_processes_answer_alike_whatever_the_batch(tmp_path):
    """A: one request at a time; B: all at once, in reverse order (so batched differently). Greedy and seeded
    answers must not depend on which process answers or on what else it batched. With one Responses store, a
    conversation started on one process goes on on the other."""
    args = [*SERVE, "--responses-store", str(tmp_path / "responses.db")]
    with (
        ServerProcess(args, tmp_path / "a.log", startup_timeout_s=120) as a,
        ServerProcess(args, tmp_path / "b.log", startup_timeout_s=120) as b,
    ):
        one_by_one = [_ask(a.url, i) for i in range(12)]
        with ThreadPoolExecutor(12) as pool:
            together = list(pool.map(lambda i: _ask(b.url, i), reversed(range(12))))[::-1]
        ca, cb = (openai.OpenAI(base_url=s.url + "/v1", api_key="k", max_retries=0) for s in (a, b))
        first = ca.responses.create(model="tiny-random", input="name a colour", max_output_tokens=6, temperature=0)
        assert cb.responses.retrieve(first.id).output_text == first.output_text
        follow = dict(model="tiny-random", input="and another", previous_response_id=first.id, temperature=0)
        on_b, on_a = (
            cb.responses.create(**follow, max_output_tokens=6),
            ca.responses.create(**follow, max_output_tokens=6),
        )
    assert together == one_by_one
    assert len({x[0] for x in one_by_one}) > 6  # the requests differ, so equal answers are not a constant
    assert on_b.output_text == on_a.output_text and on_b.usage.input_tokens == on_a.usage.input_tokens > 20


# An `agentkit serve --agent ace --learn` process whose engine is a scripted plugin kind (a third party's
# engine would register the same way): argv = [script JSON, playbook path, --port N].
ACE_SERVER = """
import json, sys
from dataclasses import dataclass
from agentkit import cli
from agentkit.config import NonEmptyStr, option
from agentkit.engines import ENGINES, EngineConfig
from agentkit.testing.scripted import ScriptedEngine

@dataclass
class ScriptedConfig(EngineConfig):
    kind: str = option("scripted", "the engine kind")
    model: NonEmptyStr = option("scripted", "the served name")

    def build(self, model=None, *, tokenizer=None, name=None):
        return ScriptedEngine(json.loads(sys.argv[1]))

ENGINES.register("scripted", "__main__:ScriptedConfig")
args = ["serve", "--engine", "scripted", "--agent", "ace", "--playbook", sys.argv[2], "--learn", "--api-key", "k"]
sys.exit(cli.main(args + sys.argv[3:]))
"""

CUR = {"reasoning": "nothing new", "operations": []}  # the generator's and reflector's replies: test_ace_serving's
SCRIPT = {"Token budget": [json.dumps(CUR)], "Answer given": [json.dumps(REFL)], "Convert": [json.dumps(GEN)]}


def test_two_ace_servers_learning_into_one_playbook_lose_nothing(tmp_path):
    """60 learning requests to each process, 24 at a time: without the store's lock this fails (two processes
    append the same version; 3 runs of 3 with ``flock`` taken out), with it every commit lands."""
    per_process = 60
    store = PlaybookStore.create(tmp_path / "pb.json")
    store.commit([Delta("ADD", section="FORMULAS & CALCULATIONS", content="1 mile = 1.609344 km.")])
    args = ["-c", ACE_SERVER, json.dumps(SCRIPT), str(store.path)]
    with (
        ServerProcess(args, tmp_path / "a.log", startup_timeout_s=120) as a,
        ServerProcess(args, tmp_path / "b.log", startup_timeout_s=120) as b,
    ):

        def learn(job):
            url, i = job
            client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
            r = client.chat.completions.create(
                model="agentkit/ace",
                messages=[{"role": "user", "content": f"Convert {i} miles to km."}],
                extra_body={"agentkit": {"reference": "19.31 km", "metric": "exact"}},
            )
            return r.model_extra["agentkit"]["learned"]

        jobs = [(s.url, i) for i in range(per_process) for s in (a, b)]
        with ThreadPoolExecutor(24) as pool:
            learned = list(pool.map(learn, jobs))

        def ask(url):
            client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
            r = client.chat.completions.create(
                model="agentkit/ace", messages=[{"role": "user", "content": "Convert 1 mile."}]
            )
            return r.choices[0].message.content, r.model_extra["agentkit"]["playbook_version"]

        answers = [ask(a.url), ask(b.url)]
    n = 2 * per_process
    assert all(x["correct"] for x in learned)
    assert sorted(x["version"] for x in learned) == list(range(2, 2 + n))  # each commit its own version
    final = PlaybookStore(store.path)
    final.verify()  # the log replays to the file byte for byte
    assert [e["source"] for e in final.entries].count("serve") == n
    bullet = final.playbook.bullets["calc-00001"]
    assert (bullet.used, bullet.helpful) == (n, n)  # every process's every tag counted: no write lost
    assert answers == [("19.31 km", 1 + n)] * 2  # either process answers from the newest version


def test_serve_spreads_requests_over_upstreams_from_the_command_line(tmp_path):
    """`agentkit serve --engine openai --upstream A,B`: a front server whose requests go to two `agentkit serve`
    processes; each answer is the model's, and with the first stopped the second takes them all (how the pool
    spreads them: tests/integration/engines/test_pool.py)."""
    with (
        ServerProcess(SERVE, tmp_path / "a.log", startup_timeout_s=120) as a,
        ServerProcess(SERVE, tmp_path / "b.log", startup_timeout_s=120) as b,
    ):
        front = ["-m", "agentkit", "serve", "--engine", "openai", "--model", "tiny-random", "--api-key", "f"]
        front += ["--upstream", f"{a.url}/v1,{b.url}/v1", "--engine-option", "api_key=k"]
        front += ["--engine-option", "wait_s=60", "--engine-option", "timeout=30"]
        with ServerProcess(front, tmp_path / "front.log", startup_timeout_s=120) as f:
            client = openai.OpenAI(base_url=f.url + "/v1", api_key="f", max_retries=0)

            def ask(i):
                r = client.completions.create(model="tiny-random", prompt=f"count {i}:", max_tokens=6, temperature=0)
                return r.choices[0].text

            direct = openai.OpenAI(base_url=a.url + "/v1", api_key="k", max_retries=0)
            expected = [
                direct.completions.create(model="tiny-random", prompt=f"count {i}:", max_tokens=6, temperature=0)
                .choices[0]
                .text
                for i in range(16)
            ]
            with ThreadPoolExecutor(8) as pool:
                assert list(pool.map(ask, range(16))) == expected
            a.stop()
            with ThreadPoolExecutor(8) as pool:
                assert list(pool.map(ask, range(16))) == expected  # the other takes them all
