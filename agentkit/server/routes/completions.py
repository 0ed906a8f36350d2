"""``POST /v1/completions``: text completions of one or more prompts (texts or token-id lists), with vLLM's ``echo``
and prompt scoring."""

from __future__ import annotations

import time
import uuid

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool

from agentkit.engines.base import Completion
from agentkit.server.base import OpenAIServing, Serving
from agentkit.server.chat import constraint_of, token_names
from agentkit.server.http import CheckedJSONRoute, RequestError
from agentkit.server.protocol import (
    CompletionChoice,
    CompletionLogprobs,
    CompletionRequest,
    CompletionResponse,
    UsageInfo,
)
from agentkit.server.routes.errors import ERRORS

router = APIRouter(route_class=CheckedJSONRoute, responses=ERRORS)


@router.post("/v1/completions", response_model=CompletionResponse, response_model_exclude_unset=True)
async def create_completion(req: CompletionRequest, request: Request, serving: Serving) -> CompletionResponse:
    """Text completions. ``echo``: each choice's text and logprobs start with the prompt's (prompt logprobs by
    teacher forcing, with ``logprobs=k`` the k most likely tokens at each position plus the prompt's own; the
    first token has neither), then the completion's, as vLLM returns them; with ``max_tokens=0`` only the prompt
    is scored (teacher scoring)."""
    serving.check_model(req.model)
    serving.check_n(req.n)
    prompts = req.prompts()
    if len(prompts) > serving.limits.max_prompts:
        raise RequestError(
            400,
            f"{len(prompts)} prompts; this server takes at most {serving.limits.max_prompts} per request",
            param="prompt",
        )
    for p in prompts:
        if isinstance(p, list):
            serving.check_ids(p, "prompt")
    params = serving.sampling(req.model, req.to_sampling_params(default_max=16, constraint=constraint_of(req)))
    encoded = [serving.engine.encode(p) if p else [] for p in prompts]
    if not encoded or not all(encoded):
        raise RequestError(400, "the prompt is empty (no tokens)", param="prompt")
    for ids in encoded:
        params = serving.fit(ids, params, req.max_tokens)
    if req.echo and params.adapter is not None:
        raise RequestError(
            400, f"echo scores the prompt with the base model; ask {serving.model_name!r} for it", param="echo"
        )
    if params.max_tokens == 0 and not req.echo:
        raise RequestError(400, "max_tokens=0 needs echo=true (prompt scoring)", param="max_tokens")
    if params.max_tokens > 0:
        outs = await serving.generate(request, encoded, params, "structured_outputs")
    else:  # prompt scoring alone: an empty completion per sample
        outs = [[Completion("", [], [], "length", len(e), top_logprobs=[]) for _ in range(params.n)] for e in encoded]
    echoed = await run_in_threadpool(_prompt_logprobs, serving, encoded, req.logprobs or 0) if req.echo else None
    choices = []
    for k, cs in enumerate(outs):
        for c in cs:
            choices.append(_choice(serving, req, len(choices), c, encoded[k], echoed[k] if echoed else None))
    prompt_tokens = sum(len(e) for e in encoded)
    return CompletionResponse(
        id="cmpl-" + uuid.uuid4().hex,
        created=int(time.time()),
        model=req.model,
        choices=choices,
        usage=UsageInfo.of(prompt_tokens, sum(c.completion_tokens for cs in outs for c in cs)),
    )


def _choice(
    serving: OpenAIServing,
    req: CompletionRequest,
    index: int,
    c: Completion,
    prompt: list[int],
    echoed: tuple[list[float | None], list[dict[int, float]]] | None,
) -> CompletionChoice:
    """One choice; with ``echo`` (``echoed``: the prompt's logprobs and alternatives) its text, tokens and
    logprobs begin with the prompt's."""
    engine, as_ids = serving.engine, req.return_tokens_as_token_ids
    ids, lps, text = list(c.token_ids), list(c.logprobs), c.text
    tops = list(c.top_logprobs or [{}] * len(ids))
    if echoed is not None:
        ids, lps, tops = prompt + ids, echoed[0] + lps, echoed[1] + tops
        text = engine.decode(prompt, skip_special_tokens=False) + text
    logprobs = None
    if req.logprobs is not None:
        logprobs = CompletionLogprobs(
            tokens=token_names(engine, ids, as_ids),
            token_logprobs=lps,
            text_offset=_offsets(engine.token_strings(ids)),
            top_logprobs=[dict(zip(token_names(engine, list(t), as_ids), t.values())) or None for t in tops]
            if req.logprobs
            else None,
        )
    return CompletionChoice(index=index, text=text, logprobs=logprobs, finish_reason=c.finish_reason)


def _prompt_logprobs(
    serving: OpenAIServing, encoded: list[list[int]], k: int
) -> list[tuple[list[float | None], list[dict[int, float]]]]:
    """For each prompt, log p(token i | tokens < i) and, with ``k``, the k most likely tokens at i plus token i
    itself (vLLM's form: k or k + 1 entries); the first token has neither."""
    with serving.batcher.lock:
        scored = serving.engine.score([ids[:1] for ids in encoded], [ids[1:] for ids in encoded], top_logprobs=k)
    out = []
    for ids, s in zip(encoded, scored):
        tops = [{**t, tok: lp} for t, tok, lp in zip(s.top_logprobs, ids[1:], s.logprobs)] if k else [{}] * len(ids[1:])
        out.append(([None, *s.logprobs], [{}, *tops]))
    return out


def _offsets(tokens: list[str]) -> list[int]:
    out, pos = [], 0
    for t in tokens:
        out.append(pos)
        pos += len(t)
    return out
