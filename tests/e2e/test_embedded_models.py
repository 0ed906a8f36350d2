"""End to end with the real embedded models: load from the cache, generate, score, a tiny quickstart."""

import json
import subprocess
import sys
import time

import pytest

from agentkit.engines import SamplingParams
from agentkit.files import read_records

pytestmark = pytest.mark.slow


def test_smollm2_loads_from_safetensors_cache():
    from agentkit.models import load_model
    from agentkit.models.catalog import CATALOG

    t = time.perf_counter()
    model, tok = load_model("smollm2-135m")
    took = time.perf_counter() - t
    cache = CATALOG["smollm2-135m"].cache_dir()
    cfg = json.loads((cache / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cache / "model.safetensors").exists()
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(134.5e6, rel=0.01)
    assert tok.chat_template and "<|im_start|>" in tok.chat_template
    print(f"smollm2-135m loaded from cache in {took:.2f}s")


def test_smollm2_generate_and_score_agree(smol_engine):
    chat = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    (c,) = smol_engine.generate([chat], SamplingParams(max_tokens=12, temperature=0, entropy=True))[0]
    assert "paris" in c.text.lower()
    assert c.finish_reason == "stop" and c.token_ids[-1] in smol_engine.eos_ids
    (s,) = smol_engine.score([chat], [c.token_ids], entropy=True)
    assert s.logprobs == pytest.approx(c.logprobs, abs=2e-3)
    assert s.entropies == pytest.approx(c.entropies, abs=2e-3)


def test_gemma3_base_with_plain_template():
    from agentkit.engines.hf import HFEngine
    from agentkit.models.catalog import PLAIN_CHAT_TEMPLATE

    eng = HFEngine("gemma3-270m", max_batch_size=4)
    assert eng.tokenizer.chat_template == PLAIN_CHAT_TEMPLATE and "\nUser:" in eng.default_stop
    prompt = eng.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Name a colour."}], add_generation_prompt=True, tokenize=False
    )
    assert prompt.endswith("User: Name a colour.\n\nAssistant:")
    (c,) = eng.generate(["1, 2, 3, 4, 5, 6,"], SamplingParams(max_tokens=4, temperature=0))[0]
    assert c.text.strip().startswith("7")
    (chat,) = eng.generate(
        [[{"role": "user", "content": "Name a colour."}]], SamplingParams(max_tokens=48, temperature=0)
    )[0]
    assert "User:" not in chat.text  # the plain template's next turn is a stop string


def test_quickstart_cli_end_to_end(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentkit",
            "run",
            "quickstart",
            "--preset",
            "tiny",
            "--quiet",
            "--set",
            "num_problems=4",
            "--output-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    run = tmp_path / "run"
    report = (run / "report.md").read_text()
    assert "tokens_per_s" in report and "![" in report and "## Examples" in report
    assert (run / "accuracy.png").stat().st_size > 1000
    final = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    rows = read_records(run / "state" / "predictions.jsonl").values()  # the accuracy is the recorded answers'
    assert final["problems"] == len(rows) == 4 and final["tokens_per_s"] > 0
    assert final["accuracy"] == pytest.approx(sum(r["correct"] for r in rows) / 4)


def test_quickstart_under_accelerate_launch(tmp_path):
    """Two CPU processes split each batch; the main process writes one complete run directory."""
    import agentkit

    cfg = __import__("pathlib").Path(agentkit.__file__).parent.parent / "configs" / "accelerate" / "cpu.yaml"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(cfg),
            "-m",
            "agentkit",
            "run",
            "quickstart",
            "--quiet",
            "--output-dir",
            str(tmp_path / "run"),
            "--set",
            "engine.model=tiny-random",
            "--set",
            "num_problems=6",
            "--set",
            "batch_size=4",
            "--set",
            "sampling.max_tokens=4",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = (tmp_path / "run" / "state" / "predictions.jsonl").read_text().splitlines()
    assert len(rows) == 6  # every problem once, whichever process answered it
    final = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert final["problems"] == 6


def test_extras_recipe_under_accelerate_launch(tmp_path):
    """An extras demo (NAT, tiny) under 2 CPU processes: every process runs it, the main one writes one run."""
    import agentkit

    cfg = __import__("pathlib").Path(agentkit.__file__).parent.parent / "configs" / "accelerate" / "cpu.yaml"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(cfg),
            "-m",
            "agentkit",
            "run",
            "extras.robust.nat",
            "--preset",
            "tiny",
            "--quiet",
            "--output-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = (tmp_path / "run" / "state" / "runs.jsonl").read_text().splitlines()
    assert len(rows) == 6  # 3 methods × 2 seeds, each recorded once
    assert "PGD-3 margin" in (tmp_path / "run" / "report.md").read_text()


def test_agent_rollout_with_real_model_and_sandbox(smol_engine):
    """SmolLM2 in the tool loop with the real sandbox: ids, masks and logprobs stay consistent across turns."""
    from agentkit.agent import AgentConfig, rollout
    from agentkit.data import arithmetic_suite
    from agentkit.tools.python import PythonTool
    from agentkit.tools.sandbox import SandboxConfig

    tool = PythonTool(SandboxConfig(pool_size=2))
    try:
        trajs = rollout(
            smol_engine,
            arithmetic_suite(2, seed=5),
            [tool],
            AgentConfig(
                max_turns=3,
                max_total_tokens=256,
                sampling=SamplingParams(max_tokens=64, temperature=0, seed=0, entropy=True),
            ),
        )
    finally:
        tool.close()
    assert len(trajs) == 2
    for t in trajs:
        assert t.finish in {"answer", "no_call", "max_turns", "max_tool_calls", "max_tokens"}
        assert len(t.mask) == len(t.completion_ids) <= 256
        # re-score the first model turn from the recorded prompt ids: the loop fed the model exactly these ids
        first = t.segments[0]
        (s,) = smol_engine.score([t.prompt_ids], [first.token_ids])
        assert s.logprobs == pytest.approx(first.logprobs, abs=2e-3)


@pytest.fixture(scope="module")
def smol_server(tmp_path_factory):
    """`agentkit serve` as a real process on loopback: the embedded model and the python-tool agent."""
    from agentkit.server.http import ServerProcess

    log = tmp_path_factory.mktemp("serve") / "server.log"
    with ServerProcess(
        ["-m", "agentkit", "serve", "--model", "smollm2-135m", "--agent", "tir", "--api-key", "sk-e2e"],
        log,
        startup_timeout_s=180,
    ) as server:
        yield server


def test_serve_cli_with_official_client(smol_server):
    import openai

    client = openai.OpenAI(base_url=f"{smol_server.url}/v1", api_key="sk-e2e", max_retries=0)
    r = client.chat.completions.create(
        model="smollm2-135m",
        temperature=0,
        max_tokens=12,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
    )
    assert "paris" in r.choices[0].message.content.lower() and r.choices[0].finish_reason in ("stop", "length")
    text = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(
            model="smollm2-135m",
            temperature=0,
            max_tokens=12,
            stream=True,
            messages=[{"role": "user", "content": "What is the capital of France?"}],
        )
        if c.choices
    )
    assert text == r.choices[0].message.content
    a = client.chat.completions.create(
        model="agentkit/tir", max_tokens=48, temperature=0, messages=[{"role": "user", "content": "What is 17 * 23?"}]
    )
    assert a.model_extra["agentkit"][0]["finish"] and a.usage.total_tokens > 0


def test_concurrent_agent_requests_with_seeds(smol_server):
    """8 agent requests at once with n=2, six with their own seed and two with the same one (the demo's case, which
    once failed: merged requests kept the first one's seeds): all succeed, and a request sent again alone gets the
    same trajectories."""
    from concurrent.futures import ThreadPoolExecutor

    import openai

    from agentkit.agent.loop import TIR_EXAMPLES
    from agentkit.data import arithmetic_suite

    client = openai.OpenAI(base_url=f"{smol_server.url}/v1", api_key="sk-e2e", max_retries=0, timeout=600)
    tasks = arithmetic_suite(8, seed=21)

    def ask(i: int):
        r = client.chat.completions.create(
            model="agentkit/tir",
            n=2,
            seed=100 + i if i < 6 else 0,
            temperature=0.8,
            max_tokens=40,
            extra_body={"max_turns": 2},
            messages=[*TIR_EXAMPLES, {"role": "user", "content": tasks[i].question}],
        )
        return [(c.message.content, t["trace"]) for c, t in zip(r.choices, r.model_extra["agentkit"])]

    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(ask, range(8)))
    assert all(len(x) == 2 for x in together)
    assert sum(a != b for a, b in together) >= 4  # the two samples of a request differ (their own seeds)
    for i in (0, 7):
        assert ask(i) == together[i]
    assert "Traceback" not in smol_server.tail(20000)


THINGS = [
    "a cat",
    "a city",
    "a car",
    "a book",
    "a movie",
    "a planet",
    "a song",
    "a tree",
    "a laptop",
    "a river",
    "a bird",
    "a chair",
    "a pizza",
    "a country",
    "a museum",
    "a phone",
    "a mountain",
    "a game",
    "a shoe",
    "a bridge",
]
JSON_SYSTEM = {"role": "system", "content": "You reply with one JSON object and nothing else."}
ITEM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "colour": {"enum": ["red", "green", "blue", "black", "white", "other"]},
        "size": {"type": "integer", "minimum": 1, "maximum": 100},
    },
    "required": ["name", "colour", "size"],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 40},
                    "unit": {"enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city", "unit"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "maxLength": 60}},
                "required": ["query"],
            },
        },
    },
]


@pytest.mark.parametrize("kind", ["json_object", "json_schema", "required", "named"])
def test_structured_outputs_with_the_official_client(smol_server, kind):
    """20 different prompts, sent at once (the server batches them, constrained rows beside each other): every
    reply parses, and validates against its schema or its function's parameters."""
    from concurrent.futures import ThreadPoolExecutor

    import jsonschema
    import openai

    client = openai.OpenAI(base_url=f"{smol_server.url}/v1", api_key="sk-e2e", max_retries=0, timeout=600)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}

    def ask(i: int):
        thing = THINGS[i]
        kw = dict(model="smollm2-135m", max_tokens=128, temperature=0.7, seed=i)
        if kind in ("json_object", "json_schema"):
            fmt = (
                {"type": "json_object"}
                if kind == "json_object"
                else {"type": "json_schema", "json_schema": {"name": "item", "schema": ITEM, "strict": True}}
            )
            r = client.chat.completions.create(
                messages=[
                    JSON_SYSTEM,
                    {
                        "role": "user",
                        "content": (
                            f"Give the name, colour and size of {thing} as a JSON object with the keys name, colour and size."
                        ),
                    },
                ],
                response_format=fmt,
                **kw,
            )
            data = json.loads(r.choices[0].message.content)
            assert isinstance(data, dict) and r.choices[0].finish_reason == "stop"
            if kind == "json_schema":
                jsonschema.validate(data, ITEM)
            return data
        choice = "required" if kind == "required" else {"type": "function", "function": {"name": "get_weather"}}
        r = client.chat.completions.create(
            messages=[{"role": "user", "content": f"What is the weather near {thing}?"}],
            tools=TOOLS,
            tool_choice=choice,
            **kw,
        )
        calls = r.choices[0].message.tool_calls
        assert r.choices[0].finish_reason == "tool_calls"
        assert len(calls) == 1 if kind == "named" else len(calls) >= 1  # "required": one or more, as the model writes
        for call in calls:
            assert kind == "required" or call.function.name == "get_weather"
            jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])
        return calls[0].function.name, json.loads(calls[0].function.arguments)

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(ask, range(20)))
    assert len({json.dumps(a, sort_keys=True) for a in answers}) >= 10  # different prompts, different answers
    print(kind, answers[:3])


def test_serve_demo_recipe(tmp_path):
    """The main job, small: the server starts, both models answer through the official client (four requests in
    flight at once, all with the same seed), it stops; the server's log is in the run directory."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentkit",
            "run",
            "serve_demo",
            "--preset",
            "tiny",
            "--quiet",
            "--set",
            "num_problems=4",
            "--set",
            "concurrency=4",
            "--set",
            "max_tokens=16",
            "--set",
            "time_limit_s=400",
            "--output-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "accuracy without tools" in r.stdout
    final = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    rows = read_records(tmp_path / "run" / "state" / "agentkit_tir.jsonl").values()
    assert final["problems"] == len(rows) == 4
    assert final["accuracy_with_python"] == pytest.approx(sum(r["correct"] for r in rows) / 4)
    assert "Traceback" not in (tmp_path / "run" / "server.log").read_text()
    assert (tmp_path / "run" / "serve_demo.png").stat().st_size > 1000


def test_serve_demo_time_limit_names_the_server_log(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentkit",
            "run",
            "serve_demo",
            "--preset",
            "tiny",
            "--quiet",
            "--set",
            "time_limit_s=0.5",
            "--output-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "did not come up in 0.5 s" in r.stderr and f"server log: {tmp_path / 'run' / 'server.log'}" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_uncertainty_cli_with_both_embedded_models(tmp_path):
    """generate with SmolLM2 and Gemma through the CLI (a new process each), then score with MiniLM."""
    gens = tmp_path / "gens.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "agentkit",
        "uncertainty",
        "generate",
        "--models",
        "smollm2-135m,gemma3-270m",
        "--tasks",
        "arithmetic-easy:3,multihop-open:3",
        "--samples",
        "3",
        "--max-tokens",
        "12",
        "--out",
        str(gens),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    rows = [json.loads(x) for x in gens.read_text().splitlines()]
    assert len(rows) == 6 and all(len(r["samples"][m]) == 3 for r in rows for m in ("smollm2-135m", "gemma3-270m"))
    assert all(r["greedy"]["smollm2-135m"] for r in rows)
    out = subprocess.run(
        [sys.executable, "-m", "agentkit", "uncertainty", "score", str(gens), "--out", str(tmp_path / "rep")],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    assert "reference smollm2-135m" in out and "TU" in out
    metrics = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    au, eu = (metrics["curves"][k]["rejection"] for k in ("AU", "EU"))
    assert len(au) == len(eu) == 6 and metrics["questions"] == 6


@pytest.mark.parametrize("config", ["cpu", "zero3"])
def test_toollight_tiny_under_accelerate_launch(tmp_path, config):
    """Two CPU processes: the main one samples, evaluates and writes; SFT and DPO train on both (TRL over gloo),
    under DDP or DeepSpeed ZeRO-3 (whose trained weights are gathered back whole before the main process samples
    from them alone)."""
    import agentkit
    from agentkit.testing.pairs import write_text_pairs
    from agentkit.testing.processes import launch_two_processes

    root = __import__("pathlib").Path(agentkit.__file__).parent.parent
    write_text_pairs(tmp_path / "pairs.jsonl")
    args = ["run", "toollight", "--preset", "tiny", "--quiet", "--output-dir", str(tmp_path / "run")]
    r = launch_two_processes([*args, "--set", f"pairs={tmp_path / 'pairs.jsonl'}"], root, config=config)
    assert r.returncode == 0, r.stderr[-3000:]
    run = tmp_path / "run"
    for stage in ("sft", "dpo-1", "dpo-2"):
        assert (run / "models" / stage / "model.safetensors").exists()
    evals = [json.loads(x)["key"] for x in (run / "state" / "eval_dpo-2.jsonl").read_text().splitlines()]
    assert len(evals) == len(set(evals)) == 3 + 2  # each held-out question once
    assert "| dpo-2 | arithmetic |" in (run / "report.md").read_text()
