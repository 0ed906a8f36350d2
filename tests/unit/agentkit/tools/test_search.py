"""agentkit.tools.search over the generated multi-hop corpus with BM25 (dense and hybrid, which load MiniLM, are
in tests/e2e/test_minilm.py)."""

import pytest

from agentkit.data import MultiHopKB, multihop_suite
from agentkit.errors import AgentkitError
from agentkit.tools import TOOLS
from agentkit.tools.search import SearchIndex, SearchTool, load_corpus


@pytest.fixture(scope="module")
def world():
    tasks, corpus = multihop_suite(30, seed=2)
    return tasks, corpus, SearchIndex(corpus)


def test_first_hop_is_retrieved(world):
    tasks, _, index = world
    hits = index.search([t.question for t in tasks], 3, "bm25")
    recall = sum(t.meta["support"][0] in [h.id for h in hs] for t, hs in zip(tasks, hits)) / len(tasks)
    assert recall >= 0.9, recall  # the question names the first-hop entity
    assert all(len(hs) == 3 for hs in hits)
    assert [h.id for h in index.search([tasks[0].question], 3, "bm25")[0]] == [h.id for h in hits[0]]  # deterministic


def test_second_hop_follows_the_first(world):
    """Searching the entity named in the first document finds the second hop (how an agent chains calls)."""
    tasks, corpus, index = world
    docs = {d["id"]: d for d in corpus}
    found = 0
    for t in tasks:
        second = docs[t.meta["support"][1]]
        found += second["id"] in [h.id for h in index.search([second["title"]], 3, "bm25")[0]]
    assert found / len(tasks) >= 0.9


def test_tool_output_and_errors(world, tmp_path):
    tasks, corpus, index = world
    tool = SearchTool(index=index, top_k=2)
    r = tool(query=tasks[0].question)
    assert r.ok and r.output.startswith("[1] ") and "[2] " in r.output and len(r.meta["ids"]) == 2
    assert len(tool(query=tasks[0].question, top_k=4).meta["ids"]) == 4
    assert not tool(query="  ").ok and not tool(q="x").ok
    assert tool(query="the of and").output == "No results."
    assert TOOLS.get("search") is SearchTool
    with pytest.raises(AgentkitError, match="needs a corpus"):
        SearchTool()


def test_corpus_sources_and_bad_input(tmp_path):
    kb = MultiHopKB.build(seed=0)
    path = kb.write_corpus(tmp_path / "c.jsonl")
    import datasets

    ds = datasets.Dataset.from_list(kb.corpus())
    assert load_corpus(path) == load_corpus(ds) == load_corpus(kb.corpus())
    with pytest.raises(AgentkitError, match="duplicate document id"):
        load_corpus([{"id": 1, "text": "a"}, {"id": "1", "text": "b"}])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "x"}\n{"title": "no id"}\n')
    with pytest.raises(AgentkitError, match=r"bad.jsonl:2: missing field\(s\) id, text"):
        load_corpus(bad)
