"""agentkit.data.multihop: answers follow the corpus; the corpus round-trips; bad JSONL names file and line."""

import pytest

from agentkit.data import MultiHopKB, multihop_suite, read_jsonl
from agentkit.errors import AgentkitError


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
