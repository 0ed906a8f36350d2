"""vLLM's ``POST /tokenize`` and ``POST /detokenize``: text (or a chat through its template) to the engine's token
ids and back (``GET /tokenizer_info`` is with the other GET routes, in ``models``)."""

from __future__ import annotations

from fastapi import APIRouter

from agentkit.server.base import Serving
from agentkit.server.http import CheckedJSONRoute, RequestError
from agentkit.server.protocol import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from agentkit.server.routes.errors import ERRORS

router = APIRouter(route_class=CheckedJSONRoute, responses=ERRORS)


@router.post("/tokenize", response_model=TokenizeResponse, response_model_exclude_unset=True)
async def tokenize(req: TokenizeRequest, serving: Serving) -> TokenizeResponse:
    """A prompt's (or a chat's) token ids as the engine encodes them."""
    if req.model is not None:
        serving.check_model(req.model)
    engine = serving.engine
    if (req.prompt is None) == (req.messages is None):
        raise RequestError(400, "give either prompt or messages", param="prompt")
    if req.messages is not None:
        if not req.add_generation_prompt:
            raise RequestError(400, "add_generation_prompt=false is not supported", param="add_generation_prompt")
        ids = engine.encode([{"role": m.role, "content": m.text()} for m in req.messages])
    else:
        ids = engine.encode(req.prompt) if req.add_special_tokens is not False else engine.tokenize(req.prompt)
    return TokenizeResponse(count=len(ids), max_model_len=serving.max_len, tokens=ids, token_strs=None)


@router.post("/detokenize", response_model=DetokenizeResponse, response_model_exclude_unset=True)
async def detokenize(req: DetokenizeRequest, serving: Serving) -> DetokenizeResponse:
    """Token ids back to text (special tokens kept)."""
    if req.model is not None:
        serving.check_model(req.model)
    serving.check_ids(req.tokens, "tokens")
    return DetokenizeResponse(prompt=serving.engine.decode(req.tokens, skip_special_tokens=False))
