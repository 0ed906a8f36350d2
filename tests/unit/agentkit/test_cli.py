"""agentkit.cli in process: `uncertainty score` writes its report, and a bad row is one error line."""

import json

import pytest

from agentkit.cli import main


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


def test_cli_score_and_errors(gens, tmp_path, capsys):
    assert main(["uncertainty", "score", str(gens), "--similarity", "exact", "--out", str(tmp_path / "r")]) == 0
    assert "TU" in capsys.readouterr().out and (tmp_path / "r" / "report.md").exists()
    gens.write_text(gens.read_text() + '{"id": "z", "question": "?", "samples": []}\n')
    assert main(["uncertainty", "score", str(gens), "--similarity", "exact"]) == 2
    err = capsys.readouterr().err
    assert "gens.jsonl:7: field 'samples'" in err and "--skip-bad" in err
