"""agentkit.uncertainty.schema: bad rows name file, line and field; Parquet and dataset round trips."""

import json

import pytest

from agentkit.uncertainty.schema import BadRow, Skipped, iter_generations, write_generations
from agentkit.uncertainty.score import ScoreConfig, score


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
