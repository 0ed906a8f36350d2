"""Pairwise similarity in [0, 1] between sampled texts, computed for all questions at once.

Every backend maps a list of texts (unique texts of the whole run) and per-question index arrays to a batch of
matrices ``W[q] = sim(T_q[i], T_q[j])``, shape ``[Q, N, N]`` (``N`` the most texts of a question; padding is 0,
the diagonal is 1). Each unique text is embedded or tokenised once.

- ``embedding`` (default, offline): cosine of L2-normalised MiniLM-L6 sentence embeddings, clipped at 0. One
  batched matmul per run.
- ``rougeL``: ROUGE-L F1, ``2·LCS(a, b) / (|a| + |b|)``, over the ``rouge_score`` package's tokens (lower-cased
  ASCII letters and digits, words longer than 3 letters Porter-stemmed): LM-Polygraph's lexical similarity
  exactly (checked against it in ``tests/integration/uncertainty/test_polygraph_reference.py``); text with no
  ASCII letters or digits has no tokens, so it is similar to nothing. LCS lengths come from rapidfuzz's C++
  ``cpdist``, one call for every distinct pair of the run.
- ``exact``: 1 when the normalised answers are equal (SQuAD normalisation of ``extract_answer``), else 0.
- ``nli``: ``(p_entail(a→b) + p_entail(b→a)) / 2`` from an NLI cross-encoder (the LM-Polygraph choice, DeBERTa
  MNLI). No NLI model is installable offline; pass its path or hub id with ``nli_model``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from rapidfuzz.distance import LCSseq
from rapidfuzz.process import cpdist

from agentkit.errors import AgentkitError
from agentkit.eval.metrics import extract_answer, normalize_answer
from agentkit.models.embedder import embed

BACKENDS = ("embedding", "rougeL", "exact", "nli")


def similarity_matrices(
    texts: list[str],
    index: np.ndarray,
    backend: str = "embedding",
    *,
    embedder: str = "minilm-l6",
    nli_model: str | None = None,
    batch_size: int = 256,
    progress: bool = False,
) -> np.ndarray:
    """``W`` of shape ``[Q, N, N]`` (float32) for ``index`` ``[Q, N]`` into ``texts`` (-1 marks padding)."""
    if backend == "embedding":
        W = _embedding(texts, index, embedder, batch_size, progress)
    elif backend == "rougeL":
        W = _rouge_l(texts, index)
    elif backend == "exact":
        W = _exact(texts, index)
    elif backend == "nli":
        W = _nli(texts, index, nli_model, batch_size, progress)
    else:
        from agentkit.errors import did_you_mean

        raise AgentkitError(f"unknown similarity {backend!r}", did_you_mean(backend, BACKENDS))
    valid = index >= 0
    W = np.where(valid[:, :, None] & valid[:, None, :], W, 0.0).astype(np.float32)
    diag = np.arange(index.shape[1])
    W[:, diag, diag] = valid.astype(np.float32)
    return W


def embed_texts(
    texts: list[str], embedder: str = "minilm-l6", batch_size: int = 256, progress: bool = False
) -> np.ndarray:
    """L2-normalised sentence embeddings ``[len(texts), D]`` of the embedded MiniLM (or any sentence-transformer)."""
    return embed(texts, embedder, batch_size, progress)


def _embedding(texts, index, embedder, batch_size, progress) -> np.ndarray:
    E = embed_texts(texts, embedder, batch_size, progress)
    X = E[np.maximum(index, 0)]  # [Q, N, D]
    return np.clip(np.matmul(X, X.transpose(0, 2, 1)), 0.0, 1.0)  # batched BLAS: faster than einsum here


@lru_cache(maxsize=1)
def _rouge_tokenizer():
    from rouge_score.tokenizers import DefaultTokenizer

    return DefaultTokenizer(use_stemmer=True)  # rouge_score's RougeScorer(use_stemmer=True), as LM-Polygraph uses


def tokens(text: str) -> list[str]:
    """ROUGE's tokens of ``text`` (``rouge_score``'s tokenizer with its Porter stemmer)."""
    return _rouge_tokenizer().tokenize(text)


def pairwise_rouge_l(toks: list[list[str]], index: np.ndarray, pair_mask: np.ndarray) -> np.ndarray:
    """ROUGE-L F1 ``[Q, N, N]`` for the slot pairs where ``pair_mask`` (``[Q, N, N]``, upper triangle) is set,
    mirrored; every distinct pair of texts goes through one rapidfuzz ``cpdist`` call."""
    q, i, j = np.nonzero(pair_mask)
    a, b = index[q, i], index[q, j]
    n = len(toks)
    codes, inv = np.unique(np.minimum(a, b) * n + np.maximum(a, b), return_inverse=True)  # 1-D: fast
    pairs = np.stack([codes // n, codes % n], 1)
    lcs = cpdist(
        [toks[x] for x in pairs[:, 0]],
        [toks[x] for x in pairs[:, 1]],
        scorer=LCSseq.similarity,
        dtype=np.int32,
        workers=1,
    ).astype(np.float32)
    lens = np.array([len(t) for t in toks], dtype=np.float32)
    denom = lens[pairs[:, 0]] + lens[pairs[:, 1]]
    f1 = np.divide(2 * lcs, denom, out=np.zeros_like(lcs), where=denom > 0)[inv.ravel()]
    W = np.zeros(pair_mask.shape, dtype=np.float32)
    W[q, i, j] = f1
    W[q, j, i] = f1
    return W


def _rouge_l(texts, index) -> np.ndarray:
    valid = index >= 0
    upper = np.triu(np.ones((index.shape[1],) * 2, dtype=bool), 1)
    return pairwise_rouge_l([tokens(t) for t in texts], index, valid[:, :, None] & valid[:, None, :] & upper)


def _exact(texts, index) -> np.ndarray:
    keys: dict[str, int] = {}
    code = np.array([keys.setdefault(normalize_answer(extract_answer(t)), len(keys)) for t in texts] + [-1])
    C = code[index]  # padding (-1) maps to the sentinel
    return (C[:, :, None] == C[:, None, :]).astype(np.float32)


def _nli(texts, index, nli_model, batch_size, progress) -> np.ndarray:
    if not nli_model:
        raise AgentkitError(
            "the nli similarity needs an NLI model",
            "pass --nli-model PATH_OR_HUB_ID (e.g. "
            "microsoft/deberta-large-mnli where the hub is reachable); offline, use embedding",
        )
    from sentence_transformers import CrossEncoder

    enc = CrossEncoder(nli_model, device="cpu")
    labels = {v.lower(): int(k) for k, v in enc.model.config.id2label.items()}
    ent = next((i for name, i in labels.items() if name.startswith("entail")), None)
    if ent is None:
        raise AgentkitError(
            f"{nli_model}: no 'entailment' label in id2label {enc.model.config.id2label}",
            "use an NLI (MNLI-style) cross-encoder",
        )
    pairs = sorted({(int(a), int(b)) for row in index for a in row if a >= 0 for b in row if b >= 0 and a != b})
    probs = enc.predict(
        [(texts[a], texts[b]) for a, b in pairs], batch_size=batch_size, apply_softmax=True, show_progress_bar=progress
    )
    p = {pair: float(pr[ent]) for pair, pr in zip(pairs, np.asarray(probs))}
    Q, N = index.shape
    W = np.zeros((Q, N, N), dtype=np.float32)
    for q in range(Q):
        for i, a in enumerate(index[q]):
            for j, b in enumerate(index[q]):
                if a >= 0 and b >= 0 and a != b:
                    W[q, i, j] = (p[(a, b)] + p[(b, a)]) / 2
                elif a >= 0 and a == b:
                    W[q, i, j] = 1.0
    return W
