"""Revela's data: loading (JSONL, BEIR, saved dataset, folder, streaming), whole-sentence chunks, batching, collation."""

import json

import pytest
import torch

from agentkit.errors import AgentkitError
from agentkit.revela.data import (
    Collator,
    bm25_batches,
    chunk_documents,
    chunk_text,
    interleaved_batches,
    load_documents,
    split_sentences,
)


def test_chunks_are_whole_sentences_within_the_word_limit():
    text = "Alpha beta gamma. Delta epsilon! Zeta eta theta iota? Kappa lambda mu nu xi omicron pi rho sigma tau."
    chunks = chunk_text(text, max_words=6)
    assert chunks == ["Alpha beta gamma. Delta epsilon!", "Zeta eta theta iota?", "Kappa lambda mu nu xi omicron",
                      "pi rho sigma tau."]  # fmt: skip
    # only the 10-word sentence, longer than a chunk, was split; every other chunk ends a sentence
    assert all(len(c.split()) <= 6 for c in chunks)
    assert split_sentences("Version 2.0 is out. It works.") == ["Version 2.0 is out.", "It works."]


def test_code_splits_at_lines():
    code = "def f(x):\n    y = x + 1\n    return y\n\n\nclass A:\n    pass"
    assert split_sentences(code) == ["def f(x):", "    y = x + 1", "    return y", "class A:", "    pass"]


def test_load_documents_from_every_source(tmp_path):
    from datasets import Dataset

    jl = tmp_path / "docs.jsonl"
    jl.write_text(
        json.dumps({"id": "a", "title": "T", "text": "One. Two."}) + "\n" + json.dumps({"text": "Three."}) + "\n"
    )
    ds = load_documents(jl)
    assert ds["id"] == ["a", "2"] and ds["text"] == ["T. One. Two.", "Three."]
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "", "text": "Four."}) + "\n")
    assert load_documents(beir)["id"] == ["d1"]
    folder = tmp_path / "src"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "m.py").write_text("def f():\n    return 1\n")
    (folder / "notes.md").write_text("Read me.")
    (folder / "image.png").write_bytes(b"\x89PNG")
    assert sorted(load_documents(folder)["id"]) == ["notes.md", "pkg/m.py"]
    saved = tmp_path / "saved"
    Dataset.from_dict({"text": ["Five.", "Six."]}).save_to_disk(str(saved))
    assert load_documents(saved)["id"] == ["0", "1"]
    streamed = load_documents(jl, streaming=True)
    assert type(streamed).__name__ == "IterableDataset"
    assert [r["doc_id"] for r in chunk_documents(streamed, 50, min_words=1)] == ["a", "2"]


def test_bad_documents_are_one_clear_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": 3}\n')
    with pytest.raises(AgentkitError, match=r"bad.jsonl:2: field 'text'"):
        load_documents(bad)
    bad.write_text('{"text": "ok"}\n{oops\n')
    with pytest.raises(AgentkitError, match=r"bad.jsonl:2: not valid JSON"):
        load_documents(bad)
    with pytest.raises(AgentkitError, match="no such file"):
        load_documents(tmp_path / "missing")


def test_chunk_documents_keeps_document_ids_and_order(tmp_path):
    from datasets import Dataset

    docs = Dataset.from_dict({"id": ["x", "y"], "text": ["A b c. D e f. G h i.", "J k l m."]})
    ch = chunk_documents(docs, max_words=3, min_words=1)
    assert list(zip(ch["doc_id"], ch["chunk"], ch["text"])) == [
        ("x", 0, "A b c."), ("x", 1, "D e f."), ("x", 2, "G h i."), ("y", 0, "J k l"), ("y", 1, "m."),
    ]  # fmt: skip


def test_interleaving_mixes_documents_in_the_papers_order():
    rows = [{"doc_id": d, "chunk": c} for d, n in [("a", 3), ("b", 2), ("c", 2), ("d", 1)] for c in range(n)]
    batches = [[r["doc_id"] + str(r["chunk"]) for r in b] for b in interleaved_batches(rows, 4, docs_per_batch=2)]
    assert batches == [["a0", "b0", "a1", "b1"], ["a2", "c0", "d0", "c1"]]


def test_bm25_batches_group_related_chunks():
    topics = ["kernel scheduler threads", "python list comprehension", "debian package archive", "tea brewing leaves"]
    texts = [f"{t} note {i}" for i in range(4) for t in topics]
    batches = list(bm25_batches(texts, 4, seed=0))
    assert all(len(b) == len(set(b)) == 4 for b in batches)
    first = [texts[i].split(" note")[0] for i in batches[0]]
    assert len(set(first)) == 1  # a seed's BM25 neighbours share its topic
    assert batches == list(bm25_batches(texts, 4, seed=0))  # seeded: resume rebuilds the same batches


def test_collator_halves_and_masks_consistently():
    from agentkit.models.tiny import build_tiny_tokenizer

    tok = build_tiny_tokenizer()

    class FakeRetriever:  # records what it is asked to tokenize; the shapes are what matter here
        seen = []

        def tokenize(self, texts, kind):
            self.seen.append((kind, texts))
            return {"input_ids": torch.zeros(len(texts), 1, dtype=torch.long)}

    r = FakeRetriever()
    batch = Collator(r, tok, max_tokens=10, first_half=True)(["abcdefghijklmnop", "xyz"])
    assert batch["lm_input_ids"].shape == (2, 10)
    assert batch["lm_attention_mask"].tolist() == [[1] * 10, [1, 1, 1] + [0] * 7]
    assert batch["inbatch_mask"].tolist() == [[False] * 5 + [True] * 5, [False] + [True] * 9]
    assert r.seen == [("passage", ["abcdefghij", "xyz"]), ("query", ["abcde", "x"])]
    bos = Collator(r, tok, max_tokens=10, first_half=True, bos=True)(["abcdefghijklmnop"])
    assert bos["lm_input_ids"][0, 0].item() == tok.bos_token_id and bos["lm_input_ids"].shape == (1, 10)
    assert r.seen[-2:] == [("passage", ["abcdefghi"]), ("query", ["abcd"])]  # BOS is never shown to the retriever
