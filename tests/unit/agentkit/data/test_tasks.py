"""agentkit.data.tasks: task files in JSONL, Parquet and saved datasets."""

import pytest

from agentkit.data import arithmetic_suite
from agentkit.errors import AgentkitError


def test_task_files_jsonl_parquet_and_dataset(tmp_path):
    import datasets

    from agentkit.data.tasks import load_task_file, write_jsonl

    tasks = arithmetic_suite(3, seed=1) + arithmetic_suite(2, seed=1, kinds=("add", "sub", "small_mul"))
    assert len({t.id for t in tasks}) == 5  # easy kinds get their own ids
    rows = [t.to_dict() for t in tasks]
    write_jsonl(tmp_path / "q.jsonl", rows)
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "q"))
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "q.parquet"))
    for src in ("q.jsonl", "q", "q.parquet"):
        assert load_task_file(tmp_path / src) == tasks
    write_jsonl(tmp_path / "bad.jsonl", [rows[0], {"id": "x", "question": "?"}])
    with pytest.raises(AgentkitError, match=r"bad.jsonl:line 2: missing field\(s\) answer"):
        load_task_file(tmp_path / "bad.jsonl")
    write_jsonl(tmp_path / "bad.jsonl", [{**rows[0], "metric": "bleu"}])
    with pytest.raises(AgentkitError, match="field 'metric'"):
        load_task_file(tmp_path / "bad.jsonl")
