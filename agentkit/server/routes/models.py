"""``GET /health`` and ``GET /v1/models``: the engine's model, each agent model and each service."""

from __future__ import annotations

import time

from fastapi import APIRouter

from agentkit.server.base import Serving
from agentkit.server.protocol import HealthResponse, ModelCard, ModelList

router = APIRouter()


@router.get("/health", response_model=HealthResponse)
async def health() -> HealthResponse:
    """200 while the server is up (no API key needed)."""
    return HealthResponse()


@router.get("/v1/models", response_model=ModelList, response_model_exclude_unset=True)
async def list_models(serving: Serving) -> ModelList:
    """The models served: the engine's, then the agents and services, with the engine's context length."""
    now = int(time.time())
    cards = [
        ModelCard(id=m, created=now, owned_by="agentkit", max_model_len=serving.max_len) for m in serving.model_names()
    ]
    return ModelList(data=cards)
