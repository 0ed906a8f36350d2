"""``GET /health``, ``GET /v1/models`` (the engine's model, each agent model and each service) and vLLM's
``GET /tokenizer_info`` (the tokenizer's special tokens and chat template)."""

from __future__ import annotations

import time

from fastapi import APIRouter

from agentkit.server.base import Serving
from agentkit.server.http import RequestError
from agentkit.server.protocol import HealthResponse, ModelCard, ModelList, TokenizerInfoResponse

router = APIRouter()


@router.get("/health", response_model=HealthResponse)
async def health() -> HealthResponse:
    """200 while the server is up (no API key needed)."""
    return HealthResponse()


@router.get("/v1/models", response_model=ModelList, response_model_exclude_unset=True)
async def list_models(serving: Serving) -> ModelList:
    """The models served: the engine's, its LoRA adapters (with ``parent`` and ``root``, as vLLM lists them), then
    the agents and services, with the engine's context length."""
    now = int(time.time())
    adapters = serving.adapters()
    cards = [
        ModelCard(id=m, created=now, owned_by="agentkit", max_model_len=serving.max_len)
        if m not in adapters
        else ModelCard(id=m, created=now, max_model_len=serving.max_len, root=adapters[m], parent=serving.model_name)
        for m in serving.model_names()
    ]
    return ModelList(data=cards)


@router.get("/tokenizer_info", response_model=TokenizerInfoResponse, response_model_exclude_unset=True)
async def tokenizer_info(serving: Serving) -> TokenizerInfoResponse:
    """The engine's tokenizer: its class, special tokens, chat template and the served context length."""
    tok = getattr(serving.engine, "tokenizer", None)
    if tok is None:
        raise RequestError(404, "this engine has no local tokenizer to describe", code="not_found")

    def special(name: str) -> str | None:
        value = getattr(tok, name, None)
        return value if isinstance(value, str) else None

    template = getattr(tok, "chat_template", None)
    return TokenizerInfoResponse(
        tokenizer_class=type(tok).__name__,
        eos_token=special("eos_token"),
        bos_token=special("bos_token"),
        pad_token=special("pad_token"),
        unk_token=special("unk_token"),
        chat_template=template if isinstance(template, str) else None,
        model_max_length=serving.max_len,
    )
