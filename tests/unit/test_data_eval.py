import doctest
import re

import pytest

import agentkit.engines.base
import agentkit.engines.hf
import agentkit.engines.sampling
import agentkit.errors
import agentkit.eval.metrics as metrics
import agentkit.registry
import agentkit.server.http
import agentkit.tools.parsers
import agentkit.tools.search
from agentkit.data import MultiHopKB, arithmetic_suite, multihop_suite, read_jsonl
from agentkit.errors import AgentkitError


@pytest.mark.parametrize("mod", [metrics, agentkit.engines.base, agentkit.engines.hf, agentkit.engines.sampling,
                                 agentkit.registry, agentkit.errors, agentkit.tools.parsers,
                                 agentkit.tools.search, agentkit.server.http])
def test_doctests(mod):
    res = doctest.testmod(mod)
    assert res.attempted > 0 and res.failed == 0


def test_arithmetic_deterministic_and_correct():
    a, b = arithmetic_suite(40, seed=3), arithmetic_suite(40, seed=3)
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]
    assert [t.question for t in arithmetic_suite(40, seed=4)] != [t.question for t in a]
    assert arithmetic_suite(10, seed=3)[7].question == a[7].question  # the i-th task depends only on (seed, i)
    for t in a:
        if t.kind == "mul":
            assert int(t.answer) == t.meta["a"] * t.meta["b"] and abs(int(t.answer)) > 1000
        if t.kind == "linear":
            m = re.match(r"Solve for x: (\d+)x ([+-]) (\d+) = (-?\d+)\.", t.question)
            a_, sign, b_, c = m.groups()
            x = int(t.answer)
            assert int(a_) * x + (int(b_) if sign == "+" else -int(b_)) == int(c)
        if t.kind == "chain":
            expr = t.question.removeprefix("Compute ").rstrip(".").replace("×", "*")
            assert eval(expr) == int(t.answer)  # noqa: S307 - our own generated arithmetic
    with pytest.raises(ValueError, match="unknown arithmetic kind"):
        arithmetic_suite(2, kinds=["division"])


def test_steps_kind_is_four_dependent_operations():
    ops = {"multiply by": lambda x, y: x * y, "subtract": lambda x, y: x - y, "add": lambda x, y: x + y}
    tasks = arithmetic_suite(20, seed=7, kinds=("steps",))
    assert len({t.question for t in tasks}) == 20 and all(t.id.startswith("arith-steps-7-") for t in tasks)
    for t in tasks:  # replay the words of the question, step by step
        m = re.match(r"Start with (\d+)\. (.*)\. Use one Python call per step\.$", t.question)
        x, steps = int(m.group(1)), m.group(2).lower().split(", then ")
        assert len(steps) == 4 and steps[0].startswith("multiply by")
        for step in steps:
            op, y = step.rsplit(" ", 1)
            x = ops[op](x, int(y))
        assert str(x) == t.answer == str(eval(t.meta["expr"]))  # noqa: S307 - our own generated arithmetic


def test_multihop_answers_follow_the_corpus():
    tasks, corpus = multihop_suite(30, seed=1)
    docs = {d["id"]: d for d in corpus}
    assert len(docs) == len(corpus)  # unique ids
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in multihop_suite(30, seed=1)[0]]
    for t in tasks:
        support = [docs[i] for i in t.meta["support"]]
        assert len(support) == t.meta["hops"]
        assert t.answer in support[-1]["text"]  # the last hop's document holds the answer
        for d, nxt in zip(support, support[1:]):
            assert nxt["title"] in d["text"]  # each document names the next hop
    kb = MultiHopKB.build(seed=1)
    assert len(kb.people) == 120 and len(set(kb.people)) == 120


def test_multihop_corpus_roundtrip_and_bad_jsonl(tmp_path):
    kb = MultiHopKB.build(seed=0)
    path = kb.write_corpus(tmp_path / "corpus.jsonl")
    assert read_jsonl(path, required=("id", "title", "text")) == kb.corpus()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "title": "t", "text": "x"}\n{"id": "b", "title": \n')
    with pytest.raises(AgentkitError, match=r"bad.jsonl:2: not valid JSON"):
        read_jsonl(bad)
    bad.write_text('{"id": "a"}\n')
    with pytest.raises(AgentkitError, match=r"bad.jsonl:1: missing field\(s\) title, text"):
        read_jsonl(bad, required=("id", "title", "text"))


def test_task_files_jsonl_parquet_and_dataset(tmp_path):
    import datasets

    from agentkit.data.tasks import load_task_file, write_jsonl

    tasks = arithmetic_suite(3, seed=1) + arithmetic_suite(2, seed=1, kinds=("add", "sub", "small_mul"))
    assert len({t.id for t in tasks}) == 5  # easy kinds get their own ids
    rows = [t.to_dict() for t in tasks]
    write_jsonl(tmp_path / "q.jsonl", rows)
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "q"))
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "q.parquet"))
    for src in ("q.jsonl", "q", "q.parquet"):
        assert load_task_file(tmp_path / src) == tasks
    write_jsonl(tmp_path / "bad.jsonl", [rows[0], {"id": "x", "question": "?"}])
    with pytest.raises(AgentkitError, match=r"bad.jsonl:line 2: missing field\(s\) answer"):
        load_task_file(tmp_path / "bad.jsonl")
    write_jsonl(tmp_path / "bad.jsonl", [{**rows[0], "metric": "bleu"}])
    with pytest.raises(AgentkitError, match="field 'metric'"):
        load_task_file(tmp_path / "bad.jsonl")


def test_scorers():
    assert metrics.score_task("numeric", "so it is 1,234.", "1234") == {"correct": 1.0}
    assert metrics.score_task("numeric", "no number", "5") == {"correct": 0.0}
    s = metrics.score_task("em_f1", "<answer>Drenholt city</answer>", "Drenholt")
    assert s["correct"] == 0.0 and 0 < s["f1"] < 1
    assert metrics.extract_answer(r"\boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    with pytest.raises(ValueError):
        metrics.score_task("bleu", "a", "b")
