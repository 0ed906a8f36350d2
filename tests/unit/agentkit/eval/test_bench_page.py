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
