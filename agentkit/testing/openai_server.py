"""A minimal OpenAI-compatible HTTP server over any Engine (stdlib only), for testing OpenAIEngine on loopback.

It implements just what OpenAIEngine sends: ``POST /v1/chat/completions`` and ``POST /v1/completions``
(non-streaming; ``logprobs``/``top_logprobs``; ``echo`` with ``max_tokens=0`` for prompt scoring). It can inject
faults (``fail_first`` 503s, ``delay_s``) to test timeouts and retries. The real server is ``agentkit serve``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agentkit.engines.base import SamplingParams


class EngineServer:
    def __init__(self, engine, host: str = "127.0.0.1", port: int = 0, fail_first: int = 0, delay_s: float = 0.0):
        self.engine, self.fail_first, self.delay_s = engine, fail_first, delay_s
        self.hits = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                with outer.lock:
                    outer.hits += 1
                    fail = outer.hits <= outer.fail_first
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                if fail:
                    return self._send(503, {"error": {"message": "overloaded", "type": "server_error"}})
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:  # one engine call at a time
                    if self.path.endswith("/chat/completions"):
                        return self._send(200, outer._chat(body))
                    if self.path.endswith("/completions"):
                        return self._send(200, outer._completions(body))
                self._send(404, {"error": {"message": "not found"}})

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except BrokenPipeError:  # the client gave up (timeout tests)
                    pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = False  # server_close() waits for requests in flight: none outlives the test
        self.url = f"http://{host}:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _params(self, b, k: int) -> SamplingParams:
        stop = b.get("stop") or []
        return SamplingParams(n=b.get("n") or 1, temperature=b.get("temperature", 1.0), top_p=b.get("top_p") or 1.0,
                              top_k=b.get("top_k") or 0, max_tokens=b.get("max_tokens") or 16, seed=b.get("seed"),
                              stop=[stop] if isinstance(stop, str) else stop, top_logprobs=k,
                              ignore_eos=bool(b.get("ignore_eos")),
                              include_stop_str_in_output=bool(b.get("include_stop_str_in_output")))

    def _tok(self, i: int) -> str:
        return self.engine.tokenizer.convert_ids_to_tokens(i)

    def _usage(self, prompt: int, comps) -> dict:
        c = sum(x.completion_tokens for x in comps)
        return {"prompt_tokens": prompt, "completion_tokens": c, "total_tokens": prompt + c}

    def _chat(self, b):
        k = b.get("top_logprobs") or 0
        comps = self.engine.generate([b["messages"]], self._params(b, k))[0]
        choices = []
        for i, c in enumerate(comps):
            content = [{"token": self._tok(t), "logprob": lp, "bytes": None,
                        "top_logprobs": [{"token": self._tok(a), "logprob": v, "bytes": None}
                                         for a, v in (c.top_logprobs[j] if c.top_logprobs else {}).items()]}
                       for j, (t, lp) in enumerate(zip(c.token_ids, c.logprobs))]
            choices.append({"index": i, "message": {"role": "assistant", "content": c.text},
                            "finish_reason": c.finish_reason,
                            "logprobs": {"content": content} if b.get("logprobs") else None})
        return {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                "model": b["model"], "choices": choices, "usage": self._usage(comps[0].prompt_tokens, comps)}

    def _completions(self, b):
        k = b.get("logprobs") or 0
        prompt = b["prompt"]
        if b.get("echo") and b.get("max_tokens") == 0:
            return self._echo(b, prompt, k)
        comps = self.engine.generate([prompt], self._params(b, k))[0]
        choices = []
        for i, c in enumerate(comps):
            toks = [self._tok(t) for t in c.token_ids]
            lp = {"tokens": toks, "token_logprobs": c.logprobs, "text_offset": [0] * len(toks),
                  "top_logprobs": [{self._tok(a): v for a, v in t.items()} for t in (c.top_logprobs or [])]}
            choices.append({"index": i, "text": c.text, "finish_reason": c.finish_reason,
                            "logprobs": lp if k else None})
        return {"id": "cmpl-test", "object": "text_completion", "created": int(time.time()), "model": b["model"],
                "choices": choices, "usage": self._usage(comps[0].prompt_tokens, comps)}

    def _echo(self, b, prompt: str, k: int):
        """Prompt logprobs: token i scored given tokens < i (the first token has none)."""
        tok = self.engine.tokenizer
        enc = tok(prompt, return_offsets_mapping=True)
        ids, offsets = enc.input_ids, [o[0] for o in enc.offset_mapping]
        scored = self.engine.score([ids[:1]], [ids[1:]], entropy=False)[0]
        lps = [None] + scored.logprobs
        return {"id": "cmpl-echo", "object": "text_completion", "created": int(time.time()), "model": b["model"],
                "choices": [{"index": 0, "text": prompt, "finish_reason": "length",
                             "logprobs": {"tokens": [self._tok(i) for i in ids], "token_logprobs": lps,
                                          "text_offset": offsets, "top_logprobs": None}}],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": 0, "total_tokens": len(ids)}}
