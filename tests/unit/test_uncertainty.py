"""Black-box uncertainty: estimators against hand-computed values, metrics, the saved-generation schema and its
errors, scoring end to end (exact / ROUGE-L / MiniLM similarity), generation with resume, and the CLI."""

import json

import numpy as np
import pytest

from agentkit.cli import main
from agentkit.uncertainty import estimators as est
from agentkit.uncertainty.metrics import aurac, ece, prr, rejection_curve
from agentkit.uncertainty.schema import BadRow, GenerationRow, Skipped, iter_generations, write_generations
from agentkit.uncertainty.score import ScoreConfig, score
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


def test_rejection_metrics():
    c = np.array([1, 0, 1, 0, 1])
    oracle = -c.astype(float)
    assert prr(c, oracle) == pytest.approx(1) and prr(c, np.zeros(5)) == pytest.approx(0)
    assert prr(c, c.astype(float)) < 0  # rejecting correct answers first is worse than random
    assert rejection_curve(c, np.zeros(5)) == pytest.approx([0.6] * 5)  # ties: the random curve exactly
    assert aurac(c, oracle) == pytest.approx(np.mean([0.6, 0.75, 1, 1, 1]))
    assert ece(np.array([1, 0]), np.array([1.0, 0.0])) == 0
    assert ece(np.array([1, 1]), np.array([0.5, 0.5])) == pytest.approx(0.5)


def _row(i, ref, other, gold="7", task="t"):
    return {"id": f"q{i}", "question": f"q{i}?", "reference": gold, "task": task, "metric": "numeric",
            "samples": {"m0": ref, "m1": other}}


@pytest.fixture
def gens(tmp_path):
    rows = [_row(0, ["7", "7", "7"], ["7", "7"]), _row(1, ["3", "3", "3"], ["9", "8"]),  # confident failure
            _row(2, ["5", "7", "2"], ["7", "1"]), _row(3, ["7", "7", "6"], ["7", "7"], task="u"),
            _row(4, ["4", "4", "1"], ["7", "7"], task="u"), _row(5, ["7", "7", "7"], ["7", "6"], task="u")]
    p = tmp_path / "gens.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_score_end_to_end_exact(gens, tmp_path):
    res = score(gens, ScoreConfig(similarity="exact"), tmp_path / "out", progress=False)
    assert res["questions"] == 6 and res["accuracy"] == pytest.approx(3 / 6)
    assert set(res["estimators"]) == {"AU", "EU", "TU", "Lexical(ROUGE-L)", "NumSemSets", "EigValLaplacian",
                                      "Degree"}
    assert res["estimators"]["TU"]["auroc"] == pytest.approx(1.0)  # TU ranks all three errors first here
    assert res["estimators"]["TU"]["auroc"] > res["estimators"]["AU"]["auroc"]
    cf = res["confident_failures"]
    assert cf["confident_failures"] == 1 and cf["confident_failures_flagged_by_eu"] == 1
    assert set(res["per_task_auroc"]) == {"t", "u"}
    for f in ("report.md", "metrics.json", "scores.jsonl", "abstention.png", "reliability.png"):
        assert (tmp_path / "out" / f).stat().st_size > 0
    scores = [json.loads(x) for x in (tmp_path / "out" / "scores.jsonl").read_text().splitlines()]
    assert scores[1]["id"] == "q1" and scores[1]["AU"] == 0 and scores[1]["EU"] == 1


def test_score_with_minilm_and_rouge(gens, tmp_path):
    emb = score(gens, ScoreConfig(similarity="embedding"), progress=False)
    rl = score(gens, ScoreConfig(similarity="rougeL", reference_model="m1"), progress=False)
    assert emb["estimators"]["TU"]["auroc"] > 0.5 and rl["reference_model"] == "m1"


def test_bad_rows_name_file_line_and_field(tmp_path, gens):
    lines = gens.read_text().splitlines()
    lines.insert(2, "{not json")
    lines.insert(4, json.dumps({"id": "x", "question": "?", "reference": "1", "samples": {"m0": ["1", "1"]}}))
    lines.insert(5, json.dumps({"id": "y", "question": "?", "reference": "1", "samples": {"m0": ["1"], "m1": ["1"]}}))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(BadRow, match=r"bad.jsonl:3: field '<line>': not valid JSON"):
        score(bad, ScoreConfig(similarity="exact"), progress=False)
    res = score(bad, ScoreConfig(similarity="exact", skip_bad=True), progress=False)
    assert res["questions"] == 6 and res["skipped"]["count"] == 3
    reasons = " ".join(res["skipped"]["reasons"])
    assert "samples.m1: this model is missing" in reasons and "needs at least 2" in reasons
    skipped = Skipped()
    assert len(list(iter_generations(bad, skip_bad=True, skipped=skipped))) == 8 and skipped.count == 1


def test_parquet_and_dataset_round_trip(tmp_path, gens):
    rows = [r for _, r in iter_generations(gens)]
    for name in ("g.parquet", "g_ds"):
        write_generations(tmp_path / name, rows)
        back = [r for _, r in iter_generations(tmp_path / name)]
        assert [r.to_dict() for r in back] == [r.to_dict() for r in rows]


def test_cli_score_and_errors(gens, tmp_path, capsys):
    assert main(["uncertainty", "score", str(gens), "--similarity", "exact", "--out", str(tmp_path / "r")]) == 0
    assert "TU" in capsys.readouterr().out and (tmp_path / "r" / "report.md").exists()
    gens.write_text(gens.read_text() + '{"id": "z", "question": "?", "samples": []}\n')
    assert main(["uncertainty", "score", str(gens), "--similarity", "exact"]) == 2
    err = capsys.readouterr().err
    assert "gens.jsonl:7: field 'samples'" in err and "--skip-bad" in err


def test_generate_resumes_from_partial(tmp_path):
    from agentkit.uncertainty.generate import generate, load_tasks

    tasks = load_tasks("arithmetic-easy:3")
    out = tmp_path / "g.jsonl"
    part = tmp_path / "g.jsonl.partial"
    part.mkdir()
    # as if an earlier run finished the first question before it was killed (the cut line is redone)
    (part / "tiny-random.jsonl").write_text(json.dumps({"key": tasks[0].id, "value": {"samples": ["KEPT", "KEPT"],
                                                        "greedy": "KEPT"}}) + "\n" + '{"key": "cut')
    generate(["tiny-random"], tasks, out, samples=2, max_tokens=4, progress=False)
    rows = [r for _, r in iter_generations(out)]
    assert [r.id for r in rows] == [t.id for t in tasks]
    assert rows[0].samples["tiny-random"] == ["KEPT", "KEPT"] and rows[0].greedy["tiny-random"] == "KEPT"
    assert all(len(r.samples["tiny-random"]) == 2 and r.reference for r in rows[1:])


def test_load_tasks_errors(tmp_path):
    from agentkit.errors import AgentkitError
    from agentkit.uncertainty.generate import load_tasks

    with pytest.raises(AgentkitError, match="did you mean 'multihop-open'"):
        load_tasks("multihop-opn:3")
    with pytest.raises(AgentkitError, match="repeats"):
        load_tasks("arithmetic:2,arithmetic:2")
    assert len(load_tasks("multihop-open:2")) == 2 and GenerationRow  # noqa: B015


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
    together = {n: e({"sim": sim, "member": member, "lexical": sim})
                for n, e in est.all_estimators(sets_threshold=0.5).items()}
    for q in range(3):
        for name in together:
            assert together[name][q] == pytest.approx(alone[q][name][0], abs=1e-6), (q, name)


def test_generate_mixes_local_and_remote_engines(tmp_path, tiny_engine, monkeypatch):
    """The same model served over the OpenAI API on loopback and run in-process gives the same samples."""
    from agentkit.server import create_app
    from agentkit.testing.servers import serve_in_thread
    from agentkit.uncertainty.generate import generate, load_tasks

    monkeypatch.setenv("OPENAI_API_KEY", "sk-gen")
    tasks = load_tasks("arithmetic-easy:2")
    with serve_in_thread(create_app(tiny_engine, "tiny", api_key="sk-gen")) as url:
        generate(["tiny-random", f"openai:tiny@{url}/v1"], tasks, tmp_path / "g.jsonl", samples=3, max_tokens=5,
                 progress=False)
    rows = [r for _, r in iter_generations(tmp_path / "g.jsonl")]
    assert all(set(r.samples) == {"tiny-random", "tiny"} for r in rows)
    assert [r.samples["tiny"] for r in rows] == [r.samples["tiny-random"] for r in rows]
    assert [r.greedy["tiny"] for r in rows] == [r.greedy["tiny-random"] for r in rows]


def test_nli_similarity_with_a_local_cross_encoder(tmp_path):
    """The nli backend's plumbing with a small randomly initialised MNLI-shaped classifier (no NLI model is
    installable offline): symmetric, diagonal 1, values in [0, 1]; without a model, a clear error."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from agentkit.errors import AgentkitError
    from agentkit.models.catalog import resolve

    tok = AutoTokenizer.from_pretrained(str(resolve("minilm-l6")))
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, num_labels=3,
                     id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"},
                     label2id={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2})
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
