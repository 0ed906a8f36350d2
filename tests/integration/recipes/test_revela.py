"""The revela recipe on the tiny model: training interrupted and resumed from its checkpoint, LoRA on both models,
the report; the trained retriever served by the search tool server; bad configs; two accelerate processes."""

import json
import sys
from pathlib import Path

import pytest
import torch

from agentkit.errors import AgentkitError
from agentkit.revela.model import RevelaModel
from agentkit.runner import run_recipe
from agentkit.testing.processes import launch_two_processes

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from accelerate.state import GradientState

    # what a trainer stopped in the middle of gradient accumulation earlier in this process leaves behind (an
    # interrupted TIPS run did): the runs below must still train (test_lora_trains_both_the_retriever_and_the_lm)
    GradientState()._set_sync_gradients(False)
    out = tmp_path_factory.mktemp("revela") / "run"
    real, calls = RevelaModel.forward, []

    def forward(self, batch):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # dies in step 3, after the checkpoints of steps 1 and 2
        return real(self, batch)

    RevelaModel.forward = forward
    try:
        with pytest.raises(KeyboardInterrupt):
            run_recipe("revela", [], output_dir=str(out), preset="tiny", quiet=True)
    finally:
        RevelaModel.forward = real
    ck = torch.load(out / "state" / "seed-0" / "checkpoint.pt", weights_only=False)
    assert ck["step"] == 2
    metrics, run_dir = run_recipe("revela", [], output_dir=str(out), preset="tiny", resume=True, quiet=True)
    return metrics, run_dir, ck


def test_interrupted_run_resumes_from_its_checkpoint(tiny_run):
    metrics, run_dir, first_ck = tiny_run
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in rows if r.get("run") == "seed-0"]
    assert steps == [1, 2, 3]  # step 3 once, after the resume; 1 and 2 not redone
    assert all(r["loss_inbatch"] != r["loss_plain"] for r in rows if r.get("run") == "seed-0")
    evals = [json.loads(x)["key"] for x in (run_dir / "state" / "eval.jsonl").read_text().splitlines()]
    assert evals == ["bm25", "untrained", "seed-0"]  # each evaluated once
    recorded = {
        json.loads(x)["key"]: json.loads(x)["value"]
        for x in (run_dir / "state" / "eval.jsonl").read_text().splitlines()
    }
    for key, name in (("bm25", "bm25"), ("untrained", "untrained"), ("seed-0", "revela")):
        per_query = recorded[key]["ndcg@10_per_query"]  # each judged query's nDCG@10, as scored
        assert metrics[f"{name}/ndcg@10"] == pytest.approx(sum(per_query) / len(per_query), abs=1e-4)
        assert all(0 <= q <= 1 for q in per_query)
    assert metrics["revela/recall@100"] == pytest.approx(recorded["seed-0"]["recall@100"], abs=1e-4)
    assert metrics["bm25/ndcg@10"] > 0.3  # lexical search on real docstrings works; the tiny model is random
    report = (run_dir / "report.md").read_text()
    assert "Revela, mean ± std over 1 seeds" in report and "training.png" in report
    assert f"Built under Python {sys.version.split()[0]}" in report  # the pydoc build follows the interpreter
    for ref in ("untrained", "bm25"):  # the per-query gap and its interval agree with the means
        d, lo, hi = metrics[f"revela/delta_ndcg@10_vs_{ref}"]
        assert lo <= d <= hi and d == pytest.approx(metrics["revela/ndcg@10"] - metrics[f"{ref}/ndcg@10"], abs=2e-4)
    assert "95 % interval" in report


def test_lora_trains_both_the_retriever_and_the_lm(tiny_run):
    _, run_dir, first_ck = tiny_run
    last = torch.load(run_dir / "state" / "seed-0" / "checkpoint.pt", weights_only=False)
    assert last["step"] == 3
    names = list(last["trainable"])
    assert names and all("lora_" in n for n in names)
    for part in ("retriever.", "lm."):
        moved = [n for n in names if n.startswith(part) and "lora_B" in n and last["trainable"][n].abs().sum() > 0]
        assert moved, f"no LoRA weight of the {part[:-1]} moved"
    assert (run_dir / "retrievers" / "seed-0" / "adapter" / "adapter_config.json").exists()


def test_the_trained_retriever_serves_search(tiny_run, tmp_path):
    from agentkit.server.http import ServerProcess
    from agentkit.tools.remote import RemoteTool
    from agentkit.tools.search import SearchTool

    _, run_dir, _ = tiny_run
    corpus = tmp_path / "c.jsonl"
    docs = [{"id": f"d{i}", "title": "", "text": t} for i, t in enumerate(["sort a list", "open a file", "parse json"])]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    retriever = str(run_dir / "retrievers" / "seed-0")
    local = SearchTool(str(corpus), mode="dense", retriever=retriever, top_k=3)
    with pytest.raises(AgentkitError, match="needs mode 'dense' or 'hybrid'"):
        SearchTool(str(corpus), retriever=retriever)
    cmd = ["-m", "agentkit", "tool-server", "search", "--corpus", str(corpus), "--retriever", retriever]
    with ServerProcess(cmd, tmp_path / "server.log", startup_timeout_s=120) as server:
        remote = RemoteTool(server.url)
        assert remote(query="read a file").output == local(query="read a file").output
    assert local(query="read a file").meta["ids"] and len(local(query="x").meta["ids"]) == 3


def test_bad_configs_fail_before_any_model_loads(tmp_path):
    with pytest.raises(AgentkitError, match="bm25 batching needs the whole corpus"):
        run_recipe("revela", ["streaming=true", "corpus=x.jsonl"], output_dir=str(tmp_path / "a"), preset="tiny")
    with pytest.raises(AgentkitError, match="does not exist"):
        run_recipe("revela", [f"benchmark={tmp_path}"], output_dir=str(tmp_path / "b"), preset="tiny")
    with pytest.raises(AgentkitError, match="batch_size"):
        run_recipe("revela", ["batch_size=1"], output_dir=str(tmp_path / "c"), preset="tiny")


def test_a_frozen_retriever_does_not_move(tmp_path):
    run_recipe(
        "revela", ["steps=2", "retriever_freeze_steps=2"], output_dir=str(tmp_path / "r"), preset="tiny", quiet=True
    )
    ck = torch.load(tmp_path / "r" / "state" / "seed-0" / "checkpoint.pt", weights_only=False)["trainable"]
    assert all(v.abs().sum() == 0 for n, v in ck.items() if n.startswith("retriever.") and "lora_B" in n)
    assert any(v.abs().sum() > 0 for n, v in ck.items() if n.startswith("lm.") and "lora_B" in n)


def test_without_the_plain_loss_the_run_logs_and_plots_the_inbatch_loss(tmp_path):
    """log_plain off: pass 1 records only the weighted chunks; rows carry no plain loss and the plot says so."""
    import json
    import math

    run_recipe("revela", ["steps=2", "log_plain=false"], output_dir=str(tmp_path / "r"), preset="tiny", quiet=True)
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "loss_inbatch" in r]
    assert len(steps) == 2 and all("loss_plain" not in r and math.isfinite(r["loss_inbatch"]) for r in steps)
    assert "log_plain off" in (tmp_path / "r" / "report.md").read_text()


def test_revela_under_accelerate_launch_two_processes(tmp_path):
    out = tmp_path / "run"
    args = ["run", "revela", "--preset", "tiny", "--set", "steps=2", "--output-dir", str(out)]
    proc = launch_two_processes(args, ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r.get("run") == "seed-0"] == [1, 2]
    assert (out / "retrievers" / "seed-0" / ".complete").exists() and (out / "report.md").exists()
