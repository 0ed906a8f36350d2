"""agentkit.uncertainty.generate: task specs, resume from a partial file, no padding leaking between questions."""

import json

import pytest

from agentkit.engines.base import SamplingParams
from agentkit.uncertainty.schema import GenerationRow, iter_generations


def test_generate_resumes_from_partial(tmp_path):
    from agentkit.uncertainty.generate import generate, load_tasks

    tasks = load_tasks("arithmetic-easy:3")
    out = tmp_path / "g.jsonl"
    part = tmp_path / "g.jsonl.partial"
    part.mkdir()
    # as if an earlier run finished the first question before it was killed (the cut line is redone)
    (part / "tiny-random.jsonl").write_text(
        json.dumps({"key": tasks[0].id, "value": {"samples": ["KEPT", "KEPT"], "greedy": "KEPT"}})
        + "\n"
        + '{"key": "cut'
    )
    generate(["tiny-random"], tasks, out, SamplingParams(n=2, temperature=0.7, max_tokens=4, seed=0), progress=False)
    rows = [r for _, r in iter_generations(out)]
    assert [r.id for r in rows] == [t.id for t in tasks]
    assert rows[0].samples["tiny-random"] == ["KEPT", "KEPT"] and rows[0].greedy["tiny-random"] == "KEPT"
    assert all(len(r.samples["tiny-random"]) == 2 and r.reference for r in rows[1:])
    assert not part.exists()  # done: the resume state goes


def test_load_tasks_errors(tmp_path):
    from agentkit.errors import AgentkitError
    from agentkit.uncertainty.generate import load_tasks

    with pytest.raises(AgentkitError, match="did you mean 'multihop-open'"):
        load_tasks("multihop-opn:3")
    with pytest.raises(AgentkitError, match="repeats"):
        load_tasks("arithmetic:2,arithmetic:2")
    assert len(load_tasks("multihop-open:2")) == 2 and GenerationRow  # noqa: B015
