"""The ace recipe on the tiny model: every method runs and is reported; a run interrupted in the middle of its
offline adaptation resumes after the last finished step, and its playbook's log replays byte for byte."""

import json

import pytest

from agentkit.ace.adapt import Adapter
from agentkit.ace.store import PlaybookStore
from agentkit.errors import AgentkitError
from agentkit.runner import run_recipe

SMALL = ["train_questions=4", "val_questions=2", "test_questions=4", "batch_size=2", "window=2"]


def test_ace_recipe_tiny_interrupted_and_resumed(tmp_path, monkeypatch):
    real = Adapter.step
    steps = []

    def step(self, tasks, i, crash=[True]):  # noqa: B006 - one crash per test
        if self.store.path.name.startswith("ace_offline") and i == 1 and crash[0]:
            crash[0] = False
            raise KeyboardInterrupt
        steps.append((self.store.path.name, i))
        return real(self, tasks, i)

    monkeypatch.setattr(Adapter, "step", step)
    out = tmp_path / "run"
    fixed = tmp_path / "fixed.txt"  # eval-only: a hand-written playbook in the paper's text format
    fixed.write_text("## FORMULAS & CALCULATIONS\n[calc-00001] helpful=0 harmful=0 :: A mile is 1.609344 km.\n")
    sets = [*SMALL, "methods=[base,dc,ace_offline,ace_online,eval]", f"playbook={fixed}"]
    with pytest.raises(KeyboardInterrupt):
        run_recipe("ace", sets, output_dir=str(out), preset="tiny", quiet=True)
    assert steps == [("ace_offline-s0.json", 0)]
    steps.clear()
    metrics, run_dir = run_recipe("ace", sets, output_dir=str(out), preset="tiny", resume=True, quiet=True)
    assert steps[0] == ("ace_offline-s0.json", 1) and ("ace_offline-s0.json", 0) not in steps
    assert [s for s in steps if s[0].startswith("ace_online")]  # then the online run, windows of two
    test_ids = sorted(json.loads(x)["id"] for x in (run_dir / "answers" / "base-s0.jsonl").read_text().splitlines())
    for method in ("base", "dc", "ace_offline", "ace_online", "eval"):  # one seed: the mean is that run's
        _accuracies_are_the_answers_means(run_dir / "answers" / f"{method}-s0.jsonl", metrics, method, test_ids)
    runs = {
        json.loads(x)["key"]: json.loads(x)["value"]
        for x in (run_dir / "state" / "runs.jsonl").read_text().splitlines()
    }
    # the generator is an agent with the python tool here: a call per model turn, at least one per question
    assert runs["base-s0"]["calls"] >= 4 and runs["dc-s0"]["calls"] > 0 and runs["ace_offline-s0"]["calls"] > 0
    assert runs["eval-s0"]["bullets"] == 1 and runs["eval-s0"]["context_tokens"] > 0 and "eval-s1" not in runs
    for name in ("ace_offline-s0.json", "ace_online-s0.json"):
        PlaybookStore(run_dir / "playbooks" / name).verify()
    report = (run_dir / "report.md").read_text()
    assert "| ace_offline | 1 |" in report and "| dc | 1 |" in report and "context.png" in report


def _accuracies_are_the_answers_means(path, metrics, method, test_ids=None):
    """The recorded answers are every test question's, each verdict is what the feedback says of that answer, and
    the accuracies are their means."""
    from agentkit.eval.metrics import value_match

    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert rows and (test_ids is None or sorted(r["id"] for r in rows) == test_ids)
    assert all(r["value_correct"] == value_match(r["answer"], r["gold"]) for r in rows)
    judged = [r["correct"] for r in rows if r["correct"] is not None]
    assert metrics[f"{method}/accuracy_mean"] == pytest.approx(sum(judged) / len(judged))
    assert metrics[f"{method}/value_accuracy_mean"] == pytest.approx(sum(r["value_correct"] for r in rows) / len(rows))


def test_ace_bad_config_fails_before_loading(tmp_path):
    with pytest.raises(AgentkitError, match="methods"):
        run_recipe("ace", ["methods=[ace]"], output_dir=str(tmp_path / "a"), preset="tiny", quiet=True)
    with pytest.raises(AgentkitError, match="dedup_threshold"):
        run_recipe("ace", ["refine.dedup_threshold=1.5"], output_dir=str(tmp_path / "b"), preset="tiny", quiet=True)
    with pytest.raises(AgentkitError, match="methods: 'eval' and playbook go together"):
        run_recipe("ace", ["methods=[eval]"], output_dir=str(tmp_path / "c"), preset="tiny", quiet=True)
    bad = tmp_path / "bad.txt"
    bad.write_text("## OTHERS\n[x-00001] helpful=0 harmful=0 :: fine\nnot a bullet\n")
    with pytest.raises(AgentkitError, match=r"bad.txt:3: not a section header or a bullet"):
        run_recipe("ace", ["methods=[eval]", f"playbook={bad}"], output_dir=str(tmp_path / "d"), preset="tiny")


def test_ace_recipe_against_a_model_behind_an_openai_compatible_endpoint(tmp_path, tiny_engine):
    """The same recipe with every role answered by another server (agentkit serve as the stand-in for a larger
    model): chats, JSON schemas as structured_outputs and token counts all go over HTTP (the JSON generator:
    ``tool=false``)."""
    from agentkit.server import create_app
    from agentkit.testing.servers import serve_in_thread

    with serve_in_thread(create_app(tiny_engine, "tiny-remote", api_key="k")) as url:
        sets = [
            *SMALL,
            "methods=[base,ace_offline]",
            "tool=false",
            "engine.kind=openai",
            f"engine.base_url={url}/v1",
            "engine.model=tiny-remote",
            "engine.api_key=k",
        ]
        metrics, run_dir = run_recipe("ace", sets, output_dir=str(tmp_path / "remote"), preset="tiny", quiet=True)
        # the generator as an agent over HTTP: token-id prompts through /v1/completions, python here
        agent = [s for s in sets if not s.startswith(("methods=", "tool="))] + ["methods=[base]"]
        _, agent_dir = run_recipe("ace", agent, output_dir=str(tmp_path / "agent"), preset="tiny", quiet=True)
    base = json.loads((agent_dir / "state" / "runs.jsonl").read_text().splitlines()[0])["value"]
    assert base["calls"] >= 4 and base["tokens"] > 0
    runs = {
        json.loads(x)["key"]: json.loads(x)["value"]
        for x in (run_dir / "state" / "runs.jsonl").read_text().splitlines()
    }
    assert runs["base-s0"]["calls"] == 4 and runs["ace_offline-s0"]["calls"] >= 4 * 3  # generate, reflect, curate
    assert runs["ace_offline-s0"]["tokens"] > 0
    _accuracies_are_the_answers_means(run_dir / "answers" / "ace_offline-s0.jsonl", metrics, "ace_offline")
    PlaybookStore(run_dir / "playbooks" / "ace_offline-s0.json").verify()


def test_ace_label_free_adapts_on_agreement_and_is_scored_by_the_checker(tmp_path, monkeypatch):
    """labels=false: the adapter's judge is self-consistency (fresh answers counted as the generator's cost), the
    test is still scored against the references."""
    from agentkit.ace.adapt import SelfConsistency

    judged = []
    real = SelfConsistency.judge
    monkeypatch.setattr(
        SelfConsistency, "judge", lambda self, samples: (judged.append(len(samples)), real(self, samples))
    )
    sets = ["methods=[ace_offline]", "labels=false", "consistency_samples=2"]
    metrics, run_dir = run_recipe("ace", sets, output_dir=str(tmp_path / "run"), preset="tiny", quiet=True)
    assert judged and judged[0] == 4  # the first batch of 4 questions
    rows = [json.loads(x) for x in (run_dir / "answers" / "ace_offline-s0.jsonl").read_text().splitlines()]
    from agentkit.data.suites import suite_tasks
    from agentkit.eval.metrics import score_task

    metric = {t.id: t.metric for t in suite_tasks("units", 8, seed=0)}  # the tiny preset's test questions
    assert sorted(r["id"] for r in rows) == sorted(metric)
    for r in rows:  # every test verdict is the checker's: the answer scored against the reference
        checked = bool(r["answer"]) and score_task(metric[r["id"]], r["answer"], r["gold"])["correct"] == 1.0
        assert r["correct"] == checked
    _accuracies_are_the_answers_means(run_dir / "answers" / "ace_offline-s0.jsonl", metrics, "ace_offline")
