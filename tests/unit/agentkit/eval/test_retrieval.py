"""BEIR loading and scoring: hand-computed nDCG / recall / MRR, the identical-id pitfall, clear errors, and the
benchmark builders' parsing."""

import math

import numpy as np
import pytest

from agentkit.errors import AgentkitError
from agentkit.eval.ir_benchmarks import parse_translations, strip_name
from agentkit.eval.retrieval import BeirData, bm25_run, dense_run, load_beir, score_run, write_beir


def test_scores_match_a_hand_computation():
    qrels = {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1}}
    run = {"q1": {"d9": 3.0, "d1": 2.0, "d2": 1.0}, "q2": {"d3": 5.0}}
    # q1: relevant at ranks 2 and 3 → DCG = 1/log2(3) + 1/log2(4); ideal = 1 + 1/log2(3)
    ndcg_q1 = (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))
    got = score_run(qrels, run)
    assert got["ndcg@10"] == pytest.approx((ndcg_q1 + 1.0) / 2, abs=1e-4)
    assert got["recall@100"] == 1.0 and got["mrr"] == pytest.approx((0.5 + 1.0) / 2)


def test_a_query_without_hits_counts_as_zero():
    assert score_run({"q1": {"d1": 1}, "q2": {"d2": 1}}, {"q1": {"d1": 1.0}})["ndcg@10"] == 0.5


def test_identical_ids_are_dropped_and_counted():
    qrels = {"a": {"b": 1}}
    run = {"a": {"a": 10.0, "b": 5.0}}  # the query's own document ranks first (ArguAna, Quora)
    assert score_run(qrels, run)["mrr"] == 1.0 and score_run(qrels, run)["ignored_identical"] == 1
    assert score_run(qrels, run, ignore_identical_ids=False)["mrr"] == 0.5


def test_bm25_ranks_matching_documents_and_leaves_out_the_rest():
    corpus = {f"d{i}": {"title": "", "text": t} for i, t in enumerate(["apt package manager", "the kernel", "apt"])}
    corpus["d3"] = {"title": "Package", "text": "a package format"}
    data = BeirData(corpus, {"q": "apt package", "s": "the of"}, {"q": {"d0": 1}})
    run = bm25_run(data, k=10)
    assert list(run["q"]) == ["d0", "d2", "d3"] and list(run["q"].values()) == sorted(run["q"].values(), reverse=True)
    assert run["s"] == {}  # stop words only: nothing matches, nothing ranked by chance
    assert score_run(data.qrels, run)["mrr"] == 1.0


def test_write_then_load_round_trip_and_dense_run(tmp_path):
    data = BeirData(
        corpus={"d1": {"title": "", "text": "cats"}, "d2": {"title": "T", "text": "dogs"}},
        queries={"q1": "cat", "q2": "dog", "q3": "unjudged"},
        qrels={"q1": {"d1": 1}, "q2": {"d2": 1}},
        meta={"source": "test"},
    )
    back = load_beir(write_beir(tmp_path / "b", data))
    assert back.corpus == data.corpus and back.qrels == data.qrels and back.meta == {"source": "test"}
    assert set(back.queries) == {"q1", "q2"}  # only judged queries are scored

    def encode(texts, kind):  # a perfect toy encoder: "cat…" → e0, "dog…"/"T. dogs" → e1
        return np.array([[1.0, 0.0] if "cat" in t else [0.0, 1.0] for t in texts], np.float32)

    assert score_run(back.qrels, dense_run(back, encode))["ndcg@10"] == 1.0


def test_bad_beir_files_name_the_line(tmp_path):
    data = BeirData({"d1": {"title": "", "text": "x"}}, {"q1": "y"}, {"q1": {"d1": 1}})
    folder = write_beir(tmp_path / "b", data)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tnope\t1\n")
    with pytest.raises(AgentkitError, match=r"test.tsv:2: unknown document id 'nope'"):
        load_beir(folder)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\n")
    with pytest.raises(AgentkitError, match=r"test.tsv:2: expected 3 tab-separated fields"):
        load_beir(folder)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n{"_id": "d1", "text": "z"}\n')
    with pytest.raises(AgentkitError, match="duplicate document id 'd1'"):
        load_beir(folder)
    with pytest.raises(AgentkitError, match="does not exist"):
        load_beir(tmp_path / "nothing")


def test_debian_translation_parsing_and_name_removal():
    text = (
        "Package: foo-utils\nDescription-md5: 1\nDescription-en: tools for foo\n foo-utils manages foo.\n .\n"
        " Also bar.\n\nPackage: nodesc\nDescription-md5: 2\n"
    )
    assert parse_translations(text) == [("foo-utils", "tools for foo", "foo-utils manages foo.\n\nAlso bar.")]
    assert strip_name("foo-utils manages foo; see foo-utils.", "foo-utils") == "manages foo; see ."
    assert strip_name("libfoo-utils stays", "foo-utils") == "libfoo-utils stays"
