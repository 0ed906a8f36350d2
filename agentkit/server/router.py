"""The OpenAI-compatible HTTP API (FastAPI): /v1/models, /v1/chat/completions, /v1/completions, /health.

Served models: the engine's model under its name, and each agent (``agentkit/tir``), which runs the tool loop
server-side and returns the final answer with the trace in an ``agentkit`` extension field.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from agentkit.server.chat import (
    agent_conversation,
    chat_response,
    sampling,
    stream_chunks,
    to_messages,
)
from agentkit.server.http import RequestError, install_error_handlers, parse_body, require_bearer_key
from agentkit.server.protocol import ChatCompletionRequest, CompletionRequest
from agentkit.server.serving import BatchedEngine, Batcher


async def _parse(request: Request, cls):
    return parse_body(await request.body(), cls)


def create_app(engine, model_name: str, api_key: str | None = None, tools: dict[str, Any] | None = None,
               agent_name: str = "agentkit/tir", agent_config=None, window_s: float = 0.01) -> FastAPI:
    from agentkit.agent import AgentConfig, rollout

    app = FastAPI(title="agentkit", version="1", description="OpenAI-compatible API over agentkit engines and agents")
    batcher = Batcher(engine, window_s=window_s)
    app.state.batcher = batcher
    agents = {agent_name: tools} if tools else {}
    max_len = getattr(engine, "max_model_len", None)

    require_bearer_key(app, api_key)
    install_error_handlers(app)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models():
        now = int(time.time())
        return {"object": "list", "data": [{"id": m, "object": "model", "created": now, "owned_by": "agentkit"}
                                           for m in [model_name, *agents]]}

    def check(model: str, prompt_ids: list[int], params) -> None:
        if model != model_name and model not in agents:
            raise RequestError(404, f"the model {model!r} does not exist; see GET /v1/models",
                               "invalid_request_error", "model", "model_not_found")
        if max_len and len(prompt_ids) >= max_len:
            raise RequestError(400, f"the prompt has {len(prompt_ids)} tokens; the model's context length is "
                                    f"{max_len}", param="messages", code="context_length_exceeded")

    async def generate(prompts, params):
        return await asyncio.wrap_future(batcher.submit(prompts, params))

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        req = await _parse(request, ChatCompletionRequest)
        if req.model in agents:
            return await run_agent(req)
        msgs, prefill = to_messages(req)
        ids = engine.encode(msgs) + (engine.tokenizer(prefill, add_special_tokens=False).input_ids if prefill else [])
        params = sampling(req)
        check(req.model, ids, params)
        if req.stream and not (req.tools and req.tool_choice != "none"):
            return StreamingResponse(live_stream(req, ids, params), media_type="text/event-stream")
        (outs,) = await generate([ids], params)
        resp = chat_response(req, prefill, outs, len(ids), engine, req.model)
        return _respond(req, resp)

    async def run_agent(req: ChatCompletionRequest):
        cfg = agent_config or AgentConfig()
        params = sampling(req, default_max=cfg.max_tokens_per_turn)
        turns = (req.model_extra or {}).get("max_turns")  # an extension field: extra_body={"max_turns": 3}
        if turns is not None and (not isinstance(turns, int) or isinstance(turns, bool) or not 1 <= turns <= 16):
            raise RequestError(400, "max_turns must be an integer from 1 to 16", param="max_turns")
        cfg = type(cfg)(**{**cfg.__dict__, "temperature": params.temperature, "top_p": params.top_p,
                           "seed": req.seed if req.seed is not None else cfg.seed, "n": req.n,
                           "max_tokens_per_turn": params.max_tokens, "max_turns": turns or cfg.max_turns})
        question, history, system = agent_conversation(req.messages)
        cfg.examples = [*cfg.examples, *history]
        if system:
            cfg.system_prompt = f"{cfg.system_prompt}\n\n{system}"
        bengine = BatchedEngine(batcher)
        if req.stream:  # progress events go out while the loop runs
            loop = asyncio.get_running_loop()
            events: asyncio.Queue = asyncio.Queue()
            work = loop.run_in_executor(None, lambda: rollout(bengine, [question], agents[req.model], cfg,
                                                              lambda e: loop.call_soon_threadsafe(events.put_nowait, e)))
            return StreamingResponse(agent_stream(req, bengine, work, events), media_type="text/event-stream")
        trajs = await run_in_threadpool(rollout, bengine, [question], agents[req.model], cfg)
        return _agent_response(req, bengine, trajs)

    async def agent_stream(req, bengine, work, events: asyncio.Queue):
        base = {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion.chunk",
                "created": int(time.time()), "model": req.model}
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

    def _agent_response(req, bengine, trajs):
        from agentkit.engines.base import Completion

        outs, traces = [], []
        for t in trajs:
            final = t.answer if t.answer is not None else t.segments[-1].text if t.segments else ""
            outs.append(Completion(text=final, token_ids=t.completion_ids, logprobs=[], finish_reason="stop",
                                   prompt_tokens=len(t.prompt_ids)))
            traces.append({"finish": t.finish, "tool_calls": t.tool_calls, "answer": t.answer,
                           "trace": [{"kind": s.kind, "text": s.text, "tool": s.tool, "ok": s.ok}
                                     for s in t.segments]})
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
        done = asyncio.wrap_future(fut)
        base = {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": req.model}
        include = bool(req.stream_options and req.stream_options.include_usage)

        def event(choices):
            return "data: " + json.dumps({**base, "choices": choices, **({"usage": None} if include else {})}) + "\n\n"

        for j in range(params.n):
            yield event([{"index": j, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        async for j, delta in _drain(deltas, done):
            yield event([{"index": j, "delta": {"content": delta}, "finish_reason": None}])
        try:
            (outs,) = done.result()
        except Exception as e:
            yield _sse_error(e)
            return
        for j, c in enumerate(outs):
            yield event([{"index": j, "delta": {}, "finish_reason": c.finish_reason}])
        if include:
            used = sum(c.completion_tokens for c in outs)
            yield "data: " + json.dumps({**base, "choices": [], "usage": {
                "prompt_tokens": len(ids), "completion_tokens": used, "total_tokens": len(ids) + used}}) + "\n\n"
        yield "data: [DONE]\n\n"

    def _respond(req, resp):
        if not req.stream:
            return resp
        include = bool(req.stream_options and req.stream_options.include_usage)
        return StreamingResponse(stream_chunks(resp, include), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(request: Request):
        req = await _parse(request, CompletionRequest)
        prompts = [req.prompt] if isinstance(req.prompt, str) or (req.prompt and isinstance(req.prompt[0], int)) \
            else list(req.prompt)
        params = sampling(req, default_max=16)
        encoded = [engine.encode(p) for p in prompts]
        for ids in encoded:
            check(req.model, ids, params)
        if req.echo and params.max_tokens == 0:
            return _echo(req, encoded)
        outs = await generate(encoded, params)
        choices, used = [], 0
        for cs in outs:
            for c in cs:
                lp = None
                if req.logprobs is not None:
                    toks = [engine.tokenizer.decode([t]) for t in c.token_ids]
                    lp = {"tokens": toks, "token_logprobs": c.logprobs, "text_offset": _offsets(toks),
                          "top_logprobs": [{engine.tokenizer.decode([a]): v for a, v in t.items()}
                                           for t in (c.top_logprobs or [])]}
                choices.append({"index": len(choices), "text": c.text, "finish_reason": c.finish_reason,
                                "logprobs": lp})
                used += c.completion_tokens
        prompt_tokens = sum(len(e) for e in encoded)
        return {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion", "created": int(time.time()),
                "model": req.model, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": used,
                          "total_tokens": prompt_tokens + used}}

    def _echo(req, encoded):
        """Prompt logprobs (teacher scoring): token i given tokens < i; the first token has none."""
        choices = []
        for ids in encoded:
            with batcher.lock:
                scored = engine.score([ids[:1]], [ids[1:]])[0]
            toks = [engine.tokenizer.decode([t]) for t in ids]
            choices.append({"index": len(choices), "text": "".join(toks), "finish_reason": "length",
                            "logprobs": {"tokens": toks, "token_logprobs": [None, *scored.logprobs],
                                         "text_offset": _offsets(toks), "top_logprobs": None}})
        n = sum(len(e) for e in encoded)
        return {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion", "created": int(time.time()),
                "model": req.model, "choices": choices,
                "usage": {"prompt_tokens": n, "completion_tokens": 0, "total_tokens": n}}

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
    return ("data: " + json.dumps({"error": {"message": f"{type(e).__name__}: {e}", "type": "server_error",
                                             "param": None, "code": None}}) + "\n\ndata: [DONE]\n\n")


def _offsets(tokens: list[str]) -> list[int]:
    out, pos = [], 0
    for t in tokens:
        out.append(pos)
        pos += len(t)
    return out
