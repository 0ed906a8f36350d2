"""Engines behind one protocol: HFEngine (embedded default), VLLMEngine (scale), OpenAIEngine (remote), and
plugins'. ``ENGINES`` maps each kind to its typed config (``agentkit.engines.config``)."""

from __future__ import annotations

from typing import Any

from agentkit.engines.base import Completion, Engine, ImagePrompt, Prompt, SamplingParams, Scored, topk_entropy
from agentkit.engines.config import EngineConfig
from agentkit.models.catalog import DEFAULT_CHAT_MODEL
from agentkit.registry import Registry

__all__ = [
    "ENGINES",
    "Completion",
    "Engine",
    "EngineConfig",
    "engine_config",
    "ImagePrompt",
    "Prompt",
    "SamplingParams",
    "Scored",
    "is_vision",
    "make_engine",
    "topk_entropy",
]


ENGINES: Registry[type[EngineConfig]] = Registry("engine", group="agentkit.engines")
ENGINES.register("hf", "agentkit.engines.config:HFConfig")
ENGINES.register("vllm", "agentkit.engines.config:VLLMConfig")
ENGINES.register("openai", "agentkit.engines.config:OpenAIConfig")


def engine_config(kind: str = "hf", **options: Any) -> EngineConfig:
    """The typed config of an engine kind with these options, each checked as a config key is.

    Args:
        kind: a name in ``ENGINES`` (``hf``, ``vllm``, ``openai`` or a plugin's).
        **options: the kind's fields (``model``, ``max_batch_size``, ``base_url``…).

    Returns:
        The config; ``.build()`` makes the engine.

    Raises:
        AgentkitError: an unknown kind, an option the kind does not have, or a value out of its range.

    Examples:
        >>> engine_config("openai", model="m").timeout
        120.0
    """
    from agentkit.config import build_config

    return build_config(ENGINES.get(kind), options)


def make_engine(
    kind: str = "hf", model: Any = DEFAULT_CHAT_MODEL, *, tokenizer: Any = None, name: str | None = None, **options
) -> Engine:
    """Build an engine by kind: ``engine_config(kind, **options).build(model, tokenizer=…, name=…)``.

    Args:
        kind: a name in ``ENGINES``.
        model: a name or directory, or (hf, vllm) a loaded transformers model passed with ``tokenizer=`` (a
            vision-language model's processor for one; ``hf`` then builds a ``VisionEngine``).
        tokenizer: the loaded model's tokenizer or processor.
        name: the model's name (stop strings, logs).
        **options: the kind's options (its ``EngineConfig`` fields).

    Returns:
        The engine.

    Raises:
        AgentkitError: an unknown kind or option.
    """
    return engine_config(kind, **options).build(model, tokenizer=tokenizer, name=name)


def is_vision(model) -> bool:
    """Whether ``model`` (a name, a directory or a loaded model) takes images."""
    if isinstance(model, str):
        from agentkit.models.catalog import is_vision_model

        return is_vision_model(model)
    return getattr(getattr(model, "config", None), "vision_config", None) is not None
