"""agentkit.data.suites: every built-in suite by name, deterministic, and an unknown name refused with a hint."""

import pytest

from agentkit.data.multihop import MultiHopKB
from agentkit.data.suites import SUITE_NAMES, suite_tasks
from agentkit.errors import AgentkitError


@pytest.mark.parametrize("name", SUITE_NAMES)
def test_each_suite_is_deterministic_and_ids_are_unique(name):
    tasks = suite_tasks(name, 12, seed=3)
    assert len(tasks) == 12 and len({t.id for t in tasks}) == 12
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in suite_tasks(name, 12, seed=3)]
    assert [t.question for t in tasks] != [t.question for t in suite_tasks(name, 12, seed=4)]


def test_kinds_and_the_open_book_variant():
    assert {t.kind for t in suite_tasks("arithmetic-easy", 6)} == {"add", "sub", "small_mul"}
    assert {t.kind for t in suite_tasks("steps", 3)} == {"steps"}
    kb = MultiHopKB.build(5)
    closed, opened = suite_tasks("multihop", 4, 1, kb), suite_tasks("multihop-open", 4, 1, kb=5)
    docs = {d["id"]: d for d in kb.corpus()}
    for c, o in zip(closed, opened):
        assert o.id == c.id + "-open" and o.answer == c.answer and o.question.endswith("Question: " + c.question)
        assert all(docs[i]["text"] in o.question for i in c.meta["support"])


def test_an_unknown_suite_is_refused_with_a_hint():
    with pytest.raises(AgentkitError, match="suite 'multihp' is unknown.*did you mean 'multihop'"):
        suite_tasks("multihp", 3)
