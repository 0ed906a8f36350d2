"""Our black-box baselines against LM-Polygraph 0.7.0's own estimator code, on real samples: 40 questions with 5
samples each from SmolLM2-135M and Gemma-3-270M (``data/gens-40.jsonl``, made with ``agentkit uncertainty
generate``, see its ``README``).

- Lexical similarity: ours is 1 + LM-Polygraph's (it returns −mean ROUGE-L; the same ranking).
- Eigenvalue Laplacian and degree: LM-Polygraph takes its similarity from an NLI model
  (``semantic_matrix_entail``, DeBERTa-MNLI from the hub, not installable here). Fed our similarity matrices in
  its place, it gives our scores; with its own Jaccard similarity (no model needed) our estimators give its scores.
- Number of semantic sets: LM-Polygraph links two samples when entailment beats contradiction both ways; ours when
  the similarity reaches a threshold. With ``entail = W`` and ``contra`` just below the threshold the two are the
  same graph.
"""

from pathlib import Path

import numpy as np
import pytest

from agentkit.uncertainty import estimators as est
from agentkit.uncertainty.score import ScoreConfig, compute_scores, prepare
from agentkit.uncertainty.similarity import similarity_matrices

from .polygraph import load

GENS = Path(__file__).parent / "data" / "gens-40.jsonl"
TOL = 1e-5  # float32 similarities against LM-Polygraph's float64 arithmetic


@pytest.fixture(scope="module")
def lp():
    return load()


def _ref_blocks(p, W):
    """Per question, the reference model's samples and their similarity block ``[k, k]``."""
    texts, blocks = [], []
    for q in range(len(p.rows)):
        slots = np.flatnonzero(p.member[q] == 0)
        texts.append([p.texts[p.index[q, s]] for s in slots])
        blocks.append(W[q][np.ix_(slots, slots)].astype(np.float64))
    return texts, np.stack(blocks)


@pytest.mark.parametrize("similarity", ["rougeL", "embedding"])
def test_baselines_equal_lm_polygraphs_on_the_same_samples(lp, similarity):
    cfg = ScoreConfig(similarity=similarity, reference_model="smollm2-135m")
    p = prepare(GENS, cfg)
    ours, _ = compute_scores(p, cfg)
    W = similarity_matrices(p.texts, p.index, similarity)
    texts, blocks = _ref_blocks(p, W)
    assert len(texts) == 40 and all(len(t) == 5 for t in texts)
    stats = {"sample_texts": texts, "semantic_matrix_entail": blocks}
    lexical = lp["lexical_similarity"].LexicalSimilarity()(stats)
    np.testing.assert_allclose(ours["Lexical(ROUGE-L)"], 1 + lexical, atol=TOL)
    np.testing.assert_allclose(ours["EigValLaplacian"], lp["eig_val_laplacian"].EigValLaplacian()(stats), atol=TOL)
    np.testing.assert_allclose(ours["Degree"], lp["deg_mat"].DegMat()(stats), atol=TOL)
    # Ours links at W >= 0.9 (our default threshold here; >= so that exact similarity links equal answers at 1.0),
    # theirs at entail > contra: contra just below float32(0.9) makes the same graph (a ROUGE-L of exactly 0.9
    # occurs in these samples).
    contra = float(np.float32(0.9)) - 1e-9
    sets = lp["num_sem_sets"].NumSemSets()({**stats, "semantic_matrix_contra": np.full_like(blocks, contra)})
    np.testing.assert_array_equal(ours["NumSemSets"], sets)
    assert len(set(np.round(ours["EigValLaplacian"], 6))) > 10  # the samples differ enough to test something


def test_our_estimators_on_lm_polygraphs_jaccard_similarity(lp):
    """LM-Polygraph's model-free path end to end (its Jaccard similarity, its estimators) against our estimators
    given that similarity."""
    p = prepare(GENS, ScoreConfig(reference_model="smollm2-135m"))
    texts = [[p.texts[p.index[q, s]] for s in np.flatnonzero(p.member[q] == 0)] for q in range(len(p.rows))]
    jaccard = np.stack([lp["common"].compute_sim_score(t, "entail", "Jaccard_score") for t in texts])
    stats = {"sim": jaccard, "member": np.zeros(jaccard.shape[:2], dtype=int)}
    theirs = {"sample_texts": texts}
    eig = lp["eig_val_laplacian"].EigValLaplacian(similarity_score="Jaccard_score")(theirs)
    deg = lp["deg_mat"].DegMat(similarity_score="Jaccard_score")(theirs)
    np.testing.assert_allclose(est.EigValLaplacian()(stats), eig, atol=TOL)
    np.testing.assert_allclose(est.Degree()(stats), deg, atol=TOL)


def test_rouge_l_tokens_are_rouge_scores(lp):
    """Our ROUGE-L similarity is rouge_score's ROUGE-L with LM-Polygraph's settings (stemmed), text by text."""
    from rouge_score import rouge_scorer

    pairs = [
        ("The cats are running", "the cat ran"),
        ("42.", "It is 42"),
        ("Paris, France", "paris"),
        ("naïve café", "naive cafe"),  # non-ASCII letters are dropped by rouge_score's tokenizer
        ("", "anything"),
        ("1996", "1999"),
    ]
    texts = [t for pair in pairs for t in pair]
    index = np.arange(len(texts)).reshape(-1, 2)
    W = similarity_matrices(texts, index, "rougeL")
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    want = [scorer.score(a, b)["rougeL"].fmeasure for a, b in pairs]
    np.testing.assert_allclose(W[:, 0, 1], want, atol=1e-6)
    assert want[0] == pytest.approx(2 * 2 / (4 + 3))  # stemmed, "the cat" is common; unstemmed only "the" would be
