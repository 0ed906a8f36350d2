"""A third-party engine kind: registered in ``ENGINES``, named in a recipe config, and served by ``agentkit serve``."""

from __future__ import annotations

from dataclasses import dataclass

import openai
import pytest

from agentkit import cli
from agentkit.config import NonEmptyStr, build_config, option
from agentkit.engines import ENGINES, Engine, EngineConfig
from agentkit.errors import AgentkitError
from agentkit.testing.scripted import ScriptedEngine
from agentkit.testing.servers import serve_in_thread


@dataclass
class EchoConfig(EngineConfig):
    """What a plugin writes: its kind's options as typed fields, and how to build the engine."""

    kind: str = option("echo", "the engine kind")
    model: NonEmptyStr = option("echo-1", "the name it is served under")
    reply: NonEmptyStr = option("pong", "what every completion says")

    def build(self, model=None, *, tokenizer=None, name=None) -> Engine:
        engine = ScriptedEngine({"": [self.reply]})  # "" is in every prompt
        engine.model_name = name or model or self.model
        return engine


@pytest.fixture
def echo(monkeypatch):
    monkeypatch.setitem(ENGINES._targets, "echo", f"{__name__}:EchoConfig")  # as an entry point would


def test_a_plugin_kind_is_a_typed_engine_config(echo):
    from agentkit.recipes.quickstart.config import QuickstartConfig

    cfg = build_config(QuickstartConfig, {"engine": {"kind": "echo", "reply": "hi"}})
    assert type(cfg.engine) is EchoConfig and cfg.engine.reply == "hi"
    assert cfg.engine.model == "smollm2-135m"  # the fields the kinds share carry over
    with pytest.raises(AgentkitError, match="unknown config key 'engine.max_batch_size'"):
        build_config(QuickstartConfig, {"engine": {"kind": "echo", "max_batch_size": 3}})
    with pytest.raises(AgentkitError, match="engine.reply: must not be empty"):
        build_config(QuickstartConfig, {"engine": {"kind": "echo", "reply": ""}})
    assert type(build_config(QuickstartConfig, {"engine": "echo"}).engine) is EchoConfig  # a bare kind
    again = build_config(QuickstartConfig, {"engine": {"kind": "echo"}}, {"engine": {"kind": "hf"}})
    assert type(again.engine).__name__ == "HFConfig"  # a later layer changes the kind back


def test_agentkit_serve_serves_a_plugin_engine(echo, monkeypatch):
    served = {}
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: served.update(app=app, **kw))
    code = cli.main(["serve", "--engine", "echo", "--model", "echo-2", "--engine-option", "reply=hello there"])
    assert code == 0 and served["port"] == 8000
    with serve_in_thread(served["app"]) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["echo-2"]
        reply = client.chat.completions.create(model="echo-2", messages=[{"role": "user", "content": "ping"}])
        assert reply.choices[0].message.content == "hello there"
