"""``agentkit bench weight-sync``: how long a trainer's new weights take to reach a vLLM server it does not host
(``OpenAIEngine.load_weights``), by path and model size, against restarting the server on them.

For each model, one ``agentkit vllm-serve`` server (fp32, so its greedy answers can be compared token for token
with the in-process engine's; LoRA on), then ``repeats`` times each:

- ``save``: the policy written as safetensors (``save_pretrained``), the disk half of the full-weight path;
- ``reload``: the server reloads a saved checkpoint in place (``load_weights(path=…)``: vLLM's ``/pause``,
  ``/collective_rpc reload_weights``, ``/reset_prefix_cache``, ``/update_weight_version``, ``/resume``);
- ``sync``: the whole path a trainer takes after a step (``load_weights(model=…)``: save, then reload);
- ``transfer``: the same step through vLLM's weight-transfer API instead, no file (``weight_transfer="gloo"``:
  start, update beside a broadcast of every tensor over TCP, finish; the protocol NCCL runs on GPUs), after one
  untimed sync that sets the group up (``transfer_setup_s``);
- ``adapter``: a LoRA policy (rank ``lora_rank`` on every linear layer) saved and loaded as a run-time adapter;
- ``restart`` (the baseline, once): stop the server and start it on the saved checkpoint, until ``/health``.

Each figure is the median over the repeats, with bytes moved and the rate (bytes / median seconds) the
cluster plan (``docs/scaling.md``) scales by. After the syncs, the server's greedy tokens on four prompts are
compared with ``HFEngine``'s on the same weights (``agrees``: how many prompts match). Needs vLLM
(``make setup-vllm``); a CPU server here, so the rates are this machine's disk and CPU, not a GPU node's.
"""

from __future__ import annotations

import copy
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentkit.argtypes import POS_INT
from agentkit.command import add_out_option
from agentkit.engines.base import SamplingParams
from agentkit.eval.bench import write_json

KEY = "bench-key"
PROMPTS = ["abc", "the cat sat", "What is 2 + 2?", "hello there"]
GREEDY = SamplingParams(max_tokens=8, temperature=0, ignore_eos=True)


def _bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*.safetensors"))


def _timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _row(seconds: list[float], nbytes: int) -> dict[str, Any]:
    med = statistics.median(seconds)
    return {
        "seconds": [round(s, 3) for s in seconds],
        "median_s": round(med, 3),
        "bytes": nbytes,
        "mb_per_s": round(nbytes / med / 1e6, 1),
    }


def measure(model_name: str, repeats: int, lora_rank: int, work: Path) -> dict[str, Any]:
    import torch
    from peft import LoraConfig, get_peft_model

    from agentkit.engines.hf import HFEngine
    from agentkit.engines.openai import OpenAIEngine
    from agentkit.models import resolve
    from agentkit.server.http import ServerProcess

    local = HFEngine(model_name, dtype="float32", prefix_cache_mb=0, speculate=0)
    policy = copy.deepcopy(local.model)
    with torch.no_grad():
        for p in policy.parameters():  # a step's worth of change: every weight moves a little
            p.add_(torch.randn_like(p) * 1e-3 * p.abs().mean())
    args = ["-m", "agentkit", "vllm-serve", "--model", model_name, "--dtype", "float32"]
    args += ["--api-key", KEY, "--enable-lora", "--max-lora-rank", str(lora_rank)]
    server = ServerProcess(args, work / f"{model_name}.log", startup_timeout_s=600)
    t0 = time.perf_counter()
    server.start()
    start_s = time.perf_counter() - t0
    try:
        eng = OpenAIEngine(model_name, f"{server.url}/v1", api_key=KEY, weights_dir=str(work), timeout=600)
        saved = work / f"{model_name}-saved"
        save = _timed(lambda: (shutil.rmtree(saved, ignore_errors=True), policy.save_pretrained(saved)), repeats)
        nbytes = _bytes(saved)
        reload = _timed(lambda: eng.load_weights(path=str(saved)), repeats)
        sync = _timed(lambda: eng.load_weights(model=policy), repeats)
        expected = [
            c[0].token_ids
            for c in HFEngine(policy, local.tokenizer, prefix_cache_mb=0, speculate=0).generate(PROMPTS, GREEDY)
        ]
        got = [c[0].token_ids for c in eng.generate(PROMPTS, GREEDY)]
        agrees = sum(a == b for a, b in zip(got, expected))
        sender = OpenAIEngine(model_name, f"{server.url}/v1", api_key=KEY, weight_transfer="gloo", timeout=600)
        eng.load_weights(path=str(resolve(model_name)))  # back to the original, so the transfer has work to show
        (setup_s,) = _timed(lambda: sender.load_weights(model=policy), 1)
        transfer = _timed(lambda: sender.load_weights(model=policy), repeats)
        got = [c[0].token_ids for c in sender.generate(PROMPTS, GREEDY)]
        transfer_agrees = sum(a == b for a, b in zip(got, expected))
        sender.close()
        torch.manual_seed(0)
        cfg = LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, target_modules="all-linear", init_lora_weights=False)
        peft_policy = get_peft_model(copy.deepcopy(local.model), cfg)
        adapter = _timed(lambda: eng.load_weights(model=peft_policy), repeats)
        adapter_bytes = _bytes(Path(eng.weights.path))
        eng.close()
        server.stop()  # the baseline: the server restarted on the new checkpoint (with its tokenizer)
        local.tokenizer.save_pretrained(saved)
        server.cmd[server.cmd.index("--model") + 1] = str(saved)
        t0 = time.perf_counter()
        server.start()
        restart_s = time.perf_counter() - t0
    finally:
        server.stop()
    params = sum(p.numel() for p in policy.parameters())
    return {
        "model": model_name,
        "parameters": params,
        "dtype": "float32",
        "first_start_s": round(start_s, 1),
        "save": _row(save, nbytes),
        "reload": _row(reload, nbytes),
        "sync": _row(sync, nbytes),
        "transfer": {**_row(transfer, nbytes), "backend": "gloo", "agrees": f"{transfer_agrees}/{len(PROMPTS)}"},
        "transfer_setup_s": round(setup_s, 3),
        "adapter": {**_row(adapter, adapter_bytes), "lora_rank": lora_rank},
        "restart": {"seconds": round(restart_s, 1)},
        "sync_vs_restart": round(restart_s / statistics.median(sync), 1),
        "agrees": f"{agrees}/{len(PROMPTS)}",
    }


def run(models: list[str], repeats: int, lora_rank: int) -> dict[str, Any]:
    try:
        import vllm  # noqa: F401
    except ImportError:
        from agentkit.errors import AgentkitError

        raise AgentkitError("agentkit bench weight-sync needs vLLM", "run `make setup-vllm`") from None
    with tempfile.TemporaryDirectory(prefix="agentkit-weight-sync-") as work:
        rows = [measure(m, repeats, lora_rank, Path(work)) for m in models]
    return {"repeats": repeats, "models": rows}


def main(
    models: str = "tiny-random,smollm2-135m", repeats: int = 3, lora_rank: int = 16, out: str | None = None
) -> int:
    res = run([m for m in models.split(",") if m], repeats, lora_rank)
    print(json.dumps(res, indent=2))
    for r in res["models"]:
        print(
            f"\n{r['model']} ({r['parameters'] / 1e6:.1f} M parameters, {r['sync']['bytes'] / 1e6:.0f} MB): sync "
            f"{r['sync']['median_s']} s (save {r['save']['median_s']} + reload {r['reload']['median_s']}), gloo "
            f"transfer {r['transfer']['median_s']} s, adapter "
            f"{r['adapter']['median_s']} s ({r['adapter']['bytes'] / 1e6:.1f} MB), restart {r['restart']['seconds']} "
            f"s: sync is {r['sync_vs_restart']}x faster than a restart; greedy answers agree {r['agrees']}"
        )
    write_json(out, res)
    return 0


def _mb(n: int) -> str:
    return f"{n / 1e6:.0f}" if n >= 10e6 else f"{n / 1e6:.1f}"


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``): one line per model."""
    lines = []
    for m in res["models"]:
        parts = [
            f"save + reload in place **{m['sync']['median_s']} s** (save {m['save']['median_s']} s, reload "
            f"{m['reload']['median_s']} s)"
        ]
        if "transfer" in m:
            parts.append(
                f"through vLLM's weight-transfer API over {m['transfer']['backend']}, no file, "
                f"{m['transfer']['median_s']} s (after a {m['transfer_setup_s']} s group set-up)"
            )
        if "adapter" in m:
            parts.append(f"a LoRA r={m['adapter']['lora_rank']} adapter {m['adapter']['median_s']} s")
        parts.append(f"restarting the server {m['restart']['seconds']} s (**{m['sync_vs_restart']}×** a reload sync)")
        lines.append(
            f"- {m['model']}, {_mb(m['save']['bytes'])} MB: " + "; ".join(parts) + f". Greedy answers agree "
            f"{m['agrees']} after either path."
        )
    return "\n".join(lines)


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read (higher is better)."""
    return {f"{m['model']}: restart / reload sync": (m["sync_vs_restart"], "higher") for m in res["models"]}


HELP = "weight sync to a vLLM server: save + reload, weight-transfer API, LoRA adapter, vs a restart (needs vLLM)"


def add_arguments(parser) -> None:
    """``agentkit bench weight-sync``'s options: ``main``'s parameters."""
    parser.add_argument("--models", default="tiny-random,smollm2-135m", help="comma-separated catalog names")
    parser.add_argument("--repeats", type=POS_INT, default=3, help="timed repeats of each path (the median is kept)")
    parser.add_argument("--lora-rank", type=POS_INT, default=16, help="the LoRA policy's rank (every linear layer)")
    add_out_option(parser)
