"""Retrieval evaluation on BEIR-format data: loader, nDCG@10 / Recall@100 / MRR through pytrec_eval.

A BEIR dataset is a folder with ``corpus.jsonl`` (``{"_id", "title", "text"}``), ``queries.jsonl``
(``{"_id", "text"}``) and ``qrels/<split>.tsv`` (``query-id  corpus-id  score`` with a header line), as BEIR and
MTEB read it. Scores come from ``pytrec_eval`` (the library BEIR itself calls), so numbers are comparable to
published BEIR tables.

The identical-id pitfall: on datasets whose queries are also documents (ArguAna, Quora, CQADupStack) the query's
own document ranks first and must not count; BEIR's ``ignore_identical_ids=True`` drops a hit whose id equals the
query id. We do the same (on by default) and say how many hits it dropped, so a dataset that shares ids by
accident is noticed rather than silently scored.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentkit.data.tasks import read_jsonl
from agentkit.errors import AgentkitError
from agentkit.files import atomic_write

METRICS = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100", "mrr": "recip_rank"}


@dataclass
class BeirData:
    """One split of a BEIR dataset: ``corpus`` id → {title, text}; ``queries`` id → text; ``qrels`` qid → {did: rel}."""

    corpus: dict[str, dict[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    name: str = ""
    meta: dict = field(default_factory=dict)

    def doc_text(self, did: str) -> str:
        d = self.corpus[did]
        return f"{d['title']}. {d['text']}" if d.get("title") else d["text"]


def load_beir(folder: str | Path, split: str = "test") -> BeirData:
    """Read a BEIR folder; every problem (missing file, bad line, a qrel naming an unknown id) is one clear error."""
    folder = Path(folder)
    for rel in ("corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"):
        if not (folder / rel).exists():
            raise AgentkitError(
                f"{folder / rel} does not exist", "a BEIR folder has corpus.jsonl, queries.jsonl, qrels/"
            )
    corpus: dict[str, dict[str, str]] = {}
    for row in read_jsonl(folder / "corpus.jsonl", ("_id", "text")):
        did = str(row["_id"])
        if did in corpus:
            raise AgentkitError(f"{folder / 'corpus.jsonl'}: duplicate document id {did!r}", "ids must be unique")
        corpus[did] = {"title": str(row.get("title") or ""), "text": str(row["text"])}
    queries = {str(r["_id"]): str(r["text"]) for r in read_jsonl(folder / "queries.jsonl", ("_id", "text"))}
    qrels: dict[str, dict[str, int]] = {}
    path = folder / "qrels" / f"{split}.tsv"
    with open(path, encoding="utf-8") as f:
        for n, row in enumerate(csv.reader(f, delimiter="\t"), 1):
            if n == 1 and row and row[0] == "query-id":
                continue
            if len(row) != 3:
                raise AgentkitError(f"{path}:{n}: expected 3 tab-separated fields, got {len(row)}", "qid  did  score")
            qid, did, score = row
            if qid not in queries or did not in corpus:
                which = "query" if qid not in queries else "document"
                raise AgentkitError(f"{path}:{n}: unknown {which} id {qid if which == 'query' else did!r}")
            try:
                qrels.setdefault(qid, {})[did] = int(score)
            except ValueError:
                raise AgentkitError(f"{path}:{n}: score {score!r} is not an integer") from None
    queries = {q: t for q, t in queries.items() if q in qrels}  # BEIR scores only the judged queries of the split
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return BeirData(corpus, queries, qrels, folder.name, meta)


def write_beir(folder: str | Path, data: BeirData, split: str = "test") -> Path:
    """Write a BEIR folder (each file atomically), the inverse of ``load_beir``."""
    folder = Path(folder)
    corpus = "".join(json.dumps({"_id": d, **v}, ensure_ascii=False) + "\n" for d, v in data.corpus.items())
    queries = "".join(json.dumps({"_id": q, "text": t}, ensure_ascii=False) + "\n" for q, t in data.queries.items())
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{r}\n" for q, rel in data.qrels.items() for d, r in rel.items()
    )
    atomic_write(folder / "corpus.jsonl", corpus)
    atomic_write(folder / "queries.jsonl", queries)
    atomic_write(folder / "qrels" / f"{split}.tsv", qrels)
    atomic_write(folder / "meta.json", json.dumps(data.meta, indent=1))
    return folder


def score_run(
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]],
    ignore_identical_ids: bool = True,
    per_query: bool = False,
) -> dict[str, Any]:
    """Mean nDCG@10, Recall@100 and MRR of a run (qid → {did: score}) over the judged queries.

    ``ignored_identical`` counts the hits dropped because their id equals the query's. ``per_query``: also
    ``ndcg@10_per_query``, each judged query's nDCG@10 in sorted-qid order (for paired comparisons of two runs).

    >>> score_run({"q1": {"d1": 1}}, {"q1": {"q1": 9.0, "d2": 2.0, "d1": 1.0}})
    {'ndcg@10': 0.6309, 'recall@100': 1.0, 'mrr': 0.5, 'ignored_identical': 1}
    """
    import pytrec_eval

    dropped = 0
    if ignore_identical_ids:
        clean = {}
        for q, hits in run.items():
            clean[q] = {d: s for d, s in hits.items() if d != q}
            dropped += len(hits) - len(clean[q])
        run = clean
    # A query with no hits still counts (as zeros), as in BEIR; pytrec_eval skips absent queries, so add them.
    run = {q: run.get(q) or {"__none__": 0.0} for q in qrels}
    each = pytrec_eval.RelevanceEvaluator(qrels, set(METRICS.values())).evaluate(run)
    out: dict[str, Any] = {
        name: round(float(np.mean([m[key] for m in each.values()])), 4) for name, key in METRICS.items()
    }
    out["ignored_identical"] = dropped
    if per_query:
        out["ndcg@10_per_query"] = [round(each[q][METRICS["ndcg@10"]], 5) for q in sorted(qrels)]
    return out


Encoder = Callable[[list[str], str], np.ndarray]  # (texts, "query" | "passage") -> L2-normalised [N, D]


def dense_run(data: BeirData, encode: Encoder, k: int = 100) -> dict[str, dict[str, float]]:
    """Rank the corpus for every query by cosine similarity (exact inner product over normalised embeddings)."""
    dids = list(data.corpus)
    qids = list(data.queries)
    docs = encode([data.doc_text(d) for d in dids], "passage")
    qs = encode([data.queries[q] for q in qids], "query")
    return top_k(qids, dids, qs @ docs.T, k)


def top_k(qids: list[str], dids: list[str], scores: np.ndarray, k: int) -> dict[str, dict[str, float]]:
    """qid → {did: score} for the ``k`` best documents of each row of ``scores`` [Q, D]. Ties break by corpus order."""
    k = min(k + 1, len(dids))  # one spare: an identical-id hit may be dropped
    idx = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return {q: {dids[j]: float(scores[i, j]) for j in idx[i]} for i, q in enumerate(qids)}


def bm25_run(data: BeirData, k: int = 100) -> dict[str, dict[str, float]]:
    """BM25 (bm25s, English stop words) over title + text, through the ``search`` tool's index.

    Documents that share no term with the query (score 0) are left out of the run, as Lucene/Pyserini's BM25 of
    the BEIR tables leaves them out: bm25s would rank them in index order, and Recall@100 would count chance.
    """
    from agentkit.tools.search import SearchIndex

    dids = list(data.corpus)
    index = SearchIndex([{**data.corpus[d], "id": d} for d in dids])
    qids = list(data.queries)
    ranks = index.bm25_ranks([data.queries[q] for q in qids], k + 1)  # + 1: a query's own id may be dropped
    return {q: {dids[i]: s for i, s in r} for q, r in zip(qids, ranks)}
