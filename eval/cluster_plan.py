"""The cluster plan of ``docs/scaling.md``: TIPS-GRPO on Qwen2.5-7B-Instruct (``recipes/tips/cluster.yaml``) on 8
and 64 GPUs — the split between trainer and rollout GPUs, rollout tokens/s, weight-sync time per path and step
time — derived from figures measured here (``docs/results``) and published ones (``PUBLISHED``, each with its
source), by the model below. ``python -m agentkit.eval.cluster_plan --out docs/results/cluster-plan`` writes
``plan.json``, ``plan.md`` and ``step-time.png``.

The model of one synchronous on-policy step (TRL's GRPO: roll out, train, send the weights; nothing overlaps):

.. math::

    t_\\text{step}(R) = \\underbrace{\\frac{N\\,M}{R\\,r_\\text{dec}}}_{\\text{rollout}}
      + \\underbrace{\\frac{N\\,L}{(n-R)\\,r_\\text{train}}
      + \\frac{\\kappa\\,N\\,L}{(n-R)\\,3\\,r_\\text{train}}}_{\\text{policy update + TIPS teacher}}
      + t_\\text{sync}

- :math:`n` GPUs, :math:`R` of them rollout servers (one vLLM server per GPU: a 7B model in bf16, 15 GB, fits
  one 80 GB GPU, so tensor parallelism buys no throughput), :math:`n - R` trainer processes (ZeRO-3).
- :math:`N = Q G` trajectories per step; :math:`M` model tokens and :math:`L` tokens in all (prompt, model, tool
  results) per trajectory.
- :math:`r_\\text{dec}` decoded tokens/s per rollout GPU: vLLM's published serving throughput, capped by the
  memory-bandwidth bound :math:`c\\,B/W` at :math:`c = N/R` sequences per server (each decode step reads the
  :math:`W` weight bytes once at bandwidth :math:`B`). Prefill (prompt, tool results) is taken to ride along as
  it did in the published run (1.13 input tokens per output token there); with all N trajectories in flight at
  once, the throughput bound equals the latency bound of the longest trajectory when lengths are equal; unequal
  lengths (a long tail) make rollouts longer, which is what asynchronous RL (verl's one-step-off) recovers.
- :math:`r_\\text{train}` trained tokens/s per GPU (forward + backward, published); the TIPS teacher scores
  :math:`\\kappa` tokens per trajectory token (measured here: packed prefixes) in forward passes only, at three
  times that rate (a forward pass is a third of a forward + backward).
- :math:`t_\\text{sync}` per path (the GPU paths; gloo is the CPU servers' and is not planned for here):
  ``reload`` (saved, then read by every server at once: this machine's measured rate, so a local disk or page
  cache per server — a shared file system serving R readers is slower), ``nccl`` (published, for rollout ranks on
  the trainer's node; one group per server, so with the servers on other nodes rank 0 sends the weights once per
  server through its NIC: :math:`R\\,W / B_\\text{NIC}`), ``lora`` (a rank-16 adapter on every linear layer: its
  bytes at this machine's measured adapter rate).

The best split minimises :math:`t_\\text{step}` over :math:`R`; the plan reports it per sync path.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"

# Published figures: value, unit, what was measured and where it is written.
PUBLISHED: dict[str, dict[str, Any]] = {
    "parameters": {
        "value": 7.61e9,
        "source": "Qwen2.5-7B-Instruct model card (huggingface.co/Qwen/Qwen2.5-7B-Instruct): 7.61 B parameters; "
        "config.json: hidden 3584, intermediate 18944, 28 layers, 4 KV heads of 128",
    },
    "decode_tokens_per_s": {
        "value": 6582.87,
        "source": "vLLM PR #18566 (github.com/vllm-project/vllm/pull/18566): `vllm bench serve` of "
        "Llama-3.1-8B-Instruct on one GPU, 1,000 ShareGPT requests at once: 6,582.87 output tokens/s (229,711 "
        "input and 203,068 output tokens in 30.85 s)",
    },
    "train_tokens_per_s": {
        "value": 5762.0,
        "source": "torchtitan docs/performance.md, Table 1 (github.com/pytorch/torchtitan): Llama 3.1 8B, FSDP, "
        "8 H100, bf16, selective activation checkpointing: 5,762 tokens/s per GPU (33-39 % MFU)",
    },
    "hbm_bytes_per_s": {
        "value": 3.35e12,
        "source": "NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3",
    },
    "nic_bytes_per_s": {
        "value": 50e9,
        "source": "torchtitan docs/performance.md: hosts interconnected with 400 Gb/s RDMA per GPU (50 GB/s)",
    },
    "nccl_sync_s": {
        "value": 0.12,
        "source": "verl docs/advance/fully_async.md, checkpoint-engine table: Qwen2.5-Math-7B, 4 trainer and 4 "
        "rollout ranks (H20), NCCL parameter sync without checkpoint-engine: 0.12 s; docs/advance/one_step_off.md: "
        "'at most of time, the latency is under 300ms'",
    },
}

PATHS = ("nccl", "lora", "reload")
QWEN = {"hidden": 3584, "intermediate": 18944, "layers": 28, "kv": 4 * 128}


@dataclass(frozen=True)
class Workload:
    """One step of ``recipes/tips/cluster.yaml``: ``questions`` × ``group`` trajectories, each of ``model_tokens``
    generated tokens and ``total_tokens`` tokens in all."""

    questions: int
    group: int
    model_tokens: float
    total_tokens: float

    @property
    def trajectories(self) -> int:
        return self.questions * self.group


def lora_bytes(rank: int = 16, dtype_bytes: int = 2) -> int:
    """A rank-``rank`` adapter on every linear layer of Qwen2.5-7B: r·(in + out) weights per layer and matrix."""
    h, i, kv = QWEN["hidden"], QWEN["intermediate"], QWEN["kv"]
    per_layer = 2 * (h + h) + 2 * (h + kv) + 3 * (h + i)  # q, o; k, v; gate, up, down
    return rank * per_layer * QWEN["layers"] * dtype_bytes


def measured() -> dict[str, Any]:
    """What this machine measured, read from the run files under ``docs/results`` (each path recorded)."""
    sync = json.loads((RESULTS / "bench" / "weight-sync.json").read_text())
    smol = next(m for m in sync["models"] if m["model"] == "smollm2-135m")
    step = json.loads((RESULTS / "bench" / "rl-step.json").read_text())
    teacher = json.loads((RESULTS / "bench" / "tips-potentials.json").read_text())
    rows = [json.loads(x) for x in (RESULTS / "tips" / "metrics.jsonl").read_text().splitlines()]
    tips = [r for r in rows if str(r.get("run", "")).startswith("tips-s") and "tools/turns" in r]
    trajectories = step["questions"] * step["group"]
    return {
        "reload_bytes_per_s": smol["sync"]["bytes"] / smol["sync"]["median_s"],
        "adapter_bytes_per_s": smol["adapter"]["bytes"] / smol["adapter"]["median_s"],
        "turns": statistics.mean(r["tools/turns"] for r in tips),
        "tool_calls": statistics.mean(r["tools/calls"] for r in tips),
        "model_tokens": step["agentkit"]["model_tokens"] / trajectories,
        "trajectory_tokens": teacher["mean_trajectory_tokens"],
        "teacher_tokens_per_token": teacher["packed"]["tokens"]
        / (teacher["trajectories"] * teacher["mean_trajectory_tokens"]),
        "files": {
            "weight sync (reload, adapter)": "docs/results/bench/weight-sync.json",
            "model tokens per trajectory": "docs/results/bench/rl-step.json",
            "trajectory tokens, teacher tokens": "docs/results/bench/tips-potentials.json",
            "turns, tool calls": "docs/results/tips/metrics.jsonl",
        },
    }


def sync_seconds(path: str, gpus: int, servers: int, weight_bytes: float, m: dict[str, Any]) -> float:
    """One sync to ``servers`` rollout servers (of ``gpus`` GPUs in all) by ``path``."""
    if path == "reload":  # every server reads the saved checkpoint at once, each at this machine's rate
        return weight_bytes / m["reload_bytes_per_s"]
    if path == "nccl":
        if gpus <= 8:  # one node: published for 4 rollout ranks (NVLink); a group per server repeats it
            return PUBLISHED["nccl_sync_s"]["value"] * max(1, servers / 4)
        return servers * weight_bytes / PUBLISHED["nic_bytes_per_s"]["value"]  # other nodes: R copies through one NIC
    if path == "lora":
        return lora_bytes() / m["adapter_bytes_per_s"]
    raise ValueError(path)


def step(gpus: int, rollout: int, work: Workload, path: str, m: dict[str, Any]) -> dict[str, float]:
    """The step's parts on ``gpus`` GPUs, ``rollout`` of them serving (``rollout`` < ``gpus``)."""
    weight_bytes = 2 * PUBLISHED["parameters"]["value"]  # bf16
    per_server = work.trajectories / rollout
    bound = per_server * PUBLISHED["hbm_bytes_per_s"]["value"] / weight_bytes
    r_dec = min(PUBLISHED["decode_tokens_per_s"]["value"], bound)
    r_train = PUBLISHED["train_tokens_per_s"]["value"]
    trainers = gpus - rollout
    tokens = work.trajectories * work.total_tokens
    out = {
        "rollout_gpus": rollout,
        "trainer_gpus": trainers,
        "decode_tokens_per_s_per_gpu": r_dec,
        "rollout_tokens_per_s": rollout * r_dec,
        "rollout_s": work.trajectories * work.model_tokens / (rollout * r_dec),
        "train_s": tokens / (trainers * r_train),
        "teacher_s": m["teacher_tokens_per_token"] * tokens / (trainers * 3 * r_train),
        "sync_s": sync_seconds(path, gpus, rollout, weight_bytes, m),
    }
    out["step_s"] = out["rollout_s"] + out["train_s"] + out["teacher_s"] + out["sync_s"]
    return out


def best(gpus: int, work: Workload, path: str, m: dict[str, Any]) -> dict[str, float]:
    """The split of ``gpus`` with the shortest step."""
    return min((step(gpus, r, work, path, m) for r in range(1, gpus)), key=lambda s: s["step_s"])


def plan(work_caps: Workload, work_here: Workload, m: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"published": PUBLISHED, "measured": m, "lora_r16_bytes": lora_bytes(), "plans": []}
    for name, work in (("at the caps", work_caps), ("lengths as measured here", work_here)):
        for gpus in (8, 64):
            for path in PATHS:
                out["plans"].append({"lengths": name, "gpus": gpus, "sync": path, "workload": asdict(work),
                                     **best(gpus, work, path, m)})  # fmt: skip
    return out


def _table(res: dict[str, Any]) -> str:
    lines = [
        "| lengths | GPUs | sync | trainer : rollout GPUs | rollout tokens/s | rollout | update + teacher | sync | "
        "step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in res["plans"]:
        lines.append(
            f"| {p['lengths']} | {p['gpus']} | {p['sync']} | {p['trainer_gpus']} : {p['rollout_gpus']} | "
            f"{p['rollout_tokens_per_s']:,.0f} | {p['rollout_s']:.1f} s | {p['train_s'] + p['teacher_s']:.1f} s | "
            f"{p['sync_s']:.2f} s | **{p['step_s']:.1f} s** |"
        )
    return "\n".join(lines)


def _plot(work: Workload, m: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, gpus in zip(axes, (8, 64)):
        for sync in PATHS:
            rows = [step(gpus, r, work, sync, m) for r in range(1, gpus)]
            ax.plot([r["rollout_gpus"] for r in rows], [r["step_s"] for r in rows], label=sync)
        ax.set_yscale("log")
        ax.set_xlabel("rollout GPUs (the rest train)")
        ax.set_ylabel("step time, s")
        ax.set_title(f"{gpus} GPUs, {work.trajectories} trajectories per step")
        ax.grid(alpha=0.3)
    axes[0].legend(title="weight sync")
    fig.suptitle("TIPS-GRPO on Qwen2.5-7B-Instruct, lengths at the caps: modelled step time by split")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(out: str | None = None, questions: int = 256, group: int = 5, max_tokens: int = 512) -> dict[str, Any]:
    m = measured()
    prefill = m["trajectory_tokens"] - m["model_tokens"]  # prompt and tool results: the suite's, not the model's
    caps = m["turns"] * max_tokens  # every turn writes its max_tokens
    work_caps = Workload(questions, group, caps, prefill + caps)
    work_here = Workload(questions, group, m["model_tokens"], m["trajectory_tokens"])
    res = plan(work_caps, work_here, m)
    if out:
        from agentkit.eval.bench import provenance
        from agentkit.files import atomic_write

        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        atomic_write(d / "plan.json", json.dumps({**res, "provenance": provenance()}, indent=2))
        atomic_write(d / "plan.md", _table(res) + "\n")
        _plot(work_caps, m, d / "step-time.png")
    print(_table(res))
    return res


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="folder for plan.json, plan.md, step-time.png (default: print)")
    parser.add_argument("--questions", type=int, default=256, help="questions per step (default: 256)")
    parser.add_argument("--group", type=int, default=5, help="trajectories per question (default: 5)")
    parser.add_argument("--max-tokens", type=int, default=512, help="model tokens per turn at the cap (default: 512)")
    main(**vars(parser.parse_args()))
