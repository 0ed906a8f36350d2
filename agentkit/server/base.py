"""``OpenAIServing``: what every route serves from (vLLM's ``serving_engine.OpenAIServing``).

It holds the engine, the batcher that shares it between clients, the agent models and services, and the limits;
its checks are the ones every route applies before anything is generated (the model exists, the prompt and
``max_tokens`` fit the context, token ids name tokens, ``n`` is within the limit), and ``wait`` is how a route
awaits the batcher without outliving its client. Routes receive it as a dependency (``Serving``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from concurrent.futures import Future
from typing import Annotated, Any

from fastapi import Depends, Request

from agentkit.agent import AgentConfig
from agentkit.engines.base import Completion, SamplingParams
from agentkit.server.http import RequestError
from agentkit.server.response_store import ResponseStore
from agentkit.server.serving import Batcher, Cancelled, ServeLimits
from agentkit.tools.stream_parsers import REASONING_PARSERS


class OpenAIServing:
    """The engine served under ``model_name``, with more models beside it.

    Args:
        engine: an engine (``agentkit.engines``); ``max_model_len`` and ``tokenizer`` are used when it has them.
        model_name: the name the engine's model is served under.
        agents: agent models, name → the tools its loop runs (``agentkit/tir``).
        agent_config: the agents' loop settings (a request's sampling replaces its ``sampling``).
        services: more agent models, name → an object with ``answer(engine, question, system, extension) ->
            (text, extension out, usage)``, run in a worker thread over the batched engine (``agentkit.ace.serve``).
        limits: what one request may ask (``ServeLimits``).
        window_s: how long the batcher waits for more requests when the engine is idle.
        responses: where the Responses API stores responses (default: an in-memory ``ResponseStore``).
        reasoning_parser: how replies' reasoning is split off (``qwen3``, ``deepseek_r1``; None: not at all).
        runtime_lora: whether ``POST /v1/load_lora_adapter`` and ``unload_lora_adapter`` may change the adapters
            (they read server-side paths: off unless asked, as vLLM's ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``).
    """

    def __init__(
        self,
        engine,
        model_name: str,
        *,
        agents: dict[str, Any] | None = None,
        agent_config: AgentConfig | None = None,
        services: dict[str, Any] | None = None,
        limits: ServeLimits | None = None,
        window_s: float = 0.01,
        responses: ResponseStore | None = None,
        reasoning_parser: str | None = None,
        runtime_lora: bool = False,
    ):
        self.engine, self.model_name = engine, model_name
        self.agents, self.services = agents or {}, services or {}
        self.agent_config = agent_config or AgentConfig(max_wall_s=600.0)  # a request's agent gives up after 10 min
        self.limits = limits or ServeLimits()
        self.responses = ResponseStore(":memory:") if responses is None else responses  # an empty store is falsy
        if reasoning_parser is not None and reasoning_parser not in REASONING_PARSERS:
            raise ValueError(f"unknown reasoning parser {reasoning_parser!r}; known: {', '.join(REASONING_PARSERS)}")
        self.reasoning_parser = reasoning_parser
        self.runtime_lora = runtime_lora
        self.background: dict[str, asyncio.Task] = {}  # background responses still running, by id
        self.batcher = Batcher(engine, window_s=window_s, max_jobs=self.limits.max_jobs, hold_s=self.limits.hold_s)
        self.max_len: int | None = getattr(engine, "max_model_len", None)
        tokenizer = getattr(engine, "tokenizer", None)
        self.vocab: int | None = len(tokenizer) if tokenizer is not None else None

    def model_names(self) -> list[str]:
        return [self.model_name, *self.adapters(), *self.agents, *self.services]

    def adapters(self) -> dict[str, str]:
        """The LoRA adapters the engine serves (``--lora``, ``POST /v1/load_lora_adapter``): name -> path."""
        return dict(getattr(self.engine, "adapters", {}) or {})

    def adapter_of(self, model: str) -> str | None:
        """The adapter a request's ``model`` names: an adapter's name, or ``BASE:ADAPTER``; None for the base."""
        if model in self.adapters():
            return model
        base, _, name = model.partition(":")
        return name if base == self.model_name and name in self.adapters() else None

    # --------------------------------------------------------------------------------- checks (400 / 404)

    def check_model(self, model: str) -> None:
        if model not in self.model_names() and self.adapter_of(model) is None:
            raise RequestError(
                404, f"the model {model!r} does not exist; see GET /v1/models", param="model", code="model_not_found"
            )

    def sampling(self, model: str, params: SamplingParams) -> SamplingParams:
        """``params`` with the adapter ``model`` names (a request for an adapter runs the base with it)."""
        adapter = self.adapter_of(model)
        return dataclasses.replace(params, adapter=adapter) if adapter else params

    def check_n(self, n: int) -> None:
        if n > self.limits.max_n:
            raise RequestError(400, f"n is {n}; this server samples at most {self.limits.max_n} per prompt", param="n")

    def check_ids(self, ids: list[int], param: str) -> None:
        """Token ids a client sent must name tokens of the vocabulary."""
        if self.vocab is not None and ids and not 0 <= min(ids) <= max(ids) < self.vocab:
            bad = next(t for t in ids if not 0 <= t < self.vocab)
            raise RequestError(400, f"token id {bad} is outside the vocabulary (0..{self.vocab - 1})", param=param)

    def fit(self, prompt_ids: list[int], params: SamplingParams, asked: int | None) -> SamplingParams:
        """``params`` with ``max_tokens`` cut to the context the prompt leaves. vLLM's rule: a prompt that fills the
        context, or a prompt plus the client's own ``max_tokens`` (``asked``) beyond it, is a 400
        (``context_length_exceeded``); a default is cut to what is left."""
        n, max_len = len(prompt_ids), self.max_len
        if not max_len:
            return params
        if n >= max_len:
            raise RequestError(
                400,
                f"the prompt has {n} tokens; the model's context length is {max_len}",
                param="messages",
                code="context_length_exceeded",
            )
        if asked is not None and asked > max_len - n:
            raise RequestError(
                400,
                f"This model's maximum context length is {max_len} tokens. However, you requested {n + asked} "
                f"tokens ({n} in the prompt, {asked} in the completion). Please reduce the length of the prompt or "
                "completion.",
                param="max_tokens",
                code="context_length_exceeded",
            )
        return dataclasses.replace(params, max_tokens=min(params.max_tokens, max_len - n))

    # ----------------------------------------------------------------------------------------- running

    async def wait(self, request: Request, fut: Future | asyncio.Future, on_gone: Callable[[], None] | None = None):
        """The result of ``fut`` (the batcher's answer, or a worker's); a client that goes away meanwhile has its
        work cancelled (within a decode step: ``on_gone``, by default the batcher's ``cancel``) and gets 499."""
        afut = asyncio.wrap_future(fut) if isinstance(fut, Future) else fut

        def gone():
            (on_gone or (lambda: self.batcher.cancel(fut)))()
            afut.add_done_callback(lambda f: f.cancelled() or f.exception())  # its end is nobody's to read

        try:
            while True:
                done, _ = await asyncio.wait({afut}, timeout=0.1)
                if done:
                    try:
                        return afut.result()
                    except Cancelled:
                        raise client_gone() from None
                if await request.is_disconnected():
                    gone()
                    raise client_gone()
        except asyncio.CancelledError:  # the server dropped this handler (its client went away, or shutdown)
            gone()
            raise

    async def generate(
        self, request: Request, prompts: list[list[int]], params: SamplingParams, constraint_param: str | None = None
    ) -> list[list[Completion]]:
        """Completions of ``prompts`` through the batcher; a row whose output constraint could not go on fails this
        request with a 400 (``grammar_error``) while the batch's other requests finish."""
        outs = await self.wait(request, self.batcher.submit(prompts, params))
        failed = next((c for cs in outs for c in cs if c.finish_reason == "error"), None)
        if failed is not None:
            raise grammar_error(failed, constraint_param)
        return outs


def grammar_error(failed: Completion, param: str | None = None) -> RequestError:
    return RequestError(400, f"the output constraint failed: {failed.stop_reason}", param=param, code="grammar_error")


def client_gone() -> RequestError:
    return RequestError(499, "the client closed the request", code="client_closed")


def _serving(request: Request) -> OpenAIServing:
    return request.app.state.serving


Serving = Annotated[OpenAIServing, Depends(_serving)]
"""A route's parameter ``serving: Serving`` is the app's ``OpenAIServing``."""
