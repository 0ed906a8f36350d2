"""``make gpu-check``: HFEngine on a CUDA GPU against the CPU, in one script that needs only a stock PyTorch image
(torch, transformers; no network, no vLLM, no TRL, no model weights: the tiny model is built here).

1. CUDA against CPU fp32 on the tiny model: greedy tokens equal; teacher-forced logprobs within ``TOL_FP32`` in
   fp32 (the kernels) and ``TOL_BF16`` in bf16 (the precision).
2. HFEngine throughput on CUDA at batch 1 / 32 / 128 (64 new tokens, EOS ignored), against ``model.generate``.
3. One SFT step (masked causal-LM loss) and one DPO step (sigmoid loss, reference = a frozen copy) on CUDA:
   finite losses, gradients on every trained weight, the step lowers the loss on the same batch.
4. One TIPS recipe step under each accelerate config a single GPU can run (``ddp``, ``fsdp``, ``zero2``,
   ``zero3`` with one process): needs agentkit's own dependencies (TRL, DeepSpeed); skipped with the reason
   where they are missing (``--skip-recipes`` leaves it out).

Runs as ``python eval/gpu_check.py`` from the repository root (it puts the root on ``sys.path``, so no install is
needed); ``--device cpu`` runs the same steps on the CPU (a dry run). Prints one JSON object and writes it to
``--out``. Takes about a minute on an H200.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TOL_FP32 = 1e-3  # fp32 on the device against fp32 on the CPU: only the order of float additions differs
# bf16 keeps 8 significant bits (relative rounding 2^-9 ≈ 0.002 per stored value); a log-probability of about
# -ln 259 ≈ -5.6 (the tiny model's vocabulary, near uniform) through two layers and a log-softmax moves by a few
# hundredths. Measured on an H200: 0.06 (the first bound, 0.05, was a guess and too tight).
TOL_BF16 = 0.1
PROMPTS = ["What is 2 + 2?", "The capital of France is", "def add(a, b):", "Once upon a time"]


def _tiny(workdir: Path):
    import torch  # noqa: F401

    from agentkit.models.tiny import build_tiny_random

    d = workdir / "tiny-random"
    if not (d / "config.json").exists():
        d.mkdir(parents=True, exist_ok=True)
        build_tiny_random(d)
    return d


def check_agreement(path: Path, device: str) -> dict:
    """The device against CPU fp32: in fp32 the same maths must agree to ``TOL_FP32`` (a kernel check); in bf16 the
    greedy tokens must agree and the teacher-forced logprobs stay within ``TOL_BF16`` (a precision check)."""
    from agentkit.engines import SamplingParams
    from agentkit.engines.hf import HFEngine

    cpu = HFEngine(str(path), name="tiny-random", dtype="float32", device="cpu")
    p = SamplingParams(max_tokens=16, temperature=0, ignore_eos=True)
    a = cpu.generate(PROMPTS, p)
    sa = cpu.score(PROMPTS, [x[0].token_ids for x in a])
    out = {}
    for dtype, tol in (("float32", TOL_FP32), ("bfloat16", TOL_BF16)):
        dev = HFEngine(str(path), name="tiny-random", dtype=dtype if device == "cuda" else "float32", device=device)
        b = dev.generate(PROMPTS, p)
        same = sum(x[0].token_ids == y[0].token_ids for x, y in zip(a, b))
        # logprobs of the CPU's greedy tokens by teacher forcing (greedy paths may part after a near-tie)
        sb = dev.score(PROMPTS, [x[0].token_ids for x in a])
        forced = max(abs(u - v) for x, y in zip(sa, sb) for u, v in zip(x.logprobs, y.logprobs))
        out[dtype] = {
            "greedy_equal": f"{same}/{len(PROMPTS)}",
            "max_logprob_diff_teacher_forced": round(forced, 5),
            "tolerance": tol,
            "ok": same == len(PROMPTS) and forced <= tol,
        }
    out["ok"] = all(v["ok"] for v in out.values())
    return out


def check_throughput(path: Path, device: str, batches=(1, 32, 128), tokens: int = 64) -> list[dict]:
    import torch
    from torch.nn.attention import sdpa_kernel

    from agentkit.engines import SamplingParams
    from agentkit.engines.hf import _CUDA_ATTENTION, HFEngine

    dtype = "bfloat16" if device == "cuda" else "float32"
    eng = HFEngine(str(path), name="tiny-random", dtype=dtype, device=device, max_batch_size=max(batches))
    tok = eng.tokenizer
    rows = []
    for b in batches:
        prompts = [PROMPTS[i % len(PROMPTS)] + f" ({i})" for i in range(b)]
        p = SamplingParams(max_tokens=tokens, temperature=1.0, seed=0, ignore_eos=True)
        eng.generate(prompts[:2], SamplingParams(max_tokens=4))  # warm-up
        _sync(device)
        t = time.perf_counter()
        n = sum(c.completion_tokens for cs in eng.generate(prompts, p) for c in cs)
        _sync(device)
        ours = n / (time.perf_counter() - t)
        enc = tok(prompts, return_tensors="pt", padding=True).to(device)
        # model.generate under the attention kernels HFEngine picks (cuDNN's plans per length cost ~50 ms each)
        with torch.inference_mode(), sdpa_kernel(_CUDA_ATTENTION):
            eng.model.generate(**enc, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id)
            _sync(device)
            t = time.perf_counter()
            out = eng.model.generate(
                **enc, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True, pad_token_id=tok.pad_token_id
            )
            _sync(device)
        theirs = (out.shape[1] - enc.input_ids.shape[1]) * b / (time.perf_counter() - t)
        rows.append(
            {
                "batch": b,
                "hfengine_tokens_per_s": round(ours, 1),
                "generate_tokens_per_s": round(theirs, 1),
                "ratio": round(ours / theirs, 2),
            }
        )
    return rows


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _seq_logps(model, ids, mask, labels_mask):
    """Sum of log p(token) over the positions ``labels_mask`` marks. ``ids, mask, labels_mask [B, T]`` → ``[B]``."""
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
    logp = logits.log_softmax(-1).gather(-1, ids[:, 1:, None])[..., 0]
    return (logp * labels_mask[:, 1:]).sum(-1)


def _batch(tok, prompts, replies, device):
    import torch

    seqs = [tok(p).input_ids + tok(r, add_special_tokens=False).input_ids for p, r in zip(prompts, replies)]
    starts = [len(tok(p).input_ids) for p in prompts]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), tok.pad_token_id)
    mask = torch.zeros_like(ids)
    lab = torch.zeros_like(ids, dtype=torch.float32)
    for i, (s, st) in enumerate(zip(seqs, starts)):  # right padding for training
        ids[i, : len(s)], mask[i, : len(s)], lab[i, st : len(s)] = torch.tensor(s), 1, 1.0
    return ids.to(device), mask.to(device), lab.to(device)


def check_training(path: Path, device: str, beta: float = 0.1) -> dict:
    """One SFT step and one DPO step: L_DPO = -log σ(β[(log π(y_c) - log π_ref(y_c)) - (log π(y_r) - log π_ref(y_r))])."""
    import torch
    from transformers import AutoModelForCausalLM

    from agentkit.models import load_tokenizer

    tok = load_tokenizer(str(path))
    tok.padding_side = "right"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids, mask, lab = _batch(tok, PROMPTS, [" four.", " Paris.", " return a + b", " there was a cat."], device)

    def sft_loss():
        return -(_seq_logps(model, ids, mask, lab).sum() / lab[:, 1:].sum())

    before = sft_loss()
    before.backward()
    grads = sum(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        after = sft_loss()
    sft = {
        "loss_before": round(before.item(), 4),
        "loss_after": round(after.item(), 4),
        "params_with_grad": f"{grads}/{sum(1 for _ in model.parameters())}",
        "ok": bool(torch.isfinite(before)) and after.item() < before.item(),
    }

    ref = copy.deepcopy(model).eval().requires_grad_(False)
    c = _batch(tok, PROMPTS, [" four.", " Paris.", " return a + b", " there was a cat."], device)
    r = _batch(tok, PROMPTS, [" five.", " Rome.", " return a - b", " nothing happened."], device)

    def dpo_loss():
        margin = (_seq_logps(model, *c) - _seq_logps(ref, *c)) - (_seq_logps(model, *r) - _seq_logps(ref, *r))
        return -torch.nn.functional.logsigmoid(beta * margin).mean()

    d0 = dpo_loss()  # = log 2 at the start: the policy is its reference
    d0.backward()
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        d1 = dpo_loss()
    dpo = {
        "loss_before": round(d0.item(), 4),
        "loss_after": round(d1.item(), 4),
        "ok": abs(d0.item() - 0.6931) < 1e-2 and d1.item() < d0.item(),
    }
    return {"sft": sft, "dpo": dpo}


ACCELERATE_CONFIGS = ("ddp", "fsdp", "zero2", "zero3")  # configs/accelerate/*.yaml a single GPU can run


def check_accelerate_configs(device: str, work: Path, timeout: float = 600) -> dict:
    """One TIPS step (the tiny preset: SFT warm start, one GRPO step with TIPS shaping, evaluation) under each
    accelerate config, launched with one process (a single GPU; bf16 as the config says). A config whose packages
    this machine lacks (TRL, DeepSpeed) is skipped with the reason; ``--device cpu`` runs ``cpu.yaml`` and the
    two DeepSpeed configs on two CPU processes in fp32, as the test suite does."""
    import importlib.util
    import os
    import shutil
    import subprocess

    missing = [m for m in ("trl", "datasets") if importlib.util.find_spec(m) is None]
    configs = ("cpu", "zero2", "zero3") if device == "cpu" else ACCELERATE_CONFIGS
    out = {}
    for name in configs:
        if missing or (name.startswith("zero") and importlib.util.find_spec("deepspeed") is None):
            need = missing or ["deepspeed"]
            out[name] = {"skipped": f"needs {', '.join(need)} (pip install -e '.[deepspeed]')"}
            continue
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", f"configs/accelerate/{name}.yaml"]
        if device == "cpu":
            cmd += [] if name == "cpu" else ["--num_processes", "2", "--mixed_precision", "no"]
        else:
            cmd += ["--num_processes", "1"]
        run = work / f"accelerate-{name}"
        shutil.rmtree(run, ignore_errors=True)  # a new run each time
        cmd += ["-m", "agentkit", "run", "tips", "--preset", "tiny", "--quiet", "--output-dir", str(run)]
        cmd += ["--set", "methods=[tips]", "--set", "rl.steps=1"]
        t0 = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        try:
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            out[name] = {"ok": False, "error": f"no result in {timeout:.0f} s (a hang)"}
            continue
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()] if p.returncode == 0 else []
        step = next((r for r in rows if r.get("run") == "tips-s0" and "grad_norm" in r), None)
        out[name] = {
            "ok": p.returncode == 0 and step is not None,
            "seconds": round(time.perf_counter() - t0, 1),
            **({"grad_norm": round(step["grad_norm"], 4), "tips/alpha": round(step["tips/alpha"], 4)} if step else {}),
            **({} if p.returncode == 0 else {"error": (p.stderr.strip().splitlines() or [""])[-1][-300:]}),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu for a dry run")
    ap.add_argument("--workdir", default=str(ROOT / "outputs" / "gpu-check"), help="where the tiny model is built")
    ap.add_argument("--skip-recipes", action="store_true", help="leave out the recipe step per accelerate config")
    ap.add_argument("--out", default=None, help="also write the result as JSON here (default: WORKDIR/result.json)")
    a = ap.parse_args(argv)
    import torch

    if a.device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device (run with --device cpu for a dry run)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    work = Path(a.workdir)
    path = _tiny(work)
    res = {
        "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "agreement": check_agreement(path, a.device),
        "throughput": check_throughput(path, a.device),
        "training": check_training(path, a.device),
    }
    if not a.skip_recipes:
        res["accelerate"] = check_accelerate_configs(a.device, work)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["ok"] = res["agreement"]["ok"] and res["training"]["sft"]["ok"] and res["training"]["dpo"]["ok"]
    res["ok"] = res["ok"] and all(r.get("ok", True) for r in res.get("accelerate", {}).values())
    text = json.dumps(res, indent=2)
    print(text)
    out = Path(a.out) if a.out else work / "result.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
