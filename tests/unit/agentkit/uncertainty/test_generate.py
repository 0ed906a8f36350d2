"""agentkit.uncertainty.generate: task specs, resume from a partial file, no padding leaking between questions."""

import json

import numpy as np
import pytest

from agentkit.uncertainty import estimators as est
from agentkit.uncertainty.schema import GenerationRow, iter_generations
from agentkit.uncertainty.similarity import similarity_matrices


def _stats(ref, others, backend="exact"):
    texts = list(dict.fromkeys(ref + [t for o in others for t in o]))
    slots = [texts.index(t) for t in ref] + [texts.index(t) for o in others for t in o]
    member = [0] * len(ref) + [k + 1 for k, o in enumerate(others) for _ in o]
    index, member = np.array([slots]), np.array([member])
    sim = similarity_matrices(texts, index, backend)
    return {"sim": sim, "member": member, "lexical": similarity_matrices(texts, index, "rougeL")}


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
    generate(["tiny-random"], tasks, out, samples=2, max_tokens=4, progress=False)
    rows = [r for _, r in iter_generations(out)]
    assert [r.id for r in rows] == [t.id for t in tasks]
    assert rows[0].samples["tiny-random"] == ["KEPT", "KEPT"] and rows[0].greedy["tiny-random"] == "KEPT"
    assert all(len(r.samples["tiny-random"]) == 2 and r.reference for r in rows[1:])


def test_load_tasks_errors(tmp_path):
    from agentkit.errors import AgentkitError
    from agentkit.uncertainty.generate import load_tasks

    with pytest.raises(AgentkitError, match="did you mean 'multihop-open'"):
        load_tasks("multihop-opn:3")
    with pytest.raises(AgentkitError, match="repeats"):
        load_tasks("arithmetic:2,arithmetic:2")
    assert len(load_tasks("multihop-open:2")) == 2 and GenerationRow  # noqa: B015


def test_padding_does_not_leak_between_questions():
    """Questions with different sample counts, scored together, give what each gives alone."""
    qs = [(["a", "b", "a", "c"], [["a"], ["b", "b", "d"]]), (["x", "x"], [["y", "x"]]), (["p", "q", "r"], [["p"]])]
    alone = [{n: e(_stats(r, o, "rougeL")) for n, e in est.all_estimators(sets_threshold=0.5).items()} for r, o in qs]
    texts = list(dict.fromkeys(t for r, o in qs for t in r + [x for m in o for x in m]))
    width = max(len(r) + sum(map(len, o)) for r, o in qs)
    index, member = np.full((3, width), -1), np.full((3, width), -1)
    for q, (r, o) in enumerate(qs):
        flat = r + [x for m in o for x in m]
        index[q, : len(flat)] = [texts.index(t) for t in flat]
        member[q, : len(flat)] = [0] * len(r) + [k + 1 for k, m in enumerate(o) for _ in m]
    sim = similarity_matrices(texts, index, "rougeL")
    together = {
        n: e({"sim": sim, "member": member, "lexical": sim}) for n, e in est.all_estimators(sets_threshold=0.5).items()
    }
    for q in range(3):
        for name in together:
            assert together[name][q] == pytest.approx(alone[q][name][0], abs=1e-6), (q, name)
