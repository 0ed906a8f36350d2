"""agentkit.uncertainty.estimators: cross-model terms and LM-Polygraph-style baselines against hand-computed values."""

import numpy as np
import pytest

from agentkit.uncertainty import estimators as est
from agentkit.uncertainty.similarity import similarity_matrices


def _stats(ref, others, backend="exact"):
    texts = list(dict.fromkeys(ref + [t for o in others for t in o]))
    slots = [texts.index(t) for t in ref] + [texts.index(t) for o in others for t in o]
    member = [0] * len(ref) + [k + 1 for k, o in enumerate(others) for _ in o]
    index, member = np.array([slots]), np.array([member])
    sim = similarity_matrices(texts, index, backend)
    return {"sim": sim, "member": member, "lexical": similarity_matrices(texts, index, "rougeL")}


def test_cross_model_terms_by_hand():
    s = _stats(["a", "a", "b"], [["a", "c"]])
    # intra pairs (a,a)=1 (a,b)=0 (a,b)=0 -> 1/3; inter: a-a twice of 6 pairs -> 1/3
    comp = est.CrossModelUncertainty().components(s)
    assert comp["AU"][0] == pytest.approx(2 / 3) and comp["EU"][0] == pytest.approx(0)
    assert comp["TU"][0] == pytest.approx(2 / 3)
    # confidently wrong: the reference always says "x", the other model says "y": AU 0, EU 1
    s = _stats(["x", "x", "x"], [["y", "y"]])
    assert est.AU()(s)[0] == pytest.approx(0) and est.EU()(s)[0] == pytest.approx(1)
    assert est.TU()(s)[0] == pytest.approx(1)
    # negative EU stays unless clipped; TU = 1 - S_inter either way without clipping
    s = _stats(["a", "b"], [["a"], ["b"]])
    assert est.EU()(s)[0] == pytest.approx(-0.5) and est.EU(clip_eu=True)(s)[0] == 0


def test_inter_pooled_vs_member_average():
    s = _stats(["a", "a"], [["a", "a", "a"], ["b"]])
    assert est.s_inter(s, "pooled")[0] == pytest.approx(6 / 8)  # 6 of 8 cross pairs agree
    assert est.s_inter(s, "member")[0] == pytest.approx(0.5)  # member 1 agrees fully, member 2 not at all


def test_polygraph_baselines_by_hand():
    s = _stats(["a", "a", "b"], [["a"]])
    assert est.NumSemSets(1.0)(s)[0] == 2
    assert est.Degree()(s)[0] == pytest.approx(1 - 5 / 9)
    assert est.EigValLaplacian()(s)[0] == pytest.approx(2.0)  # eigenvalues 0, 1, 0
    assert est.LexicalSimilarity()(s)[0] == pytest.approx(2 / 3)


def test_padding_does_not_leak_between_questions():
    """Questions with different sample counts, scored together, give what each gives alone."""
    qs = [(["a", "b", "a", "c"], [["a"], ["b", "b", "d"]]), (["x", "x"], [["y", "x"]]), (["p", "q", "r"], [["p"]])]
    alone = [{n: e(_stats(r, o, "rougeL")) for n, e in est.all_estimators(sets_threshold=0.5).items()} for r, o in qs]
    texts = list(dict.fromkeys(t for r, o in qs for t in r + [x for m in o for x in m]))
    width = max(len(r) + sum(map(len, o)) for r, o in qs)
    index, member = np.full((3, width), -1), np.full((3, width), -1)
    for q, (r, o) in enumerate(qs):
        flat = r + [x for m in o for x in m]
        index[q, : len(flat)] = [texts.index(t) for t in flat]
        member[q, : len(flat)] = [0] * len(r) + [k + 1 for k, m in enumerate(o) for _ in m]
    sim = similarity_matrices(texts, index, "rougeL")
    together = {
        n: e({"sim": sim, "member": member, "lexical": sim}) for n, e in est.all_estimators(sets_threshold=0.5).items()
    }
    for q in range(3):
        for name in together:
            assert together[name][q] == pytest.approx(alone[q][name][0], abs=1e-6), (q, name)
