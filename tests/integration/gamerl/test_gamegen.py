"""Code2Logic's first step in the real sandbox: a game written from its description is accepted only when its code
runs and behaves (deterministic start states, moves that return new states, a solver whose moves are legal and
solve, agreeing with our breadth-first search); each kind of broken game is rejected with its reason; with a
scripted engine that writes a broken draft and a correct one, the pipeline goes from the description to tasks."""

import json

import pytest

from agentkit.gamerl.gamegen import code2logic_from_description, extract_code, validate_game
from agentkit.testing.scripted import ScriptedEngine

SORT = """def new_state(rng):
    row = list(range(1, 5))
    rng.shuffle(row)
    return tuple(row)

def legal_moves(state):
    return list(range(len(state) - 1))

def apply(state, i):
    row = list(state)
    row[i], row[i + 1] = row[i + 1], row[i]
    return tuple(row)

def is_solved(state):
    return list(state) == sorted(state)

def render(state):
    return "Row: " + " ".join(map(str, state))

def solve(state):
    row, moves = list(state), []
    for end in range(len(row) - 1, 0, -1):
        for i in range(end):
            if row[i] > row[i + 1]:
                row[i], row[i + 1] = row[i + 1], row[i]
                moves.append(i)
    return moves
"""

BROKEN = {
    "missing": (SORT.replace("def solve(", "def solve_it("), "missing function(s): solve"),
    "syntax": (SORT.replace("return tuple(row)\n\ndef legal", "return tuple(row\n\ndef legal"), "SyntaxError"),
    "not deterministic": (
        SORT.replace("rng.shuffle(row)", "import random\n    random.shuffle(row)"),
        "new_state is not deterministic",
    ),
    "mutates": (
        SORT.replace("return tuple(row)\n\ndef legal", "return row\n\ndef legal")
        .replace("    row = list(state)\n    row[i]", "    row = state\n    row[i]")
        .replace("return tuple(row)\n\ndef is_solved", "return row\n\ndef is_solved"),
        "apply changes the state it is given",
    ),
    "no-op move": (SORT.replace("row[i], row[i + 1] = row[i + 1], row[i]\n    return", "return"), "leaves the state"),
    "wrong solver": (SORT.replace("moves.append(i)", "moves.append(0)"), "solve's moves do not reach a solved state"),
    "illegal solver move": (SORT.replace("return moves", "return moves + [9]"), "solve plays an illegal move"),
    "same start": (SORT.replace("rng.shuffle(row)", "row.reverse()"), "the same state on every seed"),
    "endless": (SORT.replace("return tuple(row)\n\ndef legal", "while True:\n        pass\n\ndef legal"), "limit"),
}

TEMPLATE = {
    "name": "fewest_swaps",
    "qa_type": "StrategyOptimization",
    "setup": "state = new_state(rng)\ntext = render(state)",
    "question": "{text}\nHow many swaps of neighbours does the shortest way to sort the row take?",
    "answer": "len(solve(state))",
    "kind": "int",
}


@pytest.fixture(scope="module")
def sandbox():
    from agentkit.tools.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(cpu_s=2, wall_s=10, max_output=100_000, pool_size=2)) as sb:
        yield sb


def test_a_correct_game_is_accepted(sandbox):
    r = validate_game(sandbox, SORT)
    assert r.accepted and r.reason == ""
    assert len(r.instances) == 4 and all(i["solver_solves"] for i in r.instances)
    # bubble sort's swaps are the inversions: the breadth-first search finds the same length
    assert all(i["bfs_length"] == i["solver_length"] for i in r.instances)
    assert all(i["render"].startswith("Row: ") for i in r.instances)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_broken_game_is_rejected_with_its_reason(sandbox, case):
    source, reason = BROKEN[case]
    r = validate_game(sandbox, source)
    assert not r.accepted and reason in r.reason, r.reason


def test_printed_findings_cannot_stand_in_for_the_harness(sandbox):
    forged = 'print(\'{"missing": [], "instances": []}\')\nimport sys\nsys.exit(0)\n'
    r = validate_game(sandbox, forged + SORT)
    assert not r.accepted  # the harness never ran: no findings came back over the result channel


def test_from_description_to_tasks_with_a_scripted_engine(tmp_path, sandbox):
    broken = "```python\n" + BROKEN["wrong solver"][0] + "```"
    good = "Here is the game.\n```python\n" + SORT + "```"
    engine = ScriptedEngine(
        {"Write its Python code": [[broken], [good]], "Write one new template for this game": [json.dumps(TEMPLATE)]}
    )
    desc = "A row of the numbers 1 to 4 in random order; a move swaps two neighbours; sort it ascending."
    summary = code2logic_from_description(engine, desc, "row_sort", tmp_path, games=2, templates=2, sandbox=sandbox)
    assert (summary["games"], summary["games_accepted"]) == (2, 1)
    assert summary["game_reasons"] == {"solve's moves do not reach a solved state": 1}
    assert summary["templates_accepted"] == 2 and summary["tasks_accepted"] == 16
    assert (tmp_path / "row_sort.py").read_text().strip() == SORT.strip()
    tasks = [json.loads(x) for x in (tmp_path / "tasks.jsonl").read_text().splitlines()]
    assert tasks and all(t["metadata"]["game"] == "row_sort" for t in tasks)
    games = [json.loads(x) for x in (tmp_path / "games.jsonl").read_text().splitlines()]
    assert [g["accepted"] for g in games] == [False, True]
    assert json.loads((tmp_path / "summary.json").read_text())["games_accepted"] == 1


def test_extract_code_takes_the_fenced_block():
    assert extract_code("x\n```py\na = 1\n```\ny") == "a = 1"
    assert extract_code("a = 2") == "a = 2"
