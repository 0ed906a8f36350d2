"""``agentkit bench sandbox``: latency of a sandboxed ``print(1+1)`` against a fresh ``python -c`` process.

Both run ``print(1+1)`` ``n`` times one after another and report p50/p95 in milliseconds. The sandbox keeps a
pool of pre-started, already isolated workers, so a call costs a round trip instead of an interpreter start.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from agentkit.eval.bench import write_json


def _percentiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"p50_ms": round(1000 * xs[len(xs) // 2], 2), "p95_ms": round(1000 * xs[int(len(xs) * 0.95) - 1], 2)}


def run(n: int = 50, pool_size: int = 4) -> dict:
    from agentkit.tools.sandbox import Sandbox, SandboxConfig

    fresh = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "print(1+1)"], capture_output=True, check=True)
        fresh.append(time.perf_counter() - t)
    pooled, isolation = [], ""
    with Sandbox(SandboxConfig(pool_size=pool_size)) as sb:
        time.sleep(2)  # let the pool warm up, as a long-running server's would be
        for _ in range(n):
            t = time.perf_counter()
            r = sb.run("print(1+1)")
            pooled.append(time.perf_counter() - t)
            assert r.output == "2\n", r
            isolation = r.meta["isolation"]
            time.sleep(0.05)  # calls arrive spaced, as between model turns; the pool refills in between
    res = {"n": n, "isolation": isolation, "sandbox": _percentiles(pooled), "python_c": _percentiles(fresh)}
    res["speedup_p50"] = round(res["python_c"]["p50_ms"] / res["sandbox"]["p50_ms"], 1)
    return res


def main(n: int = 50, out: str | None = None) -> int:
    res = run(n)
    print(json.dumps(res, indent=2))
    print(f"\nprint(1+1): sandbox p50 {res['sandbox']['p50_ms']} ms (p95 {res['sandbox']['p95_ms']}), "
          f"fresh `python -c` p50 {res['python_c']['p50_ms']} ms (p95 {res['python_c']['p95_ms']}); "
          f"{res['speedup_p50']}x faster, isolation: {res['isolation']}")
    write_json(out, res)
    return 0
