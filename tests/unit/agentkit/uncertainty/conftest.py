"""A small saved-generations file (two models, six questions, two tasks) shared by the schema and score tests."""

import json

import pytest


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
