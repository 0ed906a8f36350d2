"""Serving: requests from concurrent clients become shared engine work, interleaved a step at a time.

One thread owns the engine. ``Batcher.submit`` queues a request. The thread gathers what arrived (waiting
``window_s`` for more when the engine is idle), groups it by ``SamplingParams.batch_key`` (everything but per-prompt
fields such as seeds), and starts each group as one generation job whose per-prompt fields are the requests' own.
Then it runs one step (one forward pass) of every running job in turn, taking in new requests between steps:

- **fairness**: a request that arrives while jobs decode waits for them to end if they are bound to end within
  ``hold_tokens`` (256) steps, so that requests arriving one by one still share jobs; beside a longer job it waits
  ``hold_s`` (1 s) at most, then starts beside it and shares the engine step by step: its wait is bounded by
  ``hold_s`` plus its own length times the running jobs, never by a long request's length;
  ``max_jobs`` bounds the jobs decoding at once (each holds its own keys/values);
- **cancellation**: ``cancel(future)`` (a client that went away) ends that request's samples at the job's next
  step; a job whose requests are all cancelled ends there, and the engine goes idle;
- **isolation**: a job that fails is retried request by request, so one bad request fails alone.

Engines with ``start(prompts, params, on_text) -> job`` (``HFEngine``) run this way; any other engine's
``generate`` runs as one step (vLLM and remote servers schedule their own work).
``BatchedEngine`` puts the Engine interface on a Batcher, so an agent's turns are batched with other clients'.
"""

from __future__ import annotations

import inspect
import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from agentkit.engines.base import Completion, ContextLengthError, Prompt, SamplingParams
from agentkit.engines.streaming import TextCallback

log = logging.getLogger("agentkit.server")


@dataclass
class ServeLimits:
    """What one request may ask of a server (``agentkit serve --max-…``); beyond them it is a 400 (413 for the
    body), answered before anything is generated."""

    max_prompts: int = field(default=64, metadata={"help": "most prompts in one /v1/completions request (400 beyond)"})
    max_n: int = field(default=16, metadata={"help": "most samples per prompt, n (400 beyond)"})
    max_body_mb: float = field(default=16.0, metadata={"help": "largest request body, MB (413 beyond)"})
    max_json_depth: int = field(default=64, metadata={"help": "deepest nesting of a request body's JSON (400 beyond)"})
    max_jobs: int = field(
        default=8, metadata={"help": "generation jobs decoding at once, interleaved step by step; more wait"}
    )
    hold_s: float = field(
        default=1.0,
        metadata={
            "help": "seconds a request waits beside a job that may run past 256 more steps before it starts beside "
            "it (0: at once); jobs that end sooner it waits for, to share the next one"
        },
    )

    def __post_init__(self) -> None:
        for name in ("max_prompts", "max_n", "max_body_mb", "max_json_depth", "max_jobs"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not self.hold_s >= 0:
            raise ValueError(f"hold_s must be >= 0, got {self.hold_s!r}")

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 2**20)


class Cancelled(Exception):
    """The request was cancelled (its client went away) before it finished."""


@dataclass
class _Request:
    prompts: list[Prompt]
    params: SamplingParams
    future: Future
    on_text: TextCallback | None = None
    cancelled: bool = False
    first: int = 0  # index of its first prompt in its job
    arrived: float = field(default_factory=time.monotonic)


@dataclass
class _Job:
    requests: list[_Request]
    work: object  # the engine's job (``step``/``cancel``/``result``), or a whole-call stand-in
    budget: int = 0  # steps it may take at most: a prefill, then one per token (drafts only shorten it)
    steps: int = 0
    aborted: set[int] = field(default_factory=set)  # requests (by position) whose prompts were cancelled

    def left(self) -> int:
        return self.budget - self.steps


class _WholeCall:
    """A job for an engine without steps: its ``generate`` in one step."""

    def __init__(self, engine, prompts, params, on_text):
        self.call = lambda: engine.generate(prompts, params, **({"on_text": on_text} if on_text else {}))
        self.out = None

    def step(self) -> bool:
        self.out = self.call()
        return True

    def cancel(self, prompts) -> None:
        pass

    def result(self):
        return self.out


class Batcher:
    """See the module docstring. ``window_s``: how long an idle engine waits for more requests to group;
    ``max_prompts``: prompts gathered into one job; ``max_jobs``: jobs decoding at once; ``hold_s`` and
    ``hold_tokens``: how long a newcomer waits for running jobs to end before it starts beside them
    (``_start_jobs``)."""

    def __init__(
        self,
        engine,
        window_s: float = 0.01,
        max_prompts: int = 64,
        max_jobs: int = 8,
        hold_s: float = 1.0,
        hold_tokens: int = 256,
    ):
        self.engine, self.window_s, self.max_prompts, self.max_jobs = engine, window_s, max_prompts, max_jobs
        self.hold_s, self.hold_tokens = hold_s, hold_tokens
        self._q: queue.Queue[_Request] = queue.Queue()
        self._waiting: list[_Request] = []
        self._active: list[_Job] = []
        self.calls = 0  # jobs started (engine calls; for tests and metrics)
        self.steps = 0  # job steps run
        self._last_error: tuple[str, float, int] = ("", 0.0, 0)  # (signature, first seen, repeats)
        self.lock = threading.Lock()  # the engine runs one thing at a time (a step here, score from callers)
        self._stepwise = hasattr(engine, "start")
        self._streams = self._stepwise or "on_text" in inspect.signature(engine.generate).parameters
        self._by_future: dict[int, _Request] = {}
        self._thread = threading.Thread(target=self._loop, daemon=True, name="agentkit-batcher")
        self._thread.start()

    def submit(self, prompts: list[Prompt], params: SamplingParams, on_text: TextCallback | None = None) -> Future:
        """Queue a request; ``on_text(prompt_index, sample_index, delta)`` streams its text (HFEngine). The future
        holds the completions per prompt, or the engine's exception, or ``Cancelled``."""
        req = _Request(list(prompts), params, Future(), on_text)
        self._by_future[id(req.future)] = req
        self._q.put(req)
        return req.future

    def cancel(self, future: Future) -> None:
        """The client of this request went away: end its work at the next step (no-op once it is done)."""
        req = self._by_future.get(id(future))
        if req is not None:
            req.cancelled = True

    def uses_adapter(self, name: str) -> bool:
        """Whether a running or queued request asks for the LoRA adapter ``name``."""
        reqs = [r for job in list(self._active) for r in job.requests] + list(self._waiting) + list(self._q.queue)
        return any(name in r.params.per_prompt("adapters", len(r.prompts)) for r in reqs)

    @property
    def idle(self) -> bool:
        """Nothing running and nothing queued."""
        return not self._active and not self._waiting and self._q.empty()

    # ---- the engine thread ----------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            try:
                self._gather()
                self._start_jobs()
                for job in list(self._active):
                    self._step(job)
            except Exception:  # noqa: BLE001 - a bug here must not stop the thread every request waits on
                log.exception("the batcher's loop failed; it goes on")

    def _gather(self) -> None:
        """Move queued requests to ``_waiting``; when nothing runs, block for one, then wait ``window_s`` for
        more to group with it."""
        if not self._active and not self._waiting:
            self._waiting.append(self._q.get())
            deadline = time.monotonic() + self.window_s
            while sum(len(r.prompts) for r in self._waiting) < self.max_prompts:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    self._waiting.append(self._q.get(timeout=left))
                except queue.Empty:
                    break
        while True:
            try:
                self._waiting.append(self._q.get_nowait())
            except queue.Empty:
                break

    def _start_jobs(self) -> None:
        """Start waiting requests, grouped by batch key, while fewer than ``max_jobs`` run (oldest first).

        While jobs run, newcomers wait for them to end, so that requests arriving one by one (an agent's turns
        between tool calls) still share jobs: a CPU decode step costs about the same for one row as for eight.
        They wait for as long as every running job is bound to end within ``hold_tokens`` more steps; beside a job
        that may run longer, they wait ``hold_s`` at most, then start beside it, so no request waits on a long
        one."""
        for req in [r for r in self._waiting if r.cancelled or r.future.cancelled()]:
            self._waiting.remove(req)
            self._finish(req, error=Cancelled())
        if self._active and self._waiting:
            ends_soon = all(job.left() <= self.hold_tokens for job in self._active)
            if ends_soon or time.monotonic() - self._waiting[0].arrived < self.hold_s:
                return
        while self._waiting and len(self._active) < self.max_jobs:
            key = self._waiting[0].params.batch_key()
            group, size = [], 0
            for r in self._waiting:
                if r.params.batch_key() == key and (not group or size + len(r.prompts) <= self.max_prompts):
                    group.append(r)
                    size += len(r.prompts)
            for r in group:
                self._waiting.remove(r)
            self._begin(group)

    def _begin(self, group: list[_Request]) -> None:
        prompts, owner = [], []
        for r in group:
            r.first = len(prompts)
            prompts += r.prompts
            owner += [(r, k) for k in range(len(r.prompts))]

        def on_text(i: int, j: int, delta: str) -> None:
            r, k = owner[i]
            if r.on_text is not None:
                r.on_text(k, j, delta)

        streaming = self._streams and any(r.on_text is not None for r in group)
        try:
            params = SamplingParams.concat([(r.params, len(r.prompts)) for r in group])
            if self._stepwise:
                work = self.engine.start(prompts, params, on_text if streaming else None)
            else:
                work = _WholeCall(self.engine, prompts, params, on_text if streaming else None)
        except Exception as e:
            self._failed(group, e)
            return
        self.calls += 1
        rows = sum(len(r.prompts) * r.params.n for r in group)
        batches = -(-rows // max(1, getattr(self.engine, "max_batch_size", rows)))  # micro-batches run in turn
        self._active.append(_Job(group, work, budget=batches * (group[0].params.max_tokens + 2)))

    def _step(self, job: _Job) -> None:
        for pos, r in enumerate(job.requests):
            r.cancelled = r.cancelled or r.future.cancelled()  # cancelled by us, or by its caller's future
            if r.cancelled and pos not in job.aborted:
                job.aborted.add(pos)
                job.work.cancel(range(r.first, r.first + len(r.prompts)))
        try:
            with self.lock:
                done = job.work.step()
            self.steps += 1
            job.steps += 1
        except Exception as e:
            self._active.remove(job)
            self._failed(job.requests, e)
            return
        if done:
            self._active.remove(job)
            outs = job.work.result()
            for r in job.requests:
                part = outs[r.first : r.first + len(r.prompts)]
                self._finish(r, result=part) if not r.cancelled else self._finish(r, error=Cancelled())

    def _failed(self, group: list[_Request], e: Exception) -> None:
        """A job that failed: one bad request must not fail the others, so a group is retried one by one."""
        if len(group) > 1:
            for r in group:
                self._begin([r])
            return
        if not isinstance(e, ContextLengthError):  # a prompt too long is the client's to hear, not a failure to log
            self._log_failure(e, len(group[0].prompts))
        e.agentkit_logged = True  # type: ignore[attr-defined]  # the HTTP layer answers without logging again
        self._finish(group[0], error=e)

    def _finish(self, req: _Request, result=None, error: Exception | None = None) -> None:
        self._by_future.pop(id(req.future), None)
        if not req.future.set_running_or_notify_cancel():  # the caller cancelled the future itself
            return
        if error is not None:
            req.future.set_exception(error)
        else:
            req.future.set_result(result)

    def _log_failure(self, e: Exception, n_prompts: int, quiet_s: float = 60.0) -> None:
        """The traceback once; the same error again within ``quiet_s`` (a client retrying) as one short line."""
        sig, now = f"{type(e).__name__}: {e}", time.monotonic()
        last, first, repeats = self._last_error
        if sig == last and now - first < quiet_s:
            self._last_error = (sig, first, repeats + 1)
            log.error(
                "engine call failed again (%d prompts): %s (%d times in %.0f s)",
                n_prompts,
                sig,
                repeats + 2,
                now - first,
            )
            return
        self._last_error = (sig, now, 0)
        log.exception("engine call failed (%d prompts)", n_prompts)


class BatchedEngine:
    """The Engine protocol over a Batcher, for one request: ``generate`` is batched with other clients' calls,
    ``score`` waits for the engine, the rest passes through; ``usage`` sums this request's calls. ``cancel()``
    (its client went away) ends the call in flight and makes every later one raise ``Cancelled``, so an agent's
    rollout stops at its next turn."""

    def __init__(self, batcher: Batcher):
        self.batcher = batcher
        self.engine = batcher.engine
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.cancelled = False
        self._inflight: set[Future] = set()

    def __getattr__(self, name: str):  # model_name, max_model_len, encode, tokenize, decode, ...
        return getattr(self.engine, name)

    def generate(self, prompts: list[Prompt], params: SamplingParams | None = None) -> list[list[Completion]]:
        if self.cancelled:
            raise Cancelled("the request was cancelled")
        fut = self.batcher.submit(prompts, params or SamplingParams())
        self._inflight.add(fut)
        if self.cancelled:  # cancelled between the check and the submit
            self.batcher.cancel(fut)
        try:
            outs = fut.result()
        finally:
            self._inflight.discard(fut)
        for cs in outs:  # usage over every internal call (agent turns included)
            self.usage["prompt_tokens"] += cs[0].prompt_tokens if cs else 0
            self.usage["completion_tokens"] += sum(c.completion_tokens for c in cs)
        return outs

    def cancel(self) -> None:
        self.cancelled = True
        for fut in list(self._inflight):
            self.batcher.cancel(fut)

    def score(self, contexts, continuations, entropy: bool = False, top_logprobs: int = 0):
        if self.cancelled:
            raise Cancelled("the request was cancelled")
        with self.batcher.lock:
            return self.engine.score(contexts, continuations, entropy, top_logprobs)
