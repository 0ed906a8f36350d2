"""agentkit.uncertainty.similarity: NLI similarity with a local cross-encoder."""

import numpy as np
import pytest

from agentkit.uncertainty.similarity import similarity_matrices


def test_nli_similarity_with_a_local_cross_encoder(tmp_path):
    """The nli backend's plumbing with a small randomly initialised MNLI-shaped classifier (no NLI model is
    installable offline): symmetric, diagonal 1, values in [0, 1]; without a model, a clear error."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from agentkit.errors import AgentkitError
    from agentkit.models.catalog import resolve

    tok = AutoTokenizer.from_pretrained(str(resolve("minilm-l6")))
    cfg = BertConfig(
        vocab_size=tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=3,
        id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"},
        label2id={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2},
    )
    BertForSequenceClassification(cfg).save_pretrained(tmp_path / "nli")
    tok.save_pretrained(tmp_path / "nli")
    texts = ["Paris", "It is Paris.", "Lyon"]
    index = np.array([[0, 1, 2], [2, 0, -1]])
    W = similarity_matrices(texts, index, "nli", nli_model=str(tmp_path / "nli"))
    assert W.shape == (2, 3, 3) and np.allclose(W, W.transpose(0, 2, 1))
    assert np.allclose(W[0].diagonal(), 1) and W[1, 2, 2] == 0 and ((W >= 0) & (W <= 1)).all()
    assert W[0, 0, 2] == pytest.approx(W[1, 1, 0])  # the same pair of texts, wherever it sits
    with pytest.raises(AgentkitError, match="--nli-model"):
        similarity_matrices(texts, index, "nli")
