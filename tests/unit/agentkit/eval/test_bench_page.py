"""docs/benchmarks.md's result blocks are what `agentkit bench page` renders from docs/results/bench: a figure in
a block cannot drift from its run file, nor be copied by hand."""

import json

import pytest

from agentkit.errors import AgentkitError
from agentkit.eval.bench import PAGE, render_page


def test_the_benchmarks_page_is_rendered_from_its_results():
    assert render_page() == PAGE.read_text(), "docs/benchmarks.md is out of date: run `agentkit bench page`"


def test_a_block_follows_its_file_and_a_missing_file_is_named(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("before\n<!-- bench:sandbox -->\nstale 1.0 ms\n<!-- /bench:sandbox -->\nafter\n")
    res = json.loads(open("docs/results/bench/sandbox.json").read())
    res["sandbox"]["p50_ms"] = 1.23
    (tmp_path / "sandbox.json").write_text(json.dumps(res))
    out = render_page(page, tmp_path)
    assert "stale" not in out and "| 1.23 ms |" in out and out.startswith("before\n") and out.endswith("after\n")
    page.write_text("<!-- bench:ace -->\n<!-- /bench:ace -->\n")
    with pytest.raises(AgentkitError, match="block bench:ace has no result"):
        render_page(page, tmp_path)


def test_reports_of_benches_without_a_kept_run_render_their_figures():
    """serve and structured have no kept run yet (they need the vLLM env): their reports on results of their
    shape."""
    from agentkit.eval.bench import BENCHES

    load = {"clients": 16, "failures": 0, "p50_s": 5.84, "p95_s": 7.02, "requests_per_s": 2.72, "tokens_per_s": 43.5}
    one = {**load, "clients": 1, "requests_per_s": 0.88}
    serve = {
        "requests": 200,
        "max_tokens": 16,
        "agentkit": {"concurrent": load, "one_by_one": one, "throughput_ratio": 3.09, "alive_after": True},
        "vllm": {
            "concurrent": {**load, "requests_per_s": 0.57},
            "one_by_one": one,
            "throughput_ratio": 1.3,
            "alive_after": True,
        },
        "vs_vllm": {"requests_per_s": 4.77, "p50": 4.84, "p95": 4.26},
    }
    text = BENCHES.get("serve").report(serve)
    assert "| vllm | 16 | 0 | 5.84 s |" in text and "**4.77×** the requests per second" in text
    row = {
        "workload": "fixed",
        "batch": 1,
        "free_tokens_per_s": 13.8,
        "constrained_tokens_per_s": 14.8,
        "ratio": 1.072,
        "grammar_share_of_time": 0.011,
        "constrained_complete_json": None,
    }
    structured = {
        "libraries": [
            {"library": "none", "batch": 1, "tokens_per_s": 11.3},
            {
                "library": "xgrammar",
                "batch": 1,
                "tokens_per_s": 9.5,
                "ratio": 0.838,
                "setup_s": 1.356,
                "mask_ms_per_step": 2.32,
            },
        ],
        "hfengine": [row, {**row, "workload": "natural", "constrained_complete_json": "1/1"}],
    }
    text = BENCHES.get("structured").report(structured)
    assert "| xgrammar | 1 | 9.5 | 0.838 | 1.356 s | 2.32 ms |" in text and "| natural | 1 |" in text
    assert "keeps 1.07× at batch 1" in text
