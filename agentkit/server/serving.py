"""Serving: requests from concurrent clients become shared engine calls.

One thread owns the engine. ``Batcher.submit`` queues a request; the thread waits ``window_s`` for more, groups
the queued requests by ``SamplingParams.batch_key`` (everything but per-prompt fields such as seeds) and runs each
group as one ``engine.generate`` call whose per-prompt fields are the requests' own, joined in order.
``BatchedEngine`` puts the Engine interface on a Batcher, so an agent's turns are batched with other clients'.
"""

from __future__ import annotations

import inspect
import logging
import queue
import threading
import time
from concurrent.futures import Future

from agentkit.engines.base import Completion, Prompt, SamplingParams
from agentkit.engines.streaming import TextCallback

log = logging.getLogger("agentkit.server")


class Batcher:
    def __init__(self, engine, window_s: float = 0.01, max_prompts: int = 64):
        self.engine, self.window_s, self.max_prompts = engine, window_s, max_prompts
        self._q: queue.Queue[tuple[list[Prompt], SamplingParams, Future, TextCallback | None]] = queue.Queue()
        self.calls = 0  # engine calls made (for tests and metrics)
        self._last_error: tuple[str, float, int] = ("", 0.0, 0)  # (signature, first seen, repeats)
        self.lock = threading.Lock()  # the engine runs one call at a time (generate here, score from callers)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="agentkit-batcher")
        self._thread.start()

    def submit(self, prompts: list[Prompt], params: SamplingParams, on_text: TextCallback | None = None) -> Future:
        """Queue a request; ``on_text(prompt_index, sample_index, delta)`` streams its text (HFEngine)."""
        fut: Future = Future()
        self._q.put((prompts, params, fut, on_text))
        return fut

    def _loop(self) -> None:
        while True:
            batch = [self._q.get()]
            deadline = time.monotonic() + self.window_s
            while sum(len(b[0]) for b in batch) < self.max_prompts:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    batch.append(self._q.get(timeout=left))
                except queue.Empty:
                    break
            groups: dict[str, list] = {}
            for item in batch:
                groups.setdefault(item[1].batch_key(), []).append(item)
            for items in groups.values():
                self._run(items)

    def _run(self, items) -> None:
        prompts = [p for ps, *_ in items for p in ps]
        owner = [(cb, k) for ps, _, _, cb in items for k in range(len(ps))]  # global prompt -> (callback, local)

        def on_text(i: int, j: int, delta: str) -> None:
            cb, k = owner[i]
            if cb is not None:
                cb(k, j, delta)

        streaming = (
            any(cb is not None for *_, cb in items) and "on_text" in inspect.signature(self.engine.generate).parameters
        )
        try:
            params = SamplingParams.concat([(p, len(ps)) for ps, p, _, _ in items])
            self.calls += 1
            with self.lock:
                outs = self.engine.generate(prompts, params, **({"on_text": on_text} if streaming else {}))
        except Exception as e:
            if len(items) > 1:  # one bad request must not fail the others: run them one by one
                for item in items:
                    self._run([item])
                return
            self._log_failure(e, len(prompts))
            e.agentkit_logged = True  # type: ignore[attr-defined]  # the HTTP layer answers 500 without logging again
            for _, _, fut, _ in items:
                fut.set_exception(e)
            return
        i = 0
        for ps, _, fut, _ in items:
            fut.set_result(outs[i : i + len(ps)])
            i += len(ps)

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
    ``score`` waits for the engine, the rest passes through; ``usage`` sums this request's calls."""

    def __init__(self, batcher: Batcher):
        self.batcher = batcher
        self.engine = batcher.engine
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}

    def __getattr__(self, name: str):  # model_name, max_model_len, encode, tokenize, decode, ...
        return getattr(self.engine, name)

    def generate(self, prompts: list[Prompt], params: SamplingParams | None = None) -> list[list[Completion]]:
        outs = self.batcher.submit(prompts, params or SamplingParams()).result()
        for cs in outs:  # usage over every internal call (agent turns included)
            self.usage["prompt_tokens"] += cs[0].prompt_tokens if cs else 0
            self.usage["completion_tokens"] += sum(c.completion_tokens for c in cs)
        return outs

    def score(self, contexts, continuations, entropy: bool = False):
        with self.batcher.lock:
            return self.engine.score(contexts, continuations, entropy)
