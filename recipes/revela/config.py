"""Config of the revela recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegInt, PosFloat, PosInt, option

Baseline = Literal["bm25", "minilm", "untrained"]


@dataclass
class RevelaConfig:
    """Revela: train a dense retriever on a corpus with no queries, then evaluate it against BM25 and MiniLM."""

    benchmark: str = option(
        "debian",
        "debian (package summaries → long descriptions), pydoc (stdlib docstring summaries → bodies) or a BEIR folder",
    )
    bench_docs: PosInt = option(1500, "documents of a built-in benchmark")
    bench_queries: PosInt = option(300, "queries of a built-in benchmark")
    bench_seed: int = option(0, "the built-in benchmark's draw")
    corpus: str | None = option(
        None,
        "train on these documents (JSONL, a folder of text/code files, a saved HF dataset, a BEIR folder) instead of the benchmark's corpus; never its queries",
    )
    streaming: bool = option(False, "read corpus lazily (implies interleave batching)")
    retriever: str = option(
        "smollm2-135m", "the model to train: smollm2-135m (EOS pooling, the paper's 0.1B) or minilm-l6 (mean pooling)"
    )
    lm: str = option(
        "smollm2-135m",
        "the language model whose loss trains the retriever (smollm2-135m, gemma3-270m or a causal LM directory)",
    )
    retriever_lora_r: NonNegInt = option(16, "the retriever's LoRA rank (0: full fine-tuning)")
    lm_lora_r: NonNegInt = option(16, "the language model's LoRA rank (0: full fine-tuning)")
    tau: PosFloat = option(1e-4, "Sim's temperature τ (the paper: 1e-4)")
    v_norm: bool = option(True, "V-normalisation of the in-batch attention term")
    dual_loss: bool = option(False, "add the plain LM loss to the in-batch one")
    kv_grad: bool = option(False, "keep the first pass's keys/values in the graph (the official code; off is cheaper)")
    log_plain: bool = option(
        True,
        "compute and log the plain LM loss each step (what in-batch context saves); off, with no dual_loss, the first pass skips chunks Sim does not weight",
    )
    first_half: bool = option(
        True,
        "the retriever scores each chunk's first half (query:) against full chunks (passage:); the in-batch term is off on that half",
    )
    max_words: PosInt = option(120, "chunk size in words (whole sentences)")
    max_tokens: PosInt = option(128, "the language model's truncation in tokens")
    retriever_max_tokens: PosInt = option(128, "the retriever's truncation in tokens")
    batching: Literal["interleave", "bm25"] = option(
        "bm25",
        "interleave (chunks of docs_per_batch documents in turn) or bm25 (a seed chunk and its BM25 neighbours, the official script)",
    )
    docs_per_batch: PosInt = option(4, "interleave batching: documents whose chunks fill a batch")
    batch_size: Annotated[int, at.Ge(2)] = option(16, "chunks per batch (the paper: 16); each attends to the others")
    grad_accum: PosInt = option(1, "batches per optimizer step")
    steps: PosInt = option(40, "optimizer steps per seed")
    lr: PosFloat = option(1e-4, "AdamW's learning rate (after warmup, constant)")
    warmup: NonNegInt = option(4, "steps of linear learning-rate warmup")
    retriever_freeze_steps: NonNegInt = option(
        0,
        "first steps that train the LM only, so it learns to use in-batch context before steering the retriever (0: the paper)",
    )
    seeds: Annotated[list[int], at.MinLen(1)] = option(
        [0, 1, 2], "one trained retriever per seed (LoRA init and batch order)"
    )
    checkpoint_every: PosInt = option(5, "steps between checkpoints; --resume continues from the last")
    baselines: list[Baseline] = option(
        ["bm25", "minilm", "untrained"], "retrievers evaluated once beside the trained ones"
    )
    encode_batch: PosInt = option(32, "texts per encoding batch at evaluation")
