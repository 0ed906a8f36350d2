"""Revela's data with ``datasets``: documents → whole-sentence chunks → batches that mix related and unrelated chunks.

Sources (``load_documents``): a JSONL file (``{"id", "title"?, "text"}`` per line), a BEIR folder (its
``corpus.jsonl``: queries and qrels are never read for training), a folder saved by ``Dataset.save_to_disk``, or any
other folder of text/code files (one document per file). ``streaming=True`` reads JSONL and folders lazily
(``IterableDataset``), for corpora larger than memory.

Chunks (``chunk_text``): sentences packed greedily up to ``max_words`` words; a sentence is split only when it alone
is longer than that. Code and lists split at line breaks. The paper uses ≤ 120 words.

Batches:
- ``interleave`` (the paper's §4.1): the chunks of ``docs_per_batch`` documents in the order d11, d21, …, d12,
  d22, …, cut into batches of B, so every chunk has neighbours from its own document and from others;
- ``bm25`` (the official training script's ``--bm25_retrieval_file``): a seed chunk and its B − 1 nearest chunks
  by BM25, shuffled, so a batch holds lexically related chunks of different documents.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

from agentkit.errors import AgentkitError

TEXT_SUFFIXES = {".txt", ".md", ".rst", ".py", ".js", ".ts", ".java", ".c", ".h", ".cc", ".cpp", ".go", ".rs",
                 ".rb", ".sh", ".tex", ".html", ".css", ".sql", ".yaml", ".yml", ".toml", ".json"}  # fmt: skip
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[`]?[A-Z0-9])|\n{2,}|\n(?=\s*[-*•]\s|\s*\d+[.)]\s)")


def _jsonl_docs(path: Path) -> Iterator[dict[str, str]]:
    from agentkit.data.tasks import iter_jsonl

    for n, row in enumerate(iter_jsonl(path), 1):
        text = row.get("text")
        if not isinstance(text, str):
            raise AgentkitError(f"{path}:{n}: field 'text' is missing or not a string", "each line needs text")
        title = row.get("title") or ""
        yield {"id": str(row.get("id", row.get("_id", n))), "text": f"{title}. {text}" if title else text}


def _folder_docs(folder: Path) -> Iterator[dict[str, str]]:
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES and not any(s.startswith(".") for s in p.parts):
            text = p.read_text(encoding="utf-8", errors="replace")
            if text.strip():
                yield {"id": str(p.relative_to(folder)), "text": text}


def load_documents(source: str | Path, streaming: bool = False):
    """Documents as a ``datasets.Dataset`` (or ``IterableDataset`` when streaming) with columns ``id``, ``text``."""
    from datasets import Dataset, IterableDataset, load_from_disk

    path = Path(source)
    if path.is_dir() and (path / "corpus.jsonl").exists():  # BEIR: the corpus only
        path = path / "corpus.jsonl"
    if path.is_file():
        if path.suffix not in (".jsonl", ".json"):
            raise AgentkitError(f"{path}: expected a .jsonl file of documents", "or pass a folder of text files")
        gen, kwargs = _jsonl_docs, {"path": path}
    elif path.is_dir() and (path / "dataset_info.json").exists():
        ds = load_from_disk(str(path))
        missing = {"text"} - set(ds.column_names)
        if missing:
            raise AgentkitError(f"{path}: the dataset has no 'text' column", f"its columns: {ds.column_names}")
        if "id" not in ds.column_names:
            ds = ds.add_column("id", [str(i) for i in range(len(ds))])
        ds = ds.select_columns(["id", "text"])
        return ds.to_iterable_dataset() if streaming else ds
    elif path.is_dir():
        gen, kwargs = _folder_docs, {"folder": path}
    else:
        raise AgentkitError(
            f"{source}: no such file or folder", "pass a JSONL file, a BEIR folder or a folder of files"
        )
    if streaming:
        return IterableDataset.from_generator(gen, gen_kwargs=kwargs)
    rows = list(gen(**kwargs))
    if not rows:
        raise AgentkitError(f"{source}: no documents found", "JSONL lines with 'text', or .txt/.md/.py/… files")
    return Dataset.from_list(rows)


def split_sentences(text: str) -> list[str]:
    """Sentences (and list items, paragraphs, lines of code) of a text.

    >>> split_sentences("Tools exist. They help!\\n\\n- one\\n- two")
    ['Tools exist.', 'They help!', '- one', '- two']
    """
    parts = []
    for block in _SENTENCE_END.split(text):
        block = block.strip()
        if not block:
            continue
        if "\n" in block and _looks_like_code(block):
            parts += [ln.rstrip() for ln in block.split("\n") if ln.strip()]
        else:
            parts.append(" ".join(block.split()) if "\n" in block and not _looks_like_code(block) else block)
    return parts


def _looks_like_code(block: str) -> bool:
    lines = block.split("\n")
    return (
        sum(ln.startswith(("    ", "\t")) or ln.rstrip().endswith((":", "{", "}", ";")) for ln in lines)
        >= len(lines) / 2
    )


def chunk_text(text: str, max_words: int = 120) -> list[str]:
    """Whole sentences packed greedily into chunks of at most ``max_words`` words.

    >>> chunk_text("One two three. Four five. Six seven eight nine.", max_words=5)
    ['One two three. Four five.', 'Six seven eight nine.']
    """
    chunks, cur, n = [], [], 0
    for sent in split_sentences(text):
        words = sent.split()
        while len(words) > max_words:  # one sentence longer than a chunk: the only place a sentence breaks
            if cur:
                chunks.append(" ".join(cur))
                cur, n = [], 0
            chunks.append(" ".join(words[:max_words]))
            words = words[max_words:]
        if n + len(words) > max_words and cur:
            chunks.append(" ".join(cur))
            cur, n = [], 0
        cur.append(" ".join(words) if "\n" not in sent else sent)
        n += len(words)
    if cur:
        chunks.append(" ".join(cur))
    return chunks


def chunk_documents(docs, max_words: int = 120, min_words: int = 8):
    """``datasets`` map: documents (``id``, ``text``) → chunks (``doc_id``, ``chunk``, ``text``); works streaming."""

    def split(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {"doc_id": [], "chunk": [], "text": []}
        for doc_id, text in zip(batch["id"], batch["text"]):
            pieces = [c for c in chunk_text(text, max_words) if len(c.split()) >= min_words]
            out["doc_id"] += [doc_id] * len(pieces)
            out["chunk"] += list(range(len(pieces)))
            out["text"] += pieces
        return out

    return docs.map(split, batched=True, remove_columns=["id", "text"])


def interleaved_batches(
    chunks: Iterable[dict[str, Any]], batch_size: int, docs_per_batch: int = 4
) -> Iterator[list[dict[str, Any]]]:
    """Chunks (grouped by document, in order) laid out d11, d21, …, d12, d22, … over windows of ``docs_per_batch``
    documents and cut into batches of ``batch_size``; a partial batch carries into the next window.

    >>> rows = [{"doc_id": d, "chunk": c} for d in "ab" for c in range(2)]
    >>> [[r["doc_id"] + str(r["chunk"]) for r in b] for b in interleaved_batches(rows, 4, 2)]
    [['a0', 'b0', 'a1', 'b1']]
    """
    window: list[list[dict[str, Any]]] = []
    pending: list[dict[str, Any]] = []

    def flush() -> Iterator[list[dict[str, Any]]]:
        nonlocal pending
        depth = max(map(len, window))
        pending += [doc[k] for k in range(depth) for doc in window if k < len(doc)]
        window.clear()
        while len(pending) >= batch_size:
            yield pending[:batch_size]
            pending = pending[batch_size:]

    for row in chunks:
        if window and window[-1][0]["doc_id"] == row["doc_id"]:
            window[-1].append(row)
            continue
        if len(window) == docs_per_batch:
            yield from flush()
        window.append([row])
    if window:
        yield from flush()


def bm25_batches(texts: list[str], batch_size: int, seed: int = 0) -> Iterator[list[int]]:
    """Indices of batches: each a seed chunk and its ``batch_size - 1`` BM25 neighbours, shuffled; seeds run over
    the chunks in a seeded random order, and a chunk already in a batch is not a seed again."""
    from agentkit.tools.search import SearchIndex

    index = SearchIndex([{"id": str(i), "text": t} for i, t in enumerate(texts)])
    rng = random.Random(seed)
    order = list(range(len(texts)))
    rng.shuffle(order)
    used: set[int] = set()
    k = min(batch_size, len(texts))
    for s in order:
        if s in used:
            continue
        found = [i for i, _ in index.bm25_ranks([texts[s]], k)[0] if i != s]
        rest = [i for i in rng.sample(range(len(texts)), k) if i != s and i not in found]  # top up when BM25 is thin
        batch = ([s] + found + rest)[:k]
        used.update(batch)
        rng.shuffle(batch)
        yield batch


class Collator:
    """Chunks → the tensors ``RevelaModel`` takes.

    lm_input_ids / lm_attention_mask [B, L]: the chunk for the LM (no prefix, ≤ ``max_tokens``, right-padded).
    ret_passage: ``passage: `` + the chunk as the LM sees it (truncated) for the retriever. ret_query (``first_half``):
    ``query: `` + the first half of the LM's tokens of the chunk, and ``inbatch_mask`` [B, L] False on that half,
    so the second half is predicted with documents chosen from the first (the paper's Wikipedia setting).
    bos: start every chunk with the LM's BOS token (Gemma needs it: its loss is nats worse without).
    """

    def __init__(self, retriever, lm_tokenizer, max_tokens: int = 160, first_half: bool = True, bos: bool = False):
        self.retriever, self.tok, self.max_tokens, self.first_half = retriever, lm_tokenizer, max_tokens, first_half
        self.prefix = [lm_tokenizer.bos_token_id] if bos else []

    def __call__(self, texts: list[str]) -> dict[str, Any]:
        ids = [(self.prefix + x)[: self.max_tokens] for x in self.tok(texts, add_special_tokens=False)["input_ids"]]
        width = max(map(len, ids))
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id
        seen = self.tok.batch_decode(ids, skip_special_tokens=True)  # the retriever scores what the LM sees
        batch: dict[str, Any] = {
            "lm_input_ids": torch.tensor([x + [pad] * (width - len(x)) for x in ids]),
            "lm_attention_mask": torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids]),
            "ret_passage": self.retriever.tokenize(seen, "passage"),
            "ret_query": None,
        }
        if self.first_half:  # halves in the LM's tokens, so the in-batch term always covers the second half
            half = [max(1, len(x) // 2) for x in ids]
            firsts = self.tok.batch_decode([x[:h] for x, h in zip(ids, half)], skip_special_tokens=True)
            batch["ret_query"] = self.retriever.tokenize(firsts, "query")
            batch["inbatch_mask"] = torch.arange(width)[None, :] >= torch.tensor(half)[:, None]
        return batch
