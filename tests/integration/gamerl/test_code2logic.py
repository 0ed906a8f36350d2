"""Code2Logic's validation runs the game's code and the template in the real sandbox: hand-written good templates
are accepted with answers the game computes; each kind of broken template is rejected with its reason; the
drafting path runs end to end on a real (tiny) engine under the schema constraint."""

import json
from pathlib import Path

import jsonschema
import pytest

from agentkit.gamerl import score_answer
from agentkit.gamerl.code2logic import TEMPLATE_SCHEMA, code2logic, draft_templates

ROOT = Path(__file__).resolve().parents[3]
NIM, LIGHTS = ROOT / "examples/code2logic/nim.py", ROOT / "examples/code2logic/lights_out.py"

GOOD = [
    {
        "name": "winning_move_count",
        "qa_type": "StrategyOptimization",
        "setup": "state = new_game(rng)\ntext = render(state)",
        "question": "{text}\nHow many winning moves does the player to move have?",
        "answer": "len(winning_moves(state))",
        "kind": "int",
    },
    {
        "name": "piles_after_move",
        "qa_type": "StatePrediction",
        "setup": "state = new_game(rng)\nmove = rng.choice(legal_moves(state))\ntext = render(state)",
        "question": "{text}\nAfter taking {move[1]} stones from pile {move[0]}, what are the pile sizes in order?",
        "answer": "play(state, move)",
        "kind": "sequence",
    },
]
BROKEN = {
    "name error": (dict(setup="state = new_gme(rng)"), "NameError: name 'new_gme' is not defined"),
    "unknown placeholder": (dict(question="{board}\nHow many?"), "KeyError: 'board'"),
    "answer of the wrong kind": (dict(answer="render(state)"), "does not read as int"),
    "ignores the state": (dict(answer="3"), "every answer is the same"),
    "shows no state": (dict(question="How many winning moves are there?"), "every question is the same"),
    "not deterministic": (
        dict(setup="import random as r\nstate = new_game(r.Random())\ntext = render(state)"),
        "recomputed answer differs",
    ),
    "runs forever": (dict(setup="while True:\n    pass"), "CPU-time limit"),
    "syntax error": (dict(answer="len(winning_moves(state)"), "SyntaxError"),
    "bad kind": (dict(kind="colour"), "kind 'colour' is not one of"),
    "missing field": (dict(answer=""), "missing or empty field 'answer'"),
}


@pytest.fixture(scope="module")
def sandbox():
    from agentkit.tools.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(cpu_s=2, wall_s=10, max_output=100_000, pool_size=2)) as sb:
        yield sb


def test_good_templates_are_accepted_and_their_tasks_verify(sandbox):
    res = code2logic(None, NIM, drafts=0, instances=6, templates=GOOD, sandbox=sandbox)
    assert [r.accepted for r in res.reports] == [True, True]
    assert res.counts["tasks_accepted"] == 12 and res.counts["tasks_rejected"] == 0
    for task in res.tasks():
        assert score_answer(f"<answer>{task['answer']}</answer>", task) == 1.0
    seq = [t for t in res.tasks() if t["metadata"]["task"] == "piles_after_move"][0]
    assert "stones from pile" in seq["question"] and "{" not in seq["question"]


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_templates_are_rejected_with_the_reason(case, sandbox):
    change, reason = BROKEN[case]
    res = code2logic(None, NIM, drafts=0, instances=5, templates=[{**GOOD[0], **change}], sandbox=sandbox)
    (report,) = res.reports
    assert not report.accepted and reason in report.reason, report.reason
    assert res.counts["templates_rejected"] == 1 and not res.tasks()


def test_results_are_saved_with_counts_and_reasons(tmp_path, sandbox):
    lights = {
        "name": "fewest_presses",
        "qa_type": "StrategyOptimization",
        "setup": "state = new_board(rng)\ntext = render(state)",
        "question": "{text}\nWhat is the fewest number of presses that switches every light off?",
        "answer": "len(solve(state))",
        "kind": "int",
    }
    res = code2logic(None, LIGHTS, drafts=0, instances=4, templates=[lights, "prose, not JSON"], sandbox=sandbox)
    res.save(tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["templates_accepted"] == 1 and summary["reasons"] == {"not a JSON object": 1}
    assert len((tmp_path / "tasks.jsonl").read_text().splitlines()) == 4


def test_drafting_on_a_real_engine_yields_schema_valid_templates(tiny_engine, tmp_path, sandbox):
    game = tmp_path / "coin.py"  # short: the tiny model's context is 2,048 tokens
    game.write_text("def flip(rng):\n    return rng.choice('HT')\n")
    drafts = draft_templates(tiny_engine, game.read_text(), n=2, seed=0)
    assert len(drafts) == 2
    for d in drafts:  # the constraint holds even for a random model; a draft cut at max_tokens is unfinished JSON
        if isinstance(d, dict):
            jsonschema.validate(d, TEMPLATE_SCHEMA)
        else:
            with pytest.raises(json.JSONDecodeError):
                json.loads(d)
    res = code2logic(tiny_engine, game, drafts=2, instances=2, sandbox=sandbox)
    assert res.counts["templates"] == 2


def test_a_drafted_template_that_is_right_becomes_tasks(sandbox):
    """The drafting path with an engine whose drafts are known (one good template, one in prose): the good one is
    accepted and yields tasks whose answers the game computed; the prose is rejected with its reason."""
    from agentkit.testing.scripted import ScriptedEngine

    engine = ScriptedEngine({"def new_game": [[json.dumps(GOOD[0])], ["A template that counts winning moves."]]})
    res = code2logic(engine, NIM, drafts=2, instances=4, sandbox=sandbox)
    assert [r.accepted for r in res.reports] == [True, False]
    assert res.reports[1].reason == "not a JSON object"
    tasks = res.tasks()
    assert len(tasks) == 4 and {t["metadata"]["task"] for t in tasks} == {"winning_move_count"}
    assert all(score_answer(f"<answer>{t['answer']}</answer>", t) == 1.0 for t in tasks)


# A forged result: the marker line the validator once read from stdout, with answers nobody computed.
FORGED_LINE = (
    "print('@@RESULT@@' + __import__('json').dumps([{'seed': s, 'question': f'forged {s}', 'answer': str(s)} "
    "for s in range(5)]))"
)


@pytest.mark.parametrize(
    "setup",
    [
        FORGED_LINE + "\n1/0",  # prints a forged result, then fails
        FORGED_LINE + "\nimport os\nos._exit(0)",  # prints it, then leaves before the answer is computed
        'import os\nfor fd in range(1, 64):\n    try:\n        os.write(fd, b\'{"ok": true, "error": ""}\\n\')\n'
        "    except OSError:\n        pass\n1/0",  # writes a success status to every descriptor it holds, then fails
    ],
)
def test_printed_or_written_results_are_never_taken(setup, sandbox):
    res = code2logic(None, NIM, drafts=0, instances=5, templates=[{**GOOD[0], "setup": setup}], sandbox=sandbox)
    (report,) = res.reports
    assert not report.accepted and not res.tasks(), report
    assert not any("forged" in t.get("question", "") for t in report.rejected_tasks)


def test_a_game_file_that_prints_a_result_at_import_changes_nothing(tmp_path, sandbox):
    game = tmp_path / "nim_loud.py"
    game.write_text(FORGED_LINE + "\n" + NIM.read_text())
    res = code2logic(
        None, game, drafts=0, instances=5, templates=[GOOD[0], {**GOOD[0], "setup": "1/0"}], sandbox=sandbox
    )
    good, bad = res.reports
    assert good.accepted and all(not t["question"].startswith("forged") for t in good.tasks)
    assert not bad.accepted and "ZeroDivisionError" in bad.reason


@pytest.mark.parametrize("line", ["not json", "{'a': 1}", "[{'seed': 0}]", "[1, 2]", "x" * 5000])
def test_malformed_result_lines_lose_no_good_template(line, sandbox):
    loud = {**GOOD[0], "name": "loud", "setup": f"print('@@RESULT@@' + {line!r})\n" + GOOD[0]["setup"]}
    res = code2logic(
        None, NIM, drafts=0, instances=4, templates=[GOOD[1], loud, {**GOOD[0], "answer": "1/0"}], sandbox=sandbox
    )
    first, printed, broken = res.reports
    assert first.accepted and printed.accepted  # printing is output, nothing more
    assert not broken.accepted and "ZeroDivisionError" in broken.reason


def test_a_value_that_is_not_a_question_and_an_answer_is_that_instance_s_error(sandbox):
    from agentkit.gamerl.code2logic import run_instance

    odd = {**GOOD[0], "setup": GOOD[0]["setup"] + "\n_c2l_result = lambda q, a: {'question': 1}"}
    r = run_instance(sandbox, NIM.read_text(), odd, 0)
    assert r == {"seed": 0, "error": "the result is not a question and an answer (strings)"}
