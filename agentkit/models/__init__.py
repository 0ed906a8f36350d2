"""Model catalog (``agentkit models list``) and loading; see ``catalog.py``."""

from agentkit.models.catalog import (
    CATALOG,
    DEFAULT_CHAT_MODEL,
    ModelInfo,
    is_vision_model,
    load_model,
    load_tokenizer,
    load_vision_model,
    resolve,
    stop_strings_for,
)

__all__ = [
    "CATALOG",
    "DEFAULT_CHAT_MODEL",
    "ModelInfo",
    "is_vision_model",
    "load_model",
    "load_tokenizer",
    "load_vision_model",
    "resolve",
    "stop_strings_for",
]
