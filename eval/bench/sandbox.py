"""``agentkit bench sandbox``: latency of a sandboxed ``print(1+1)`` against a fresh ``python -c`` process and
a bare ``bwrap … python -c`` (the same namespaces and mounts, started per call, with no pool and no limits).

Each runs ``print(1+1)`` ``n`` times one after another and reports p50/p95 in milliseconds. The sandbox keeps a
pool of pre-started, already isolated workers, so a call costs a round trip instead of a start-up: timed with
calls 50 ms apart (as between model turns; the pool refills in between), and as a burst without pauses, where
the pool of ``pool_size`` drains and each further call waits for a worker to start (every call gets a fresh
worker: nothing one call leaves behind reaches the next).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from agentkit.argtypes import POS_INT
from agentkit.command import add_out_option
from agentkit.eval.bench import percentile, write_json
from agentkit.tools.sandbox import Sandbox, SandboxConfig, bwrap_argv, kernel_isolation_error


def _percentiles(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": round(1000 * percentile(xs, 0.5), 2), "p95_ms": round(1000 * percentile(xs, 0.95), 2)}


def _timed(cmd: list[str], n: int) -> list[float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, check=True, text=True).stdout
        times.append(time.perf_counter() - t)
        assert out == "2\n", out
    return times


def run(n: int = 100, pool_size: int = 4) -> dict:
    fresh = _timed([sys.executable, "-c", "print(1+1)"], n)
    bare = (
        None
        if kernel_isolation_error()
        else _timed([*bwrap_argv(SandboxConfig(), os.geteuid() == 0), sys.executable, "-c", "print(1+1)"], n)
    )
    pooled, burst, isolation = [], [], ""
    with Sandbox(SandboxConfig(pool_size=pool_size)) as sb:
        for gap, times in ((0.05, pooled), (0.0, burst)):
            time.sleep(2)  # let the pool warm up, as a long-running server's would be
            for _ in range(n):
                t = time.perf_counter()
                r = sb.run("print(1+1)")
                times.append(time.perf_counter() - t)
                assert r.output == "2\n", r
                isolation = r.meta["isolation"]
                time.sleep(gap)  # 50 ms: calls spaced as between model turns, the pool refills in between
    res = {
        "n": n,
        "pool_size": pool_size,
        "isolation": isolation,
        "sandbox": _percentiles(pooled),
        "sandbox_burst": _percentiles(burst),
        "python_c": _percentiles(fresh),
        "bwrap_python_c": _percentiles(bare) if bare else None,
    }
    res["speedup_p50"] = round(res["python_c"]["p50_ms"] / res["sandbox"]["p50_ms"], 1)
    if bare:
        res["speedup_vs_bwrap_p50"] = round(res["bwrap_python_c"]["p50_ms"] / res["sandbox"]["p50_ms"], 1)
    return res


def main(n: int = 100, out: str | None = None) -> int:
    res = run(n)
    print(json.dumps(res, indent=2))
    print(
        f"\nprint(1+1): sandbox p50 {res['sandbox']['p50_ms']} ms (p95 {res['sandbox']['p95_ms']}), "
        f"fresh `python -c` p50 {res['python_c']['p50_ms']} ms (p95 {res['python_c']['p95_ms']}); "
        f"{res['speedup_p50']}x faster, isolation: {res['isolation']}\n"
        f"{res['n']} calls without a pause: p50 {res['sandbox_burst']['p50_ms']} ms, p95 "
        f"{res['sandbox_burst']['p95_ms']} ms (the pool of {res['pool_size']} drains; then each call waits for a start)"
    )
    if res["bwrap_python_c"]:
        print(
            f"bare `bwrap … python -c` p50 {res['bwrap_python_c']['p50_ms']} ms "
            f"(p95 {res['bwrap_python_c']['p95_ms']}); the sandbox is {res['speedup_vs_bwrap_p50']}x faster"
        )
    write_json(out, res)
    return 0


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``): the latency table and its ratios."""
    rows = [
        ("the sandbox (pooled worker, calls 50 ms apart)", res["sandbox"]),
        (f"the sandbox, {res['n']} calls without a pause", res["sandbox_burst"]),
        ("a fresh `python -c`", res["python_c"]),
    ]
    if res.get("bwrap_python_c"):
        rows.append(("a bare `bwrap … python -c`", res["bwrap_python_c"]))
    table = "\n".join(f"| {what} | {r['p50_ms']:.2f} ms | {r['p95_ms']:.2f} ms |" for what, r in rows)
    bare = (
        f" and {res['speedup_vs_bwrap_p50']}× faster than starting bubblewrap per call"
        if res.get("bwrap_python_c")
        else ""
    )
    return (
        f"| what runs `print(1+1)` | p50 | p95 |\n|---|---|---|\n{table}\n\n"
        f"Pooled, a sandboxed call is {res['speedup_p50']}× faster than a fresh `python -c` (p50){bare}; the "
        f"targets are p50 ≤ 12 ms and p95 ≤ 20 ms. Isolation: {res['isolation']}, pool of {res['pool_size']}."
    )


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read."""
    out = {
        "p50: python -c / sandbox": (res["speedup_p50"], "higher"),
        "sandbox p50 ms (target 12)": (res["sandbox"]["p50_ms"], "lower"),
        "sandbox p95 ms (target 20)": (res["sandbox"]["p95_ms"], "lower"),
    }
    if res.get("speedup_vs_bwrap_p50"):
        out["p50: bwrap python -c / sandbox"] = (res["speedup_vs_bwrap_p50"], "higher")
    return out


HELP = "python sandbox latency (pre-warmed pool) against a fresh `python -c`"


def add_arguments(parser) -> None:
    """``agentkit bench sandbox``'s options: ``main``'s parameters."""
    parser.add_argument("-n", type=POS_INT, default=100, help="calls per side")
    add_out_option(parser)
