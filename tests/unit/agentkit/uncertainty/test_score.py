"""agentkit.uncertainty.score: scoring end to end with exact, MiniLM and ROUGE similarities."""

import json

import pytest

from agentkit.uncertainty.score import ScoreConfig, score


def _row(i, ref, other, gold="7", task="t"):
    return {
        "id": f"q{i}",
        "question": f"q{i}?",
        "reference": gold,
        "task": task,
        "metric": "numeric",
        "samples": {"m0": ref, "m1": other},
    }


@pytest.fixture
def gens(tmp_path):
    rows = [
        _row(0, ["7", "7", "7"], ["7", "7"]),
        _row(1, ["3", "3", "3"], ["9", "8"]),  # confident failure
        _row(2, ["5", "7", "2"], ["7", "1"]),
        _row(3, ["7", "7", "6"], ["7", "7"], task="u"),
        _row(4, ["4", "4", "1"], ["7", "7"], task="u"),
        _row(5, ["7", "7", "7"], ["7", "6"], task="u"),
    ]
    p = tmp_path / "gens.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_score_end_to_end_exact(gens, tmp_path):
    res = score(gens, ScoreConfig(similarity="exact"), tmp_path / "out", progress=False)
    assert res["questions"] == 6 and res["accuracy"] == pytest.approx(3 / 6)
    assert set(res["estimators"]) == {"AU", "EU", "TU", "Lexical(ROUGE-L)", "NumSemSets", "EigValLaplacian", "Degree"}
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
