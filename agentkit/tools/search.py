"""The ``search`` tool: BM25 (bm25s), dense (MiniLM + faiss) or hybrid retrieval over a document corpus.

A corpus is JSONL with ``{"id", "title", "text"}`` per line, an HF ``datasets.Dataset`` with those columns, or
a list of such dicts. Dense retrieval embeds ``title + text`` with the embedded all-MiniLM-L6-v2 (normalised,
inner product = cosine) into a faiss flat index, or with a retriever trained by the revela recipe
(``retriever=PATH``: its query/passage prefixes and pooling). Hybrid fuses the two rankings by reciprocal rank:
``score(d) = Σ_r 1 / (60 + rank_r(d))`` (Cormack et al., 2009).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentkit.errors import AgentkitError
from agentkit.tools.base import ToolResult

Mode = Literal["bm25", "dense", "hybrid"]
RRF_K = 60


@dataclass
class Hit:
    id: str
    title: str
    text: str
    score: float


def load_corpus(source: Any) -> list[dict[str, str]]:
    """Documents from a JSONL path, an HF Dataset, or a list of dicts; ids must be unique."""
    if isinstance(source, (str, Path)):
        from agentkit.data.tasks import read_jsonl

        docs = read_jsonl(source, required=("id", "text"))
    elif hasattr(source, "column_names"):  # datasets.Dataset
        missing = {"id", "text"} - set(source.column_names)
        if missing:
            raise AgentkitError(f"the dataset lacks column(s) {', '.join(sorted(missing))}", "it needs id, title, text")
        docs = list(source)
    else:
        docs = list(source)
    out, seen = [], set()
    for n, d in enumerate(docs):
        doc_id = str(d["id"])
        if doc_id in seen:
            raise AgentkitError(f"duplicate document id {doc_id!r} (document {n + 1})", "ids must be unique")
        seen.add(doc_id)
        out.append({"id": doc_id, "title": str(d.get("title") or ""), "text": str(d["text"])})
    if not out:
        raise AgentkitError("the corpus is empty")
    return out


class SearchIndex:
    """BM25 and (lazily) dense indexes over one corpus. ``search(queries, k, mode) -> list[list[Hit]]``."""

    def __init__(self, corpus: Any, embedder: str = "minilm-l6", retriever: str | None = None):
        import bm25s

        self.docs = load_corpus(corpus)
        self._bm25 = bm25s.BM25()
        self._bm25.index(
            bm25s.tokenize([self._full(d) for d in self.docs], stopwords="en", show_progress=False), show_progress=False
        )
        self.embedder_name = embedder
        self._faiss = None
        self._encode = None
        if retriever is not None:  # load now: a bad path fails at startup, not on the first query
            from agentkit.models.retriever import Retriever

            self._encode = Retriever.load(retriever).encode

    @staticmethod
    def _full(d: dict[str, str]) -> str:
        return f"{d['title']}. {d['text']}" if d["title"] else d["text"]

    def _dense_ready(self) -> None:
        if self._faiss is not None:
            return
        import faiss

        if self._encode is None:
            from agentkit.models.embedder import embed

            self._encode = lambda texts, kind: embed(texts, self.embedder_name)
        emb = self._encode([self._full(d) for d in self.docs], "passage")
        self._faiss = faiss.IndexFlatIP(emb.shape[1])
        self._faiss.add(emb.astype("float32"))

    def bm25_ranks(self, queries: list[str], k: int) -> list[list[tuple[int, float]]]:
        """(document index, score) of each query's ``k`` best BM25 documents with a score above 0."""
        import bm25s

        k = min(k, len(self.docs))
        tokens = bm25s.tokenize(queries, stopwords="en", return_ids=False, show_progress=False)
        out = []
        for toks in tokens:
            if not toks:  # a query of stop words only matches nothing
                out.append([])
                continue
            idx, scores = self._bm25.retrieve([toks], k=k, show_progress=False, n_threads=1)
            out.append([(int(i), float(s)) for i, s in zip(idx[0], scores[0]) if s > 0])
        return out

    def _dense_ranks(self, queries: list[str], k: int) -> list[list[tuple[int, float]]]:
        self._dense_ready()
        q = self._encode(queries, "query")
        scores, idx = self._faiss.search(q.astype("float32"), min(k, len(self.docs)))
        return [[(int(i), float(s)) for i, s in zip(ri, rs) if i >= 0] for ri, rs in zip(idx, scores)]

    def search(self, queries: list[str], k: int = 3, mode: Mode = "bm25") -> list[list[Hit]]:
        """The best documents for each query.

        Args:
            queries: the queries.
            k: documents per query (fewer when fewer match).
            mode: ``bm25``, ``dense`` or ``hybrid`` (reciprocal-rank fusion of the two).

        Returns:
            Each query's hits, best first.

        Raises:
            ValueError: an unknown mode.
        """
        if mode == "bm25":
            ranked = self.bm25_ranks(queries, k)
        elif mode == "dense":
            ranked = self._dense_ranks(queries, k)
        elif mode == "hybrid":
            depth = max(4 * k, 20)
            ranked = [
                _rrf([a, b], k) for a, b in zip(self.bm25_ranks(queries, depth), self._dense_ranks(queries, depth))
            ]
        else:
            raise ValueError(f"unknown search mode {mode!r} (bm25, dense, hybrid)")
        return [[Hit(self.docs[i]["id"], self.docs[i]["title"], self.docs[i]["text"], s) for i, s in r] for r in ranked]


def _rrf(rankings: list[list[tuple[int, float]]], k: int) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion; ties break by document index, so results are deterministic.

    >>> _rrf([[(3, 9.0), (1, 5.0)], [(1, 0.9), (2, 0.8)]], k=2)
    [(1, 0.03252247488101534), (3, 0.01639344262295082)]
    """
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (i, _) in enumerate(ranking):
            fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank + 1)
    return sorted(fused.items(), key=lambda x: (-x[1], x[0]))[:k]


class SearchTool:
    """Search the corpus and return the top documents (id, title, text) as numbered passages.

    Args:
        corpus: a JSONL path of ``{id, title, text}``, an HF dataset with those columns, or a list of dicts.
        index: a built ``SearchIndex`` to share, in place of ``corpus``.
        top_k: passages per call (a call may ask for 1–20).
        mode: ``bm25``, ``dense`` (embeddings and faiss) or ``hybrid`` (both, fused by reciprocal rank).
        max_chars: each passage's text is cut to this many characters.
        retriever: a directory saved by the revela recipe, the dense encoder (``dense`` / ``hybrid`` only).

    Raises:
        AgentkitError: no corpus, a retriever with ``bm25``, or a bad corpus (duplicate ids, missing columns).
    """

    name = "search"
    description = "Search the document collection and return the most relevant passages with their titles."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 20, "description": "passages"},
        },
        "required": ["query"],
    }

    def __init__(
        self,
        corpus: Any = None,
        *,
        index: SearchIndex | None = None,
        top_k: int = 3,
        mode: Mode = "bm25",
        max_chars: int = 600,
        retriever: str | None = None,
    ):
        if index is None and corpus is None:
            raise AgentkitError("the search tool needs a corpus", "pass a JSONL file of {id, title, text}")
        if retriever is not None and mode == "bm25":
            raise AgentkitError("a trained retriever needs mode 'dense' or 'hybrid'", "BM25 does not use it")
        self.index = index or SearchIndex(corpus, retriever=retriever)
        self.top_k, self.mode, self.max_chars = top_k, mode, max_chars

    def __call__(self, query: str = "", top_k: int | None = None, **extra: Any) -> ToolResult:
        if extra:
            return ToolResult(f"Error: unexpected argument(s) {', '.join(sorted(extra))}; pass 'query'.", ok=False)
        if not isinstance(query, str) or not query.strip():
            return ToolResult("Error: 'query' must be a non-empty string.", ok=False)
        k = top_k if isinstance(top_k, int) and 1 <= top_k <= 20 else self.top_k
        hits = self.index.search([query], k, self.mode)[0]
        if not hits:
            return ToolResult("No results.", meta={"ids": []})
        text = "\n\n".join(f"[{n}] {h.title} ({h.id})\n{h.text[: self.max_chars]}" for n, h in enumerate(hits, 1))
        return ToolResult(text, meta={"ids": [h.id for h in hits], "scores": [h.score for h in hits]})

    def close(self) -> None:
        """Nothing to release: the index is memory only."""
