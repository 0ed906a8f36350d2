"""``agentkit bench serve``: load on ``agentkit serve`` with the embedded model and the official openai client.

``requests`` chat requests (suite-a questions, greedy, ``max_tokens`` each) are sent from ``clients`` concurrent
clients, then the same requests one by one. Reported: failures, p50/p95 latency, and throughput (requests/s and
completion tokens/s) of both, with their ratio; concurrency pays off because the server batches requests from
different clients into shared engine calls. ``--peer vllm`` runs the same load on vLLM's own server
(``python -m vllm.entrypoints.openai.api_server``, bf16 on a CPU) after ours, and reports the ratios.
"""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentkit.argtypes import POS_INT
from agentkit.command import add_model_option, add_out_option
from agentkit.data import arithmetic_suite
from agentkit.eval.bench import percentile, write_json
from agentkit.models.catalog import DEFAULT_CHAT_MODEL


def _pct(xs: list[float], q: float) -> float:
    return round(percentile(xs, q), 3)


def _load(url: str, model: str, questions: list[str], clients: int, max_tokens: int) -> dict:
    """The load (concurrent clients, then one by one) against the OpenAI server at ``url``."""
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=600)

    def one(q: str):
        t = time.perf_counter()
        try:
            r = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": q}], max_tokens=max_tokens, temperature=0
            )
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
        res[name] = {
            "clients": workers,
            "failures": sum(r[2] is not None for r in rows),
            "p50_s": _pct(lat, 0.5),
            "p95_s": _pct(lat, 0.95),
            "wall_s": round(wall, 1),
            "requests_per_s": round(len(rows) / wall, 2),
            "tokens_per_s": round(sum(r[1] for r in rows) / wall, 1),
        }
        print(json.dumps({name: res[name]}), flush=True)
    res["alive_after"] = urllib.request.urlopen(f"{url}/health", timeout=5).status == 200
    res["throughput_ratio"] = round(res["concurrent"]["requests_per_s"] / res["one_by_one"]["requests_per_s"], 2)
    return res


def run(
    model: str = DEFAULT_CHAT_MODEL,
    requests: int = 200,
    clients: int = 16,
    max_tokens: int = 16,
    log: str | Path = "outputs/bench/serve.server.log",
    peer: str | None = None,
) -> dict:
    """``peer="vllm"``: the same load on vLLM's own server (bf16 on a CPU), started the same way as here."""
    from agentkit.server.http import ServerProcess

    questions = [t.question for t in arithmetic_suite(requests, seed=11)]
    log = Path(log)
    servers = {"agentkit": lambda: ServerProcess(["-m", "agentkit", "serve", "--model", model], log)}
    if peer == "vllm":
        from agentkit.engines.vllm import serve_args, serve_env

        servers["vllm"] = lambda: ServerProcess(
            serve_args(model), log.with_name(log.stem + ".vllm.log"), env=serve_env(), startup_timeout_s=600
        )
    out = {"model": model, "requests": requests, "max_tokens": max_tokens}
    for name, make in servers.items():
        with make() as server:
            out[name] = {**_load(server.url, model, questions, clients, max_tokens), "server_log": str(server.log_path)}
    if peer:
        a, v = out["agentkit"]["concurrent"], out[peer]["concurrent"]
        out[f"vs_{peer}"] = {
            "requests_per_s": round(a["requests_per_s"] / v["requests_per_s"], 2),
            "p50": round(v["p50_s"] / a["p50_s"], 2),
            "p95": round(v["p95_s"] / a["p95_s"], 2),
        }
    return out


def main(
    model: str = DEFAULT_CHAT_MODEL,
    requests: int = 200,
    clients: int = 16,
    max_tokens: int = 16,
    out: str | None = None,
    peer: str | None = None,
) -> int:
    log = Path(out).with_suffix(".server.log") if out else Path("outputs/bench/serve.server.log")
    res = run(model, requests, clients, max_tokens, log, peer)
    print(json.dumps(res, indent=2))
    for name in ("agentkit", peer):
        if name:
            c, o = res[name]["concurrent"], res[name]["one_by_one"]
            print(
                f"\n{name}: {requests} requests, {clients} clients {c['requests_per_s']} req/s (p50 {c['p50_s']} s, "
                f"p95 {c['p95_s']} s, {c['failures']} failures) vs one by one {o['requests_per_s']} req/s "
                f"(p50 {o['p50_s']} s): {res[name]['throughput_ratio']}x"
            )
    if peer:
        print(f"agentkit / {peer} (16 clients): {res[f'vs_{peer}']}")
    write_json(out, res)
    return 0


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``)."""
    servers = [n for n in res if isinstance(res[n], dict) and "concurrent" in res[n]]
    out = [
        "| server | clients | failures | p50 | p95 | requests/s | completion tokens/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in servers:
        for load in ("concurrent", "one_by_one"):
            r = res[name][load]
            out.append(
                f"| {name} | {r['clients']} | {r['failures']} | {r['p50_s']} s | {r['p95_s']} s | "
                f"{r['requests_per_s']} | {r['tokens_per_s']} |"
            )
    text = (
        f"\n\n{res['requests']} requests, {res['max_tokens']} new tokens each. With "
        f"{res['agentkit']['concurrent']['clients']} clients `agentkit serve` answers "
        f"**{res['agentkit']['throughput_ratio']}×** the requests per second it answers one by one"
    )
    for name in servers[1:]:
        vs = res[f"vs_{name}"]
        text += (
            f"; against {name}'s server: **{vs['requests_per_s']}×** the requests per second, p50 {vs['p50']}× lower"
        )
    healthy = all(res[n]["alive_after"] for n in servers)
    return "\n".join(out) + text + f". Every server healthy afterwards: {'yes' if healthy else '**no**'}."


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read (higher is better)."""
    out = {"agentkit: concurrent / one by one (requests/s)": (res["agentkit"]["throughput_ratio"], "higher")}
    if "vs_vllm" in res:
        out["agentkit / vLLM server (requests/s, 16 clients)"] = (res["vs_vllm"]["requests_per_s"], "higher")
    return out


HELP = "load on agentkit serve: concurrent clients vs one by one"


def add_arguments(parser) -> None:
    """``agentkit bench serve``'s options: ``main``'s parameters."""
    add_model_option(parser)
    parser.add_argument("--requests", type=POS_INT, default=200, help="requests per side")
    parser.add_argument("--clients", type=POS_INT, default=16, help="concurrent client threads")
    parser.add_argument("--max-tokens", type=POS_INT, default=16, help="tokens per answer")
    parser.add_argument("--peer", choices=["vllm"], help="also load vLLM's own server the same way (make setup-vllm)")
    add_out_option(parser)
