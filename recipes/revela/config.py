"""Config of the revela recipe."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegInt, PosFloat, PosInt

Baseline = Literal["bm25", "minilm", "untrained"]


@dataclass
class RevelaConfig:
    """Revela: train a dense retriever on a corpus with no queries, then evaluate it against BM25 and MiniLM.

    benchmark: debian (package summaries → long descriptions), pydoc (stdlib docstring summaries → bodies) or a
    BEIR folder; bench_docs / bench_queries / bench_seed size and draw the built-in ones. corpus: train on these
    documents (JSONL, a folder of text/code files, a saved HF dataset, a BEIR folder) instead of the benchmark's
    corpus; never its queries. streaming: read ``corpus`` lazily (implies interleave batching).
    retriever: the model to train (smollm2-135m: EOS pooling, the paper's 0.1B; minilm-l6: mean pooling) and lm:
    the language model whose loss trains it (smollm2-135m, gemma3-270m, or any causal LM directory);
    retriever_lora_r / lm_lora_r: LoRA ranks (0 = full fine-tuning). tau: Sim's temperature (the paper: 1e-4).
    v_norm: V-normalisation of the in-batch term. dual_loss: add the plain LM loss. kv_grad: keep the first
    pass's K/V in the graph (the official code; off = cheaper). log_plain: compute and log the plain LM loss each
    step (what the in-batch context saves, plotted); off (and no dual_loss), the first pass runs only on the
    chunks Sim weights and skips the LM head, which is cheaper the more peaked Sim is. first_half: the retriever
    scores the first half of each chunk (``query: ``) against full chunks (``passage: ``) and the in-batch term is
    off on that half.
    max_words: chunk size in words (whole sentences); max_tokens / retriever_max_tokens: truncation for the LM /
    the retriever. batching: interleave (d11, d21, …, d12, … over docs_per_batch documents) or bm25 (a seed chunk
    and its BM25 neighbours, the official script). batch_size: chunks per batch (the paper: 16); grad_accum:
    batches per optimizer step. steps: optimizer steps per seed; lr, warmup: AdamW with linear warmup then
    constant. retriever_freeze_steps: the first steps train the LM only (the retriever's learning rate is 0), so
    the LM learns to use in-batch context before its loss steers the retriever (not in the paper; 0 = the paper).
    seeds: one trained retriever per seed (LoRA init and batch order). checkpoint_every: steps between
    checkpoints (resume continues from the last one). baselines: evaluated once. encode_batch: texts per encoding
    batch at evaluation.
    """

    benchmark: str = "debian"
    bench_docs: PosInt = 1500
    bench_queries: PosInt = 300
    bench_seed: int = 0
    corpus: str | None = None
    streaming: bool = False
    retriever: str = "smollm2-135m"
    lm: str = "smollm2-135m"
    retriever_lora_r: NonNegInt = 16
    lm_lora_r: NonNegInt = 16
    tau: PosFloat = 1e-4
    v_norm: bool = True
    dual_loss: bool = False
    kv_grad: bool = False
    log_plain: bool = True
    first_half: bool = True
    max_words: PosInt = 120
    max_tokens: PosInt = 128
    retriever_max_tokens: PosInt = 128
    batching: Literal["interleave", "bm25"] = "bm25"
    docs_per_batch: PosInt = 4
    batch_size: Annotated[int, at.Ge(2)] = 16
    grad_accum: PosInt = 1
    steps: PosInt = 40
    lr: PosFloat = 1e-4
    warmup: NonNegInt = 4
    retriever_freeze_steps: NonNegInt = 0
    seeds: Annotated[list[int], at.MinLen(1)] = field(default_factory=lambda: [0, 1, 2])
    checkpoint_every: PosInt = 5
    baselines: list[Baseline] = field(default_factory=lambda: ["bm25", "minilm", "untrained"])
    encode_batch: PosInt = 32
