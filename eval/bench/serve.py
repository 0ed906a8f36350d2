"""``agentkit bench serve``: load on ``agentkit serve`` with the embedded model and the official openai client.

``requests`` chat requests (suite-a questions, greedy, ``max_tokens`` each) are sent from ``clients`` concurrent
clients, then the same requests one by one. Reported: failures, p50/p95 latency, and throughput (requests/s and
completion tokens/s) of both, with their ratio; concurrency pays off because the server batches requests from
different clients into shared engine calls.
"""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentkit.eval.bench import write_json


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3)


def run(model: str = "smollm2-135m", requests: int = 200, clients: int = 16, max_tokens: int = 16,
        log: str | Path = "outputs/bench/serve.server.log") -> dict:
    import openai

    from agentkit.data import arithmetic_suite
    from agentkit.server.http import ServerProcess

    server = ServerProcess(["-m", "agentkit", "serve", "--model", model], log).start()
    try:
        port = server.port
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=600)
        questions = [t.question for t in arithmetic_suite(requests, seed=11)]

        def one(q: str):
            t = time.perf_counter()
            try:
                r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": q}],
                                                   max_tokens=max_tokens, temperature=0)
                return time.perf_counter() - t, r.usage.completion_tokens, None
            except Exception as e:  # counted, not raised: the bench reports failures
                return time.perf_counter() - t, 0, repr(e)

        one(questions[0])  # warm-up
        res = {}
        for name, workers in (("concurrent", clients), ("one_by_one", 1)):
            t = time.perf_counter()
            with ThreadPoolExecutor(workers) as pool:
                rows = list(pool.map(one, questions))
            wall = time.perf_counter() - t
            lat = [r[0] for r in rows]
            res[name] = {"clients": workers, "failures": sum(r[2] is not None for r in rows),
                         "p50_s": _pct(lat, 0.5), "p95_s": _pct(lat, 0.95), "wall_s": round(wall, 1),
                         "requests_per_s": round(len(rows) / wall, 2),
                         "tokens_per_s": round(sum(r[1] for r in rows) / wall, 1)}
        alive = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status == 200
    finally:
        server.stop()
    return {"model": model, "requests": requests, "max_tokens": max_tokens, **res, "server_alive_after": alive,
            "server_log": str(server.log_path),
            "throughput_ratio": round(res["concurrent"]["requests_per_s"] / res["one_by_one"]["requests_per_s"], 2)}


def main(model: str = "smollm2-135m", requests: int = 200, clients: int = 16, max_tokens: int = 16,
         out: str | None = None) -> int:
    log = Path(out).with_suffix(".server.log") if out else Path("outputs/bench/serve.server.log")
    res = run(model, requests, clients, max_tokens, log)
    print(json.dumps(res, indent=2))
    c, o = res["concurrent"], res["one_by_one"]
    print(f"\n{requests} requests: {clients} clients {c['requests_per_s']} req/s (p50 {c['p50_s']} s, p95 {c['p95_s']} s, "
          f"{c['failures']} failures) vs one by one {o['requests_per_s']} req/s (p50 {o['p50_s']} s): "
          f"{res['throughput_ratio']}x")
    write_json(out, res)
    return 0
