"""Sentence embeddings: the embedded all-MiniLM-L6-v2 (or any sentence-transformer), loaded once per process.

Dense search, the uncertainty similarity and ACE's de-duplication and retrieval all embed through here, so a
process that does several of them loads the model once.
"""

from __future__ import annotations

import functools

import numpy as np

from agentkit.models.catalog import resolve

DEFAULT_EMBEDDER = "minilm-l6"


@functools.lru_cache(maxsize=4)
def sentence_model(name: str = DEFAULT_EMBEDDER):
    """The ``SentenceTransformer`` of a catalog name, directory or hub id, on CPU (cached)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(resolve(name)), device="cpu")


def embed(texts: list[str], name: str = DEFAULT_EMBEDDER, batch_size: int = 256, progress: bool = False) -> np.ndarray:
    """L2-normalised embeddings ``[len(texts), D]`` (float32); cosine similarity is their dot product."""
    if not texts:
        return np.zeros((0, sentence_model(name).get_sentence_embedding_dimension()), np.float32)
    return (
        sentence_model(name)
        .encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=progress
        )
        .astype(np.float32)
    )
