"""agentkit.uncertainty.score: scoring end to end with exact similarity, and through
`agentkit uncertainty score` (its report, and a bad row as one error line)."""

import json

import pytest

from agentkit.cli import main
from agentkit.uncertainty.score import ScoreConfig, score


def test_score_end_to_end_exact(gens, tmp_path):
    res = score(gens, ScoreConfig(similarity="exact"), tmp_path / "out", progress=False)
    assert res["questions"] == 6 and res["accuracy"] == pytest.approx(3 / 6)
    assert res["model_accuracy"] == pytest.approx({"m0": 3 / 6, "m1": 5 / 6})  # first samples: no greedy answers
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


def test_cli_score_and_errors(gens, tmp_path, capsys):
    assert main(["uncertainty", "score", str(gens), "--similarity", "exact", "--out", str(tmp_path / "r")]) == 0
    assert "TU" in capsys.readouterr().out and (tmp_path / "r" / "report.md").exists()
    gens.write_text(gens.read_text() + '{"id": "z", "question": "?", "samples": []}\n')
    assert main(["uncertainty", "score", str(gens), "--similarity", "exact"]) == 2
    err = capsys.readouterr().err
    assert "gens.jsonl:7: field 'samples'" in err and "--skip-bad" in err
