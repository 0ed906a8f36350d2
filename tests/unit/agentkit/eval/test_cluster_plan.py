"""The cluster plan's model (``agentkit.eval.cluster_plan``) against figures computed by hand, and the committed plan
against a recomputation from the committed run files (so the figures in ``docs/scaling.md`` cannot drift from
their inputs)."""

import json
from pathlib import Path

import pytest

from agentkit.eval import cluster_plan as cp

PLAN = Path(__file__).resolve().parents[4] / "docs" / "results" / "cluster-plan" / "plan.json"
MEASURED = {"reload_bytes_per_s": 1e9, "adapter_bytes_per_s": 1e8, "teacher_tokens_per_token": 1.5}


def test_a_qwen_lora_adapter_is_its_matrices_in_bf16():
    # per layer: q and o 3584 -> 3584, k and v 3584 -> 512, gate and up 3584 -> 18944, down 18944 -> 3584
    per_layer = 2 * (3584 + 3584) + 2 * (3584 + 512) + 3 * (3584 + 18944)
    assert cp.lora_bytes(16) == 16 * per_layer * 28 * 2 == 80_740_352


def test_one_step_by_hand():
    work = cp.Workload(questions=100, group=4, model_tokens=1000, total_tokens=1500)  # 400 trajectories
    s = cp.step(8, 2, work, "reload", MEASURED)
    weight_bytes = 2 * 7.61e9
    # 200 sequences per server: the bandwidth bound (200 * 3.35e12 / 15.22e9 = 44,021 tokens/s) is above vLLM's
    assert s["decode_tokens_per_s_per_gpu"] == 6582.87
    assert s["rollout_s"] == pytest.approx(400 * 1000 / (2 * 6582.87))
    assert s["train_s"] == pytest.approx(400 * 1500 / (6 * 5762))
    assert s["teacher_s"] == pytest.approx(1.5 * 400 * 1500 / (6 * 3 * 5762))
    assert s["sync_s"] == pytest.approx(weight_bytes / 1e9)
    assert s["step_s"] == pytest.approx(s["rollout_s"] + s["train_s"] + s["teacher_s"] + s["sync_s"])
    few = cp.step(8, 7, cp.Workload(1, 7, 1000, 1500), "reload", MEASURED)  # one sequence per server
    assert few["decode_tokens_per_s_per_gpu"] == pytest.approx(3.35e12 / weight_bytes)  # memory-bound


def test_sync_paths_by_hand():
    w = 2 * 7.61e9
    assert cp.sync_seconds("nccl", 8, 4, w, MEASURED) == 0.12  # published: 4 rollout ranks on one node
    assert cp.sync_seconds("nccl", 8, 2, w, MEASURED) == 0.12
    assert cp.sync_seconds("nccl", 64, 20, w, MEASURED) == pytest.approx(20 * w / 50e9)  # R copies through the NIC
    assert cp.sync_seconds("lora", 64, 20, w, MEASURED) == pytest.approx(80_740_352 / 1e8)
    with pytest.raises(ValueError):
        cp.sync_seconds("ftp", 8, 1, w, MEASURED)


def test_the_best_split_is_the_shortest_step():
    work = cp.Workload(256, 5, 1600, 2200)
    best = cp.best(8, work, "nccl", MEASURED)
    assert best["step_s"] == min(cp.step(8, r, work, "nccl", MEASURED)["step_s"] for r in range(1, 8))


def test_the_committed_plan_is_what_its_files_give():
    committed = json.loads(PLAN.read_text())
    again = cp.main(out=None)
    assert committed["measured"] == again["measured"]  # the same files, read the same way
    for a, b in zip(committed["plans"], again["plans"], strict=True):
        assert (a["gpus"], a["sync"], a["rollout_gpus"]) == (b["gpus"], b["sync"], b["rollout_gpus"])
        assert a["step_s"] == pytest.approx(b["step_s"])
