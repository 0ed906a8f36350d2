"""Model catalog (``agentkit models list``) and loading; see ``catalog.py``."""

from agentkit.models.catalog import (
    CATALOG,
    DEFAULT_CHAT_MODEL,
    ModelInfo,
    load_model,
    load_tokenizer,
    resolve,
    stop_strings_for,
)

__all__ = ["CATALOG", "DEFAULT_CHAT_MODEL", "ModelInfo", "load_model", "load_tokenizer", "resolve", "stop_strings_for"]
