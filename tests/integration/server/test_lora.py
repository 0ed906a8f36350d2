"""LoRA adapters served per request, as vLLM serves them: ``agentkit serve --lora NAME=PATH`` (a real process),
``model`` naming an adapter (or ``BASE:ADAPTER``), requests for different adapters answered from one batch, and
the runtime ``/v1/load_lora_adapter`` / ``unload_lora_adapter`` routes behind ``--runtime-lora``."""

import json
import threading
import urllib.error
import urllib.request

import openai
import pytest
import torch
from peft import LoraConfig, get_peft_model

from agentkit.engines import SamplingParams
from agentkit.engines.hf import HFEngine
from agentkit.files import save_pretrained_dir
from agentkit.server import create_app
from agentkit.server.http import ServerProcess
from agentkit.testing.servers import serve_in_thread


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    """Two random LoRA adapters of the tiny model, written as the recipes write a LoRA policy (adapter and
    tokenizer, ``save_pretrained_dir``)."""
    out = {}
    for k, name in enumerate(["a", "b"]):
        torch.manual_seed(10 + k)
        eng = HFEngine("tiny-random")
        cfg = LoraConfig(r=4, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)
        out[name] = str(
            save_pretrained_dir(tmp_path_factory.mktemp("runs") / name, get_peft_model(eng.model, cfg), eng.tokenizer)
        )
    return out


def _alone(adapters, name, text):
    eng = HFEngine("tiny-random", prefix_cache_mb=0)
    if name:
        eng.load_adapter(name, adapters[name])
    (out,) = eng.generate(
        [[{"role": "user", "content": text}]], SamplingParams(max_tokens=8, temperature=0, adapter=name)
    )
    return out[0].text


def _post(url, path, body, key="sk-test"):
    req = urllib.request.Request(
        url + path, json.dumps(body).encode(), {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["error"]


def test_adapters_are_models_and_batch_together(adapters):
    eng = HFEngine("tiny-random")
    eng.load_adapter("a", adapters["a"])
    eng.load_adapter("b", adapters["b"])
    app = create_app(eng, "tiny", api_key="sk-test", window_s=0.3)  # requests sent together share one job
    with serve_in_thread(app) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        cards = {m.id: m for m in client.models.list().data}
        assert list(cards) == ["tiny", "a", "b"]
        assert cards["a"].model_extra["parent"] == "tiny" and cards["a"].model_extra["root"] == adapters["a"]
        asks = [("a", "hello"), ("b", "hello"), ("tiny", "hello"), ("tiny:b", "the cat")]
        got: dict[int, str] = {}
        calls = app.state.batcher.calls

        def ask(i):
            model, text = asks[i]
            r = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": text}], max_tokens=8, temperature=0
            )
            got[i] = r.choices[0].message.content

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(asks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert app.state.batcher.calls == calls + 1  # four requests, three adapters, one engine job
        for i, (model, text) in enumerate(asks):
            name = model.split(":")[-1]
            assert got[i] == _alone(adapters, None if name == "tiny" else name, text), (model, got)
        assert got[0] != got[2]
        r = client.responses.create(model="a", input="hello", max_output_tokens=8, temperature=0)
        assert r.output_text == got[0]
        with pytest.raises(openai.BadRequestError, match="base model"):
            client.completions.create(model="a", prompt="x", max_tokens=0, echo=True)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="tiny:c", messages=[{"role": "user", "content": "x"}])
        assert (
            _post(url, "/v1/load_lora_adapter", {"lora_name": "c", "lora_path": adapters["a"]})[1]["code"]
            == "runtime_lora_off"
        )


def test_runtime_load_and_unload(adapters, tmp_path):
    app = create_app(HFEngine("tiny-random"), "tiny", api_key="sk-test", runtime_lora=True)
    with serve_in_thread(app) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        status, text = _post(url, "/v1/load_lora_adapter", {"lora_name": "b", "lora_path": adapters["b"]})
        assert (status, text) == (200, "Success: LoRA adapter 'b' added successfully.")
        r = client.chat.completions.create(
            model="b", messages=[{"role": "user", "content": "hello"}], max_tokens=8, temperature=0
        )
        assert r.choices[0].message.content == _alone(adapters, "b", "hello")
        assert _post(url, "/v1/load_lora_adapter", {"lora_name": "b", "lora_path": adapters["a"]})[0] == 400
        status, err = _post(url, "/v1/load_lora_adapter", {"lora_name": "x", "lora_path": str(tmp_path)})
        assert status == 400 and "not a PEFT adapter directory" in err["message"]
        assert _post(url, "/v1/load_lora_adapter", {"lora_name": "a:b", "lora_path": adapters["a"]})[0] == 400
        from agentkit.engines.openai import OpenAIEngine  # a remote agentkit (or vLLM) serving the adapter

        remote = OpenAIEngine("tiny", base_url=url + "/v1", api_key="sk-test", tokenizer=adapters["b"])
        (out,) = remote.generate(
            [[{"role": "user", "content": "hello"}]], SamplingParams(max_tokens=8, temperature=0, adapter="b")
        )
        assert out[0].text == _alone(adapters, "b", "hello")
        remote.load_adapter("c", adapters["a"])  # vLLM's runtime route, through the engine
        assert "c" in [m.id for m in client.models.list().data]
        remote.unload_adapter("c")
        assert _post(url, "/v1/unload_lora_adapter", {"lora_name": "b"}) == (
            200,
            "Success: LoRA adapter 'b' removed successfully.",
        )
        assert _post(url, "/v1/unload_lora_adapter", {"lora_name": "b"})[0] == 404
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="b", messages=[{"role": "user", "content": "x"}])


def test_serve_a_saved_adapter_with_one_command(adapters, tmp_path):
    args = [
        "-m",
        "agentkit",
        "serve",
        "--model",
        "tiny-random",
        "--lora",
        f"mine={adapters['a']}",
        "--api-key",
        "sk-test",
    ]
    with ServerProcess(args, tmp_path / "serve.log", startup_timeout_s=120) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
        r = client.chat.completions.create(
            model="mine", messages=[{"role": "user", "content": "hello"}], max_tokens=8, temperature=0
        )
        assert r.choices[0].message.content == _alone(adapters, "a", "hello")
