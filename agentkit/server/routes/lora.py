"""vLLM's runtime LoRA routes: ``POST /v1/load_lora_adapter`` ``{"lora_name", "lora_path"}`` and ``POST
/v1/unload_lora_adapter`` ``{"lora_name"}``, answered as vLLM answers them (200 with a line of text). They read
server-side paths, so they are off unless the server was started with ``--runtime-lora`` (vLLM:
``VLLM_ALLOW_RUNTIME_LORA_UPDATING``). A loaded adapter is a model of its own (``GET /v1/models``, ``model``:
its name or ``BASE:NAME``)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field

from agentkit.server.base import OpenAIServing, Serving
from agentkit.server.http import CheckedJSONRoute, RequestError
from agentkit.server.routes.errors import ERRORS

router = APIRouter(route_class=CheckedJSONRoute, responses=ERRORS)
TEXT = {200: {"content": {"text/plain": {}}, "description": "a line saying what was done"}}


class LoadLoraAdapterRequest(BaseModel):
    lora_name: str = Field(min_length=1, max_length=256, pattern=r"^[^:\s]+$")
    lora_path: str = Field(min_length=1)


class UnloadLoraAdapterRequest(BaseModel):
    lora_name: str = Field(min_length=1)
    lora_int_id: int | None = None  # vLLM's body has it; names are enough here


@router.post("/v1/load_lora_adapter", response_class=PlainTextResponse, responses=TEXT)
async def load_lora_adapter(req: LoadLoraAdapterRequest, serving: Serving) -> str:
    """Serve the LoRA adapter saved at ``lora_path`` (on the server) as the model ``lora_name``."""
    _allowed(serving)
    if req.lora_name in serving.model_names():
        raise RequestError(400, f"the model {req.lora_name!r} exists already", param="lora_name")
    await _under_engine_lock(serving, serving.engine.load_adapter, req.lora_name, req.lora_path)
    return f"Success: LoRA adapter '{req.lora_name}' added successfully."


@router.post("/v1/unload_lora_adapter", response_class=PlainTextResponse, responses=TEXT)
async def unload_lora_adapter(req: UnloadLoraAdapterRequest, serving: Serving) -> str:
    """Stop serving the adapter ``lora_name`` (requests that name it afterwards get 404)."""
    _allowed(serving)
    if req.lora_name not in serving.adapters():
        raise RequestError(
            404, f"no LoRA adapter {req.lora_name!r} is loaded", param="lora_name", code="model_not_found"
        )
    if serving.batcher.uses_adapter(req.lora_name):
        raise RequestError(409, f"requests for {req.lora_name!r} are running; unload it when they are done")
    await _under_engine_lock(serving, serving.engine.unload_adapter, req.lora_name)
    return f"Success: LoRA adapter '{req.lora_name}' removed successfully."


def _allowed(serving: OpenAIServing) -> None:
    """The runtime routes change adapters only on an engine that serves them, with ``--runtime-lora`` (a 400)."""
    if not hasattr(serving.engine, "load_adapter"):
        raise RequestError(400, f"the {type(serving.engine).__name__} serves no adapters", code="runtime_lora_off")
    if not serving.runtime_lora:
        raise RequestError(
            400,
            "runtime LoRA loading is off: start the server with --runtime-lora (adapters given with --lora are "
            "served either way)",
            code="runtime_lora_off",
        )


async def _under_engine_lock(serving: OpenAIServing, fn, *args) -> None:
    """Change the engine's adapters between two decode steps (the batcher's lock), off the event loop."""

    def run():
        with serving.batcher.lock:
            fn(*args)

    try:
        await run_in_threadpool(run)
    except (ValueError, OSError) as e:
        raise RequestError(400, str(e), param="lora_path") from None
