"""The OpenAI-compatible HTTP API (FastAPI): /v1/models, /v1/chat/completions, /v1/completions, /health.

Served models: the engine's model under its name, and each agent (``agentkit/tir``), which runs the tool loop
server-side and returns the final answer with the trace in an ``agentkit`` extension field.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from agentkit.agent import AgentConfig, rollout
from agentkit.engines.base import Completion, ContextLengthError
from agentkit.server.chat import (
    agent_conversation,
    chat_response,
    constraint_of,
    sampling,
    stream_chunks,
    to_messages,
    token_names,
)
from agentkit.server.http import RequestError, install_error_handlers, parse_body, read_body, require_bearer_key
from agentkit.server.protocol import ChatCompletionRequest, CompletionRequest, DetokenizeRequest, TokenizeRequest
from agentkit.server.serving import BatchedEngine, Batcher, Cancelled, ServeLimits


def _client_gone() -> RequestError:
    return RequestError(499, "the client closed the request", code="client_closed")


def create_app(
    engine,
    model_name: str,
    api_key: str | None = None,
    tools: dict[str, Any] | None = None,
    agent_name: str = "agentkit/tir",
    agent_config=None,
    window_s: float = 0.01,
    services: dict[str, Any] | None = None,
    limits: ServeLimits | None = None,
) -> FastAPI:
    """``services``: more agent models, name → an object with ``answer(engine, question, system, extension) ->
    (text, extension out, usage)``, run in a worker thread with the batched engine (``agentkit.ace.serve``).
    ``limits``: what one request may ask (``ServeLimits``: prompts, n, body size and depth, jobs at once)."""
    app = FastAPI(title="agentkit", version="1", description="OpenAI-compatible API over agentkit engines and agents")
    limits = limits or ServeLimits()
    batcher = Batcher(engine, window_s=window_s, max_jobs=limits.max_jobs, hold_s=limits.hold_s)
    app.state.batcher = batcher
    agents = {agent_name: tools} if tools else {}
    services = services or {}
    max_len = getattr(engine, "max_model_len", None)
    vocab = len(engine.tokenizer) if getattr(engine, "tokenizer", None) is not None else None

    require_bearer_key(app, api_key)
    install_error_handlers(app)

    @app.exception_handler(ContextLengthError)
    async def too_long(_: Request, e: ContextLengthError):  # a service's own prompt (the ACE roles')
        err = RequestError(400, str(e), param="messages", code="context_length_exceeded")
        return _error_response(err)

    async def _parse(request: Request, cls):
        raw = await read_body(request, limits.max_body_bytes)
        if len(raw) > 1 << 18:  # a large body is checked off the event loop, which other requests need
            return await run_in_threadpool(parse_body, raw, cls, limits.max_json_depth)
        return parse_body(raw, cls, limits.max_json_depth)

    def check_ids(ids: list[int], param: str) -> None:
        """Token ids a client sent must name tokens of the vocabulary."""
        if vocab is not None and ids and not 0 <= min(ids) <= max(ids) < vocab:
            bad = next(t for t in ids if not 0 <= t < vocab)
            raise RequestError(400, f"token id {bad} is outside the vocabulary (0..{vocab - 1})", param=param)

    def check_n(req) -> None:
        if req.n > limits.max_n:
            raise RequestError(400, f"n is {req.n}; this server samples at most {limits.max_n} per prompt", param="n")

    async def wait(request: Request, fut, on_gone=None):
        """The batcher's answer to ``fut``; a client that goes away meanwhile has its work cancelled (within a
        decode step) and gets 499."""
        afut = asyncio.wrap_future(fut)

        def gone():
            (on_gone or (lambda: batcher.cancel(fut)))()
            afut.add_done_callback(lambda f: f.cancelled() or f.exception())  # its end is nobody's to read

        try:
            while True:
                done, _ = await asyncio.wait({afut}, timeout=0.1)
                if done:
                    try:
                        return afut.result()
                    except Cancelled:
                        raise _client_gone() from None
                if await request.is_disconnected():
                    gone()
                    raise _client_gone()
        except asyncio.CancelledError:  # the server dropped this handler (its client went away, or shutdown)
            gone()
            raise

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models():
        now = int(time.time())
        return {
            "object": "list",
            "data": [
                {"id": m, "object": "model", "created": now, "owned_by": "agentkit", "max_model_len": max_len}
                for m in [model_name, *agents, *services]
            ],
        }

    @app.post("/tokenize")
    async def tokenize(request: Request):
        """vLLM's route: a prompt's (or a chat's) token ids as the engine encodes them."""
        req = await _parse(request, TokenizeRequest)
        check(req.model, [], None)
        if (req.prompt is None) == (req.messages is None):
            raise RequestError(400, "give either prompt or messages", param="prompt")
        if req.messages is not None:
            msgs = [{"role": m.role, "content": m.text()} for m in req.messages]
            if req.add_generation_prompt:
                ids = engine.encode(msgs)
            else:
                raise RequestError(400, "add_generation_prompt=false is not supported", param="add_generation_prompt")
        else:
            ids = engine.encode(req.prompt) if req.add_special_tokens is not False else engine.tokenize(req.prompt)
        return {"count": len(ids), "max_model_len": max_len, "tokens": ids, "token_strs": None}

    @app.post("/detokenize")
    async def detokenize(request: Request):
        req = await _parse(request, DetokenizeRequest)
        check(req.model, [], None)
        check_ids(req.tokens, "tokens")
        return {"prompt": engine.decode(req.tokens, skip_special_tokens=False)}

    def check(model: str, prompt_ids: list[int], params, asked: int | None = None):
        """The model exists and the prompt fits; returns ``params`` with ``max_tokens`` cut to the context left.
        ``asked``: the client's own ``max_tokens`` (vLLM's rule: prompt + asked beyond the context is a 400; a
        default is cut to what is left)."""
        if model != model_name and model not in agents and model not in services:
            raise RequestError(
                404,
                f"the model {model!r} does not exist; see GET /v1/models",
                "invalid_request_error",
                "model",
                "model_not_found",
            )
        if max_len and len(prompt_ids) >= max_len:
            raise RequestError(
                400,
                f"the prompt has {len(prompt_ids)} tokens; the model's context length is {max_len}",
                param="messages",
                code="context_length_exceeded",
            )
        if params is None or not max_len:
            return params
        room = max_len - len(prompt_ids)
        if asked is not None and asked > room:
            raise RequestError(
                400,
                f"This model's maximum context length is {max_len} tokens. However, you requested "
                f"{len(prompt_ids) + asked} tokens ({len(prompt_ids)} in the prompt, {asked} in the completion). "
                "Please reduce the length of the prompt or completion.",
                param="max_tokens",
                code="context_length_exceeded",
            )
        return dataclasses.replace(params, max_tokens=min(params.max_tokens, room))

    async def generate(request: Request, prompts, params, constraint_param: str | None = None):
        outs = await wait(request, batcher.submit(prompts, params))
        failed = next((c for cs in outs for c in cs if c.finish_reason == "error"), None)
        if failed is not None:  # this request's grammar could not go on (the batch's other requests finished)
            raise RequestError(
                400, f"the output constraint failed: {failed.stop_reason}", param=constraint_param, code="grammar_error"
            )
        return outs

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        req = await _parse(request, ChatCompletionRequest)
        check_n(req)
        if req.model in agents:
            return await run_agent(request, req)
        if req.model in services:
            return await run_service(request, req)
        msgs, prefill, constraint = to_messages(req)
        ids = engine.encode(msgs) + (engine.tokenize(prefill) if prefill else [])
        params = check(
            req.model, ids, sampling(req, constraint=constraint), req.max_completion_tokens or req.max_tokens
        )
        if req.stream and not (req.tools and req.tool_choice != "none"):
            return StreamingResponse(live_stream(req, ids, params), media_type="text/event-stream")
        (outs,) = await generate(request, [ids], params, _constraint_param(req))
        resp = chat_response(req, prefill, outs, len(ids), engine, req.model)
        return _respond(req, resp)

    async def run_service(request: Request, req: ChatCompletionRequest):
        for field in ("response_format", "structured_outputs", "tools"):
            if getattr(req, field) is not None:
                raise RequestError(400, f"the agent model {req.model!r} does not take {field}", param=field)
        if req.n != 1:
            raise RequestError(400, f"the agent model {req.model!r} answers with n=1", param="n")
        question, _history, system = agent_conversation(req.messages)
        ext = (req.model_extra or {}).get("agentkit")
        bengine = BatchedEngine(batcher)
        work = asyncio.ensure_future(run_in_threadpool(services[req.model].answer, bengine, question, system, ext))
        text, ext_out, usage = await wait(request, work, bengine.cancel)
        plain = req.model_copy(update={"logprobs": False, "tools": None})
        resp = chat_response(plain, "", [Completion(text, [], [], "stop", 0)], 0, engine, req.model)
        resp.update({"agentkit": ext_out, "usage": usage})
        return _respond(req, resp)

    async def run_agent(request: Request, req: ChatCompletionRequest):
        cfg = agent_config or AgentConfig(max_wall_s=600.0)  # a request's agent gives up after 10 minutes
        for field in ("response_format", "structured_outputs", "tools"):
            if getattr(req, field) is not None:  # its turns are the agent's own format; its answer is text
                raise RequestError(400, f"the agent model {req.model!r} does not take {field}", param=field)
        params = sampling(req, default_max=cfg.max_tokens_per_turn)
        turns = (req.model_extra or {}).get("max_turns")  # an extension field: extra_body={"max_turns": 3}
        if turns is not None and (not isinstance(turns, int) or isinstance(turns, bool) or not 1 <= turns <= 16):
            raise RequestError(400, "max_turns must be an integer from 1 to 16", param="max_turns")
        cfg = type(cfg)(
            **{
                **cfg.__dict__,
                "temperature": params.temperature,
                "top_p": params.top_p,
                "seed": req.seed if req.seed is not None else cfg.seed,
                "n": req.n,
                "max_tokens_per_turn": params.max_tokens,
                "max_turns": turns or cfg.max_turns,
            }
        )
        question, history, system = agent_conversation(req.messages)
        cfg.examples = [*cfg.examples, *history]
        if system:
            cfg.system_prompt = f"{cfg.system_prompt}\n\n{system}"
        bengine = BatchedEngine(batcher)
        if req.stream:  # progress events go out while the loop runs
            loop = asyncio.get_running_loop()
            events: asyncio.Queue = asyncio.Queue()
            emit = lambda e: loop.call_soon_threadsafe(events.put_nowait, e)  # noqa: E731
            work = asyncio.ensure_future(run_in_threadpool(rollout, bengine, [question], agents[req.model], cfg, emit))
            return StreamingResponse(agent_stream(req, bengine, work, events), media_type="text/event-stream")
        # anyio's thread pool (40 threads), not asyncio's default executor (cpu + 4: 6 agents at once here)
        work = asyncio.ensure_future(run_in_threadpool(rollout, bengine, [question], agents[req.model], cfg))
        trajs = await wait(request, work, bengine.cancel)
        return _agent_response(req, bengine, trajs)

    async def agent_stream(req, bengine, work, events: asyncio.Queue):
        base = {
            "id": "chatcmpl-" + uuid.uuid4().hex,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": req.model,
        }
        try:
            async for progress in _drain(events, work):
                yield "data: " + json.dumps({**base, "choices": [], "agentkit": progress}) + "\n\n"
            try:
                resp = _agent_response(req, bengine, work.result())
            except Exception as e:
                yield _sse_error(e)
                return
            include = bool(req.stream_options and req.stream_options.include_usage)
            for chunk in stream_chunks(resp, include):
                yield chunk
        finally:  # the client went away mid-stream (or the stream ended): nothing more runs for it
            bengine.cancel()

    def _agent_response(req, bengine, trajs):
        outs, traces = [], []
        for t in trajs:
            final = t.answer if t.answer is not None else t.segments[-1].text if t.segments else ""
            outs.append(
                Completion(
                    text=final,
                    token_ids=t.completion_ids,
                    logprobs=[],
                    finish_reason="stop",
                    prompt_tokens=len(t.prompt_ids),
                )
            )
            traces.append(
                {
                    "finish": t.finish,
                    "tool_calls": t.tool_calls,
                    "answer": t.answer,
                    "trace": [{"kind": s.kind, "text": s.text, "tool": s.tool, "ok": s.ok} for s in t.segments],
                }
            )
        plain = req.model_copy(update={"logprobs": False, "tools": None})
        resp = chat_response(plain, "", outs, 0, engine, req.model, {"agentkit": traces})
        resp["usage"] = {**bengine.usage, "total_tokens": sum(bengine.usage.values())}
        return resp

    async def live_stream(req: ChatCompletionRequest, ids: list[int], params):
        """Token-by-token SSE: deltas are sent as the engine produces them (requests with client-side tools
        are streamed after generation, since their tool calls are parsed from the whole text)."""
        loop = asyncio.get_running_loop()
        deltas: asyncio.Queue = asyncio.Queue()
        fut = batcher.submit([ids], params, lambda _i, j, d: loop.call_soon_threadsafe(deltas.put_nowait, (j, d)))
        try:
            async for event in _live_events(req, ids, params, fut, deltas):
                yield event
        finally:  # the client went away mid-stream: its generation ends at the next decode step
            batcher.cancel(fut)

    async def _live_events(req, ids, params, fut, deltas: asyncio.Queue):
        done = asyncio.wrap_future(fut)
        base = {
            "id": "chatcmpl-" + uuid.uuid4().hex,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": req.model,
        }
        include = bool(req.stream_options and req.stream_options.include_usage)

        def event(choices):
            return "data: " + json.dumps({**base, "choices": choices, **({"usage": None} if include else {})}) + "\n\n"

        for j in range(params.n):
            yield event([{"index": j, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        sent = [0] * params.n  # characters streamed per sample
        async for j, delta in _drain(deltas, done):
            sent[j] += len(delta)
            yield event([{"index": j, "delta": {"content": delta}, "finish_reason": None}])
        try:
            (outs,) = done.result()
            failed = next((c for c in outs if c.finish_reason == "error"), None)
            if failed is not None:
                raise RequestError(400, f"the output constraint failed: {failed.stop_reason}", code="grammar_error")
        except Exception as e:
            yield _sse_error(e)
            return
        for j, c in enumerate(outs):  # what was not streamed (an engine without text callbacks: all of it)
            if c.text[sent[j] :]:
                yield event([{"index": j, "delta": {"content": c.text[sent[j] :]}, "finish_reason": None}])
            yield event([{"index": j, "delta": {}, "finish_reason": c.finish_reason}])
        if include:
            used = sum(c.completion_tokens for c in outs)
            yield (
                "data: "
                + json.dumps(
                    {
                        **base,
                        "choices": [],
                        "usage": {
                            "prompt_tokens": len(ids),
                            "completion_tokens": used,
                            "total_tokens": len(ids) + used,
                        },
                    }
                )
                + "\n\n"
            )
        yield "data: [DONE]\n\n"

    def _respond(req, resp):
        if not req.stream:
            return resp
        include = bool(req.stream_options and req.stream_options.include_usage)
        return StreamingResponse(stream_chunks(resp, include), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(request: Request):
        """Text completions. ``echo``: each choice's text and logprobs start with the prompt's (prompt logprobs
        by teacher forcing, the first token's None), then the completion's, as vLLM returns them; with
        ``max_tokens=0`` only the prompt is scored (teacher scoring)."""
        req = await _parse(request, CompletionRequest)
        check_n(req)
        prompts = (
            [req.prompt]
            if isinstance(req.prompt, str) or (req.prompt and isinstance(req.prompt[0], int))
            else list(req.prompt)
        )
        if len(prompts) > limits.max_prompts:
            raise RequestError(
                400,
                f"{len(prompts)} prompts; this server takes at most {limits.max_prompts} per request",
                param="prompt",
            )
        if prompts and isinstance(prompts[0], list):
            check_ids(prompts[0], "prompt")
        params = sampling(req, default_max=16, constraint=constraint_of(req))
        encoded = [engine.encode(p) if p else [] for p in prompts]
        if not encoded or not all(encoded):
            raise RequestError(400, "the prompt is empty (no tokens)", param="prompt")
        for ids in encoded:
            params = check(req.model, ids, params, req.max_tokens)
        as_ids = req.return_tokens_as_token_ids
        if params.max_tokens == 0 and not req.echo:
            raise RequestError(400, "max_tokens=0 needs echo=true (prompt scoring)", param="max_tokens")
        if params.max_tokens > 0:
            outs = await generate(request, encoded, params, "structured_outputs")
        else:  # prompt scoring alone: an empty completion per sample
            outs = [
                [Completion("", [], [], "length", len(e), top_logprobs=[]) for _ in range(params.n)] for e in encoded
            ]
        echoed = await run_in_threadpool(_prompt_logprobs, encoded) if req.echo else None
        choices, used = [], 0
        for k, cs in enumerate(outs):
            for c in cs:
                ids, lps, text = list(c.token_ids), list(c.logprobs), c.text
                tops = list(c.top_logprobs or [{}] * len(ids))
                if echoed is not None:
                    ids, lps, tops = encoded[k] + ids, echoed[k] + lps, [{}] * len(encoded[k]) + tops
                    text = engine.decode(encoded[k], skip_special_tokens=False) + text
                lp = None
                if req.logprobs is not None:
                    lp = {
                        "tokens": token_names(engine, ids, as_ids),
                        "token_logprobs": lps,
                        "text_offset": _offsets(engine.token_strings(ids)),
                        "top_logprobs": [
                            dict(zip(token_names(engine, list(t), as_ids), t.values())) or None for t in tops
                        ]
                        if req.logprobs
                        else None,
                    }
                choices.append({"index": len(choices), "text": text, "logprobs": lp, "finish_reason": c.finish_reason})
                used += c.completion_tokens
        prompt_tokens = sum(len(e) for e in encoded)
        return {
            "id": "cmpl-" + uuid.uuid4().hex,
            "object": "text_completion",
            "created": int(time.time()),
            "model": req.model,
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": used, "total_tokens": prompt_tokens + used},
        }

    def _prompt_logprobs(encoded: list[list[int]]) -> list[list[float | None]]:
        """log p(token i | tokens < i) for each prompt; the first token has none."""
        with batcher.lock:
            scored = engine.score([ids[:1] for ids in encoded], [ids[1:] for ids in encoded])
        return [[None, *s.logprobs] for s in scored]

    return app


async def _drain(items: asyncio.Queue, done: asyncio.Future):
    """What is put on ``items`` until ``done`` completes, including what was queued before it did."""
    while not done.done() or not items.empty():
        getter = asyncio.ensure_future(items.get())
        await asyncio.wait({getter, done}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            yield getter.result()
        else:
            getter.cancel()


def _sse_error(e: Exception) -> str:
    """An error after a stream began: a final event carrying the OpenAI error object, then ``[DONE]``."""
    if isinstance(e, RequestError):
        err = {"message": e.message, "type": e.type, "param": e.param, "code": e.code}
    else:
        err = {"message": f"{type(e).__name__}: {e}", "type": "server_error", "param": None, "code": None}
    return "data: " + json.dumps({"error": err}) + "\n\ndata: [DONE]\n\n"


def _error_response(e: RequestError):
    from agentkit.server.http import openai_error

    return openai_error(e.status, e.message, e.type, e.param, e.code)


def _constraint_param(req: ChatCompletionRequest) -> str | None:
    """The field whose constraint a chat request's completion follows."""
    if req.tools and req.tool_choice not in (None, "auto", "none"):
        return "tools"
    return "structured_outputs" if req.structured_outputs is not None else "response_format"


def _offsets(tokens: list[str]) -> list[int]:
    out, pos = [], 0
    for t in tokens:
        out.append(pos)
        pos += len(t)
    return out
