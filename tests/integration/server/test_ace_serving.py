"""``agentkit/ace`` behind the OpenAI-compatible endpoint (real server on loopback, the official client, scripted
roles): the playbook goes into the answer, feedback in the extension field becomes a new version, concurrent
learning requests leave a log that replays, and bad feedback is a 400 naming the field."""

import json
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from transformers import AutoTokenizer

from agentkit.ace.deltas import Delta
from agentkit.ace.refine import EmbeddingCache, RefineConfig, Refiner
from agentkit.ace.roles import RoleConfig
from agentkit.ace.serve import AceService
from agentkit.ace.store import PlaybookStore
from agentkit.engines.base import SamplingParams
from agentkit.models import resolve
from agentkit.server import create_app
from agentkit.testing.scripted import ScriptedEngine
from agentkit.testing.servers import serve_in_thread

GEN = {"reasoning": "By [calc-00001], 12 mi is 19.31 km.", "bullet_ids": ["calc-00001"], "final_answer": "19.31 km"}
REFL = {
    "error_identification": "",
    "root_cause_analysis": "",
    "correct_approach": "multiply by 1.609344",
    "key_insight": "two decimals and the symbol",
    "bullet_tags": [{"id": "calc-00001", "tag": "helpful"}],
}
CUR = {
    "reasoning": "add the format",
    "operations": [
        {"type": "ADD", "section": "OTHERS", "content": "Answer as a number with two decimals, a space, the symbol."}
    ],
}
SCRIPT = {"Token budget": [json.dumps(CUR)], "Answer given": [json.dumps(REFL)], "Convert": [json.dumps(GEN)]}


@pytest.fixture
def served(tmp_path):
    store = PlaybookStore.create(tmp_path / "pb.json")
    store.commit([Delta("ADD", section="FORMULAS & CALCULATIONS", content="1 mile = 1.609344 km.")])
    engine = ScriptedEngine(SCRIPT)
    tok = AutoTokenizer.from_pretrained(str(resolve("smollm2-135m")))
    refiner = Refiner(RefineConfig(budget_tokens=4000), lambda t: len(tok(t).input_ids), EmbeddingCache())

    def start(learn: bool):
        service = AceService(store, refiner, RoleConfig(structured=False, retries=0), learn=learn)
        app = create_app(engine, "scripted", api_key="k", services={"agentkit/ace": service})
        return serve_in_thread(app)

    return store, start


def test_answers_with_the_playbook_and_learns_from_references(served):
    store, start = served
    with start(learn=True) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        assert "agentkit/ace" in [m.id for m in client.models.list().data]
        r = client.chat.completions.create(
            model="agentkit/ace", messages=[{"role": "user", "content": "Convert 12 miles to km."}]
        )
        assert r.choices[0].message.content == "19.31 km"
        ext = r.model_extra["agentkit"]
        assert ext["bullets_used"] == ["calc-00001"] and ext["playbook_version"] == 1 and "learned" not in ext
        assert r.usage.model_extra["model_calls"] == 1
        r = client.chat.completions.create(
            model="agentkit/ace",
            messages=[{"role": "user", "content": "Convert 12 miles to km."}],
            extra_body={"agentkit": {"reference": "19.31 km", "metric": "exact"}},
        )
        learned = r.model_extra["agentkit"]["learned"]
        assert learned["correct"] is True and learned["version"] == 2 and learned["added"] == ["misc-00002"]
        assert r.usage.model_extra["model_calls"] == 3  # generator, reflector, curator
        b = store.playbook.bullets["calc-00001"]
        assert (b.used, b.helpful) == (1, 1)

        def ask(i):  # concurrent learning requests: each a clean batch, whatever the order
            return client.chat.completions.create(
                model="agentkit/ace",
                messages=[{"role": "user", "content": f"Convert {i} miles to km."}],
                extra_body={"agentkit": {"feedback": {"correct": False, "text": "the checker rejected it"}}},
            )

        with ThreadPoolExecutor(6) as pool:
            outs = list(pool.map(ask, range(6)))
        assert all(o.model_extra["agentkit"]["learned"]["correct"] is False for o in outs)
    assert store.playbook.bullets["calc-00001"].used == 7
    PlaybookStore(store.path).verify()


def test_bad_feedback_is_a_400_naming_the_field(served):
    _, start = served
    with start(learn=False) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        msgs = [{"role": "user", "content": "Convert 3 feet to metres."}]
        for body, param in [
            ({"agentkit": {"reference": "0.91 m"}}, "agentkit"),  # not a learning server
            ({"agentkit": {"feedback": {"correct": "yes"}}}, "agentkit.feedback"),
            ({"agentkit": {"reference": 3}}, "agentkit.reference"),
            ({"agentkit": {"reference": "x", "metric": "bleu"}}, "agentkit.metric"),
            ({"n": 2}, "n"),
        ]:
            with pytest.raises(openai.BadRequestError) as e:
                client.chat.completions.create(model="agentkit/ace", messages=msgs, extra_body=body)
            assert e.value.body["param"] == param, body


# A second process: the CLI's rollback, then its verify, 50 times; each line of output is one round.
ROLLBACKS = """
import sys
from agentkit import cli
from agentkit.ace.store import PlaybookStore
from agentkit.engines.base import SamplingParams
path = sys.argv[1]
for i in range(50):
    newest = PlaybookStore(path).playbook.version
    assert cli.main(["ace", "rollback", path, "--to", str(max(0, newest - 1 - i % 3))]) == 0
    assert cli.main(["ace", "verify", path]) == 0
"""


def test_a_learning_server_and_cli_rollbacks_interleaved(served):
    """One writer at a time across processes: every write takes the file's lock and re-reads the log, so a
    rollback never lands on a stale version and `ace verify` passes after each of the 50 rounds."""
    import subprocess
    import sys

    store, start = served
    with start(learn=True) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        cli = subprocess.Popen(
            [sys.executable, "-c", ROLLBACKS, str(store.path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        learned = 0
        while cli.poll() is None or learned < 5:
            r = client.chat.completions.create(
                model="agentkit/ace",
                messages=[{"role": "user", "content": "Convert 12 miles to km."}],
                extra_body={"agentkit": {"reference": "19.31 km", "metric": "exact"}},
            )
            learned += "learned" in r.model_extra["agentkit"]
        out = cli.communicate()[0].decode()
    assert cli.returncode == 0, out
    assert out.count("replay to the file byte for byte") == 50 and out.count("again (") == 50
    final = PlaybookStore(store.path)
    final.verify()
    versions = [e["version"] for e in final.entries]
    assert versions == list(range(versions[0], versions[0] + len(versions)))
    sources = [e["source"] for e in final.entries]
    assert sources.count("rollback") == 50 and sources.count("serve") >= 5  # both writers landed


def test_a_reference_past_the_context_is_a_400(tmp_path, tiny_engine):
    """A 2 MB reference goes into the reflector's prompt, which no context holds: OpenAI's 400
    ``context_length_exceeded``, as for any prompt, not a 500 from the engine."""
    store = PlaybookStore.create(tmp_path / "pb.json")
    refiner = Refiner(RefineConfig(budget_tokens=4000), lambda t: len(tiny_engine.tokenize(t)), EmbeddingCache())
    service = AceService(
        store,
        refiner,
        RoleConfig(structured=False, retries=0, sampling=SamplingParams(max_tokens=8, temperature=0.0, seed=0)),
        learn=True,
    )
    with serve_in_thread(create_app(tiny_engine, "tiny", api_key="k", services={"agentkit/ace": service})) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(
                model="agentkit/ace",
                messages=[{"role": "user", "content": "Convert 12 miles to km."}],
                extra_body={"agentkit": {"reference": "19.31 km " * 250_000, "metric": "exact"}},
            )
        assert e.value.body["code"] == "context_length_exceeded" and "context is 2048" in e.value.body["message"]
