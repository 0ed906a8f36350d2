"""The embedded MiniLM at work: dense and hybrid search over the multi-hop corpus, and uncertainty scoring with
embedding similarity."""

import pytest

from agentkit.data import multihop_suite
from agentkit.tools.search import SearchIndex
from agentkit.uncertainty.score import ScoreConfig, score


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_first_hop_is_retrieved(mode):
    tasks, corpus = multihop_suite(30, seed=2)
    index = SearchIndex(corpus)
    hits = index.search([t.question for t in tasks], 3, mode)
    recall = sum(t.meta["support"][0] in [h.id for h in hs] for t, hs in zip(tasks, hits)) / len(tasks)
    assert recall >= 0.9, recall  # the question names the first-hop entity
    assert all(len(hs) == 3 for hs in hits)
    assert [h.id for h in index.search([tasks[0].question], 3, mode)[0]] == [h.id for h in hits[0]]  # deterministic


def test_score_with_minilm_and_rouge(gens, tmp_path):
    emb = score(gens, ScoreConfig(similarity="embedding"), progress=False)
    rl = score(gens, ScoreConfig(similarity="rougeL", reference_model="m1"), progress=False)
    assert emb["estimators"]["TU"]["auroc"] > 0.5 and rl["reference_model"] == "m1"
