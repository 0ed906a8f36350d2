"""Engines behind one protocol: HFEngine (embedded default), VLLMEngine (scale), OpenAIEngine (remote)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentkit.config import NonEmptyStr, PosInt
from agentkit.engines.base import Completion, Engine, ImagePrompt, Prompt, SamplingParams, Scored, topk_entropy
from agentkit.models.catalog import DEFAULT_CHAT_MODEL

__all__ = [
    "Completion",
    "Engine",
    "EngineConfig",
    "ImagePrompt",
    "Prompt",
    "SamplingParams",
    "Scored",
    "is_vision",
    "make_engine",
    "topk_entropy",
]


@dataclass
class EngineConfig:
    """Which engine serves a recipe.

    kind: hf (embedded transformers engine), vllm (GPU) or openai (any OpenAI-compatible server at base_url).
    model: a catalog name (`agentkit models list`), local directory, or hub id; for openai, the served model name.
    max_batch_size: most sequences the hf engine decodes at once.
    base_url: the openai engine's server (e.g. http://127.0.0.1:8000/v1). api_key: its key (default: the
    OPENAI_API_KEY environment variable).
    """

    kind: Literal["hf", "vllm", "openai"] = "hf"
    model: NonEmptyStr = DEFAULT_CHAT_MODEL
    max_batch_size: PosInt = 64
    base_url: str | None = None
    api_key: str | None = None

    def problems(self) -> list[str]:
        """The model must exist for hf and vllm (an openai server names its own models)."""
        from agentkit.models.catalog import model_problem

        problem = None if self.kind == "openai" else model_problem(self.model)
        return [f"model: {problem}"] if problem else []

    def build(self) -> Engine:
        if self.kind == "hf":
            return make_engine("hf", self.model, max_batch_size=self.max_batch_size)
        if self.kind == "openai":
            return make_engine("openai", self.model, base_url=self.base_url, api_key=self.api_key)
        return make_engine(self.kind, self.model)


def make_engine(kind: str = "hf", model=DEFAULT_CHAT_MODEL, **kwargs) -> Engine:
    """Build an engine by kind.

    Args:
        kind: ``hf`` (the embedded engine), ``vllm`` or ``openai`` (``base_url=`` the upstream server).
        model: a name, a directory, or (hf, vllm) a loaded transformers model passed with ``tokenizer=`` (a
            vision-language model's processor for one). ``hf`` on a vision-language model is a ``VisionEngine``
            (the options it does not have, such as the prefix cache's, are dropped).
        **kwargs: the engine's own options (``HFEngine``, ``VLLMEngine``, ``OpenAIEngine``).

    Returns:
        The engine.

    Raises:
        AgentkitError: an unknown kind.
    """
    if kind == "hf":
        if is_vision(model):
            import inspect

            from agentkit.engines.vision import VisionEngine

            known = inspect.signature(VisionEngine).parameters
            processor = kwargs.pop("tokenizer", None)
            return VisionEngine(model, processor, **{k: v for k, v in kwargs.items() if k in known})
        from agentkit.engines.hf import HFEngine

        return HFEngine(model, **kwargs)
    if kind == "vllm":
        from agentkit.engines.vllm import VLLMEngine

        return VLLMEngine(model, **kwargs)
    if kind == "openai":
        from agentkit.engines.openai import OpenAIEngine

        return OpenAIEngine(model, **kwargs)
    from agentkit.errors import AgentkitError, did_you_mean

    raise AgentkitError(f"unknown engine {kind!r}", did_you_mean(kind, ["hf", "vllm", "openai"]))


def is_vision(model) -> bool:
    """Whether ``model`` (a name, a directory or a loaded model) takes images."""
    if isinstance(model, str):
        from agentkit.models.catalog import is_vision_model

        return is_vision_model(model)
    return getattr(getattr(model, "config", None), "vision_config", None) is not None
