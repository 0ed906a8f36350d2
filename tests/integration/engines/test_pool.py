"""OpenAIEngine over several servers (``agentkit.engines.pool``): prefix-aware routing, a killed server's requests
finished by the other with nothing lost, a hung server taken out, a restarted server taken back, and a LoRA
policy's new weights sent to every server as adapters. The servers are real: `agentkit serve` processes and the
real app on loopback. Full-weight sync through vLLM's routes: tests/integration/engines/test_vllm.py."""

import asyncio
import sys
import threading
import time

import pytest
import torch
from fastapi.responses import JSONResponse
from peft import LoraConfig, get_peft_model

from agentkit.engines import SamplingParams
from agentkit.engines.hf import HFEngine
from agentkit.engines.openai import OpenAIEngine
from agentkit.engines.pool import UpstreamPool
from agentkit.errors import AgentkitError
from agentkit.server import create_app
from agentkit.server.http import ServerProcess
from agentkit.testing.servers import serve_in_thread

GREEDY = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)


def test_an_agents_turns_go_to_the_server_holding_their_prefix():
    pool = UpstreamPool(["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"], check=False, block=16)
    where = lambda prompt: pool.call(pool.servers.index, prompt)  # noqa: E731 - the chosen server
    first, other = list(range(100)), list(range(500, 600))
    assert where(first) == 0 and where(other) == 1  # least loaded, then the other
    assert where(first + [7, 8] * 20) == 0  # the next turn: the server with its prefix
    assert where(other + [1] * 40) == 1
    assert len(pool.prefix_hashes(first)) == 100 // 16 and pool.prefix_hashes(first + [1] * 40)[:6] == (
        pool.prefix_hashes(first)
    )
    pool.servers[0].inflight = 3  # busier than the slack allows: the least-loaded server takes it
    assert where(first + [9] * 40) == 1
    pool.servers[0].inflight = 2  # within the slack: the longest remembered prefix decides
    assert where(first + [7, 8] * 20 + [3] * 16) == 0
    assert where(first + [9] * 40 + [3] * 16) == 1  # its prefix went to 1 last time
    assert [s["requests"] for s in pool.stats()] == [3, 4]


@pytest.fixture
def two_servers(tmp_path):
    """Two `agentkit serve` processes on the tiny model."""
    args = [sys.executable, "-m", "agentkit", "serve", "--model", "tiny-random", "--api-key", "k"][1:]
    with (
        ServerProcess(args, tmp_path / "a.log", startup_timeout_s=120) as a,
        ServerProcess(args, tmp_path / "b.log", startup_timeout_s=120) as b,
    ):
        yield a, b


def test_a_killed_server_loses_no_request_and_is_taken_back(two_servers, tiny_engine):
    a, b = two_servers
    eng = OpenAIEngine(
        "tiny-random", [f"{a.url}/v1", f"{b.url}/v1"], api_key="k", max_concurrency=6, wait_s=60, timeout=30
    )
    prompts = [f"question {i}: what is {i} + {i}?" for i in range(36)]
    expected = [c[0].token_ids for c in tiny_engine.generate(prompts, GREEDY)]

    def kill_b_once_busy():
        while eng.pool.servers[1].requests < 3:
            time.sleep(0.01)
        b.proc.kill()

    killer = threading.Thread(target=kill_b_once_busy)
    killer.start()
    out = eng.generate(prompts, GREEDY)
    killer.join()
    assert [c[0].token_ids for c in out] == expected  # every request answered, each as the model would
    stats = eng.stats()["servers"]
    assert not stats[1]["healthy"] and stats[1]["failures"] >= 1 and stats[0]["requests"] > 18
    b.proc.wait()
    b.start()  # the same port: the prober sees it answer and takes it back
    deadline = time.monotonic() + 30
    while not eng.pool.servers[1].healthy:
        assert time.monotonic() < deadline, "the restarted server was not taken back"
        time.sleep(0.1)
    before = eng.pool.servers[1].requests
    assert [c[0].token_ids for c in eng.generate(prompts[:8], GREEDY)] == expected[:8]
    assert eng.pool.servers[1].requests > before
    eng.close()


def test_a_hung_server_is_taken_out(tiny_engine):
    hung = create_app(tiny_engine, "tiny-random")

    @hung.middleware("http")
    async def hang(request, call_next):
        if request.url.path.startswith("/v1/"):
            await asyncio.sleep(3)
            return JSONResponse(status_code=503, content={"error": {"message": "late", "type": "server_error"}})
        return await call_next(request)

    with serve_in_thread(create_app(tiny_engine, "tiny-random")) as good, serve_in_thread(hung) as bad:
        eng = OpenAIEngine("tiny-random", [bad + "/v1", good + "/v1"], timeout=1.0)
        out = eng.generate(["one", "two", "three"], GREEDY)
        assert [c[0].token_ids for c in out] == [
            c[0].token_ids for c in tiny_engine.generate(["one", "two", "three"], GREEDY)
        ]
        assert eng.pool.servers[0].failures >= 1 and "Timeout" in eng.pool.servers[0].last_error
        eng.close()


def test_no_server_answering_is_one_line():
    pool = UpstreamPool(["http://127.0.0.1:9/v1"], check=False, wait_s=0.5, probe_s=0.1)
    with pytest.raises(AgentkitError, match="no upstream server answered within 0.5 s"):
        pool.call(lambda s: s.client.models.list())
    with pytest.raises(AgentkitError, match="named twice"):
        UpstreamPool(["http://a:1/v1", "http://a:1/v1"], check=False)


def _lora(seed: int):
    torch.manual_seed(seed)
    base = HFEngine("tiny-random").model
    return get_peft_model(base, LoraConfig(r=4, lora_alpha=16, target_modules="all-linear", init_lora_weights=False))


def test_a_lora_policy_reaches_every_server_as_an_adapter(tmp_path):
    """load_weights with a PEFT policy: each server loads the adapter at run time and requests name it; the next
    version replaces it (the old one unloaded); the answers are the policy's own."""
    servers = [HFEngine("tiny-random", prefix_cache_mb=0) for _ in range(2)]
    apps = [create_app(s, "tiny-random", runtime_lora=True) for s in servers]
    with serve_in_thread(apps[0]) as u0, serve_in_thread(apps[1]) as u1:
        eng = OpenAIEngine("tiny-random", [u0 + "/v1", u1 + "/v1"], weights_dir=str(tmp_path))
        prompts = [f"prompt {i}" for i in range(6)]
        base = [c[0].token_ids for c in eng.generate(prompts, GREEDY)]
        for seed in (1, 2):
            policy = _lora(seed)
            eng.load_weights(model=policy)
            assert eng.weights.adapter and eng.served_name.endswith(f"-{seed}")
            mine = HFEngine(policy, servers[0].tokenizer, prefix_cache_mb=0, speculate=0)
            expected = [c[0].token_ids for c in mine.generate(prompts, GREEDY)]
            assert expected != base
            assert [c[0].token_ids for c in eng.generate(prompts, GREEDY)] == expected
            for s in servers:
                assert list(s.adapters) == [eng.served_name]  # the previous version was unloaded
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"agentkit-weights-{eng._token}"]
        assert [p.name for p in (tmp_path / f"agentkit-weights-{eng._token}").iterdir()] == ["2"]
        eng.close()
        assert not any(tmp_path.iterdir())


def test_a_server_without_weight_routes_says_so(tiny_engine, tmp_path):
    with serve_in_thread(create_app(tiny_engine, "tiny-random")) as url:
        eng = OpenAIEngine("tiny-random", url + "/v1", weights_dir=str(tmp_path))
        with pytest.raises(AgentkitError, match="has no /pause route: it cannot take new weights"):
            eng.load_weights(model=HFEngine("tiny-random").model)
        eng.close()
