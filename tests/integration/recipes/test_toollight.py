"""The toollight and toollight_analyze recipes on the tiny model: stages, resume, given pairs, user questions."""

import json

import pytest
import torch

from agentkit.files import read_records


def test_toollight_recipe_tiny_and_resume(tmp_path):
    """The whole loop on the tiny model: base, SFT, a pre-aligned and a self-evolved round, each evaluated, each
    stage's model saved; a resumed run recomputes nothing and reports the same figures."""
    import datasets

    from agentkit.runner import run_recipe

    metrics, run_dir = run_recipe("toollight", [], output_dir=str(tmp_path / "run"), preset="tiny", quiet=True)
    for stage in ("base", "sft", "dpo-1", "dpo-2"):  # each figure is its stage's recorded answers, averaged
        rows = read_records(run_dir / "state" / f"eval_{stage}.jsonl").values()
        for suite in ("arithmetic", "multihop"):
            correct = [r["correct"] for r in rows if r["suite"] == suite]
            assert correct and metrics[f"{stage}/{suite}/accuracy"] == pytest.approx(sum(correct) / len(correct))
    for stage in ("sft", "dpo-1", "dpo-2"):
        assert (run_dir / "models" / stage / "config.json").exists()
    for stage in ("dpo-1", "dpo-2"):
        samples = datasets.load_from_disk(str(run_dir / "rounds" / stage / "samples"))
        assert len(samples) > 0 and {"prompt_ids", "completion_ids", "mask"} <= set(samples.column_names)
        summary = json.loads((run_dir / "rounds" / stage / "summary.json").read_text())
        if summary["pairs"]:
            pairs = datasets.load_from_disk(str(run_dir / "rounds" / stage / "pairs"))
            assert {"prompt", "chosen", "rejected"} <= set(pairs.column_names)
    sources = json.loads((run_dir / "rounds" / "sources.json").read_text())
    assert len(sources["no_tool_correct_rate"]) == 3 + 1 + 2  # every pool question was mined
    logged = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("dpo-1/pairs" in m for m in logged)
    report = (run_dir / "report.md").read_text()
    assert "| dpo-2 | multihop |" in report
    # each DPO stage against SFT, question by question, from the same records
    sft, dpo2 = (read_records(run_dir / "state" / f"eval_{s}.jsonl") for s in ("sft", "dpo-2"))
    gained = sum(dpo2[q]["correct"] > r["correct"] for q, r in sft.items() if r["suite"] == "multihop")
    assert [m["dpo-2/multihop/vs_sft/gained"] for m in logged if "dpo-2/multihop/vs_sft/gained" in m] == [gained]
    assert "| dpo-2 | multihop | " in report.split("question by question")[1]
    again, _ = run_recipe("toollight", [], output_dir=str(run_dir), preset="tiny", resume=True, quiet=True)
    # resumed from the recorded stages and evaluations: the same figures (NaN: efficiency without calls)
    assert again.keys() == metrics.keys()
    assert all(again[k] == metrics[k] or (again[k] != again[k] and metrics[k] != metrics[k]) for k in metrics)


def test_toollight_recipe_trains_on_given_pairs(tmp_path):
    """Users' TRL-style pairs replace the first round's sampling; the round trains and saves a changed model."""
    import datasets
    from safetensors.torch import load_file

    from agentkit.runner import run_recipe
    from agentkit.testing.pairs import write_text_pairs

    write_text_pairs(tmp_path / "pairs.jsonl")
    _, run_dir = run_recipe(
        "toollight",
        [f"pairs={tmp_path / 'pairs.jsonl'}", "self_evolved_rounds=0", "dpo.learning_rate=1e-3"],
        output_dir=str(tmp_path / "run"),
        preset="tiny",
        quiet=True,
    )
    pairs = datasets.load_from_disk(str(run_dir / "rounds" / "dpo-1" / "pairs"))
    assert pairs.num_rows == 4 and 0 in pairs[0]["chosen_mask"]  # the <result> span is masked
    history = [json.loads(x) for x in (run_dir / "state" / "stages.jsonl").read_text().splitlines()]
    dpo = next(h["value"]["history"] for h in history if h["key"] == "dpo-1")
    assert any("loss" in h for h in dpo)
    before, after = (load_file(str(run_dir / "models" / s / "model.safetensors")) for s in ("sft", "dpo-1"))
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_toollight_recipe_on_user_questions(tmp_path):
    """Questions and a corpus from files: 20 % held out, no SFT without sft_data, both tools offered."""
    from agentkit.data import MultiHopKB
    from agentkit.data.tasks import write_jsonl
    from agentkit.runner import run_recipe

    kb = MultiHopKB.build(0)
    write_jsonl(tmp_path / "q.jsonl", [t.to_dict() for t in kb.questions(10, seed=3)])
    kb.write_corpus(tmp_path / "corpus.jsonl")
    metrics, run_dir = run_recipe(
        "toollight",
        [f"questions={tmp_path / 'q.jsonl'}", f"corpus={tmp_path / 'corpus.jsonl'}", "self_evolved_rounds=0"],
        output_dir=str(tmp_path / "run"),
        preset="tiny",
        quiet=True,
    )
    assert {k.split("/")[0] for k in metrics} == {"base", "dpo-1"}  # no SFT stage
    assert {k.split("/")[1] for k in metrics} == {"questions"}
    assert len(json.loads((run_dir / "rounds" / "sources.json").read_text())["no_tool_correct_rate"]) == 8
    assert len((run_dir / "state" / "eval_base.jsonl").read_text().splitlines()) == 2


def test_toollight_analyze_recipe_tiny(tmp_path):
    from agentkit.errors import AgentkitError
    from agentkit.runner import run_recipe

    metrics, run_dir = run_recipe("toollight_analyze", [], output_dir=str(tmp_path / "a"), preset="tiny", quiet=True)
    assert metrics["arithmetic/trajectories"] == metrics["multihop/trajectories"] == 6  # 3 tasks x 2 samples
    assert (run_dir / "entropy.png").exists() and (run_dir / "trajectories").is_dir()
    with pytest.raises(AgentkitError, match="suites"):
        run_recipe("toollight_analyze", ["suites=[mathh]"], output_dir=str(tmp_path / "b"), preset="tiny", quiet=True)
