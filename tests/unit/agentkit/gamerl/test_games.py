"""Every built-in game: seeded and reproducible, gold answers verify, wrong ones do not, states survive JSON,
legal moves step, renderings draw; each solver checked against hand-computed cases or the rules themselves."""

import io
import json
import random

import pytest

from agentkit.gamerl import GAMES, HELD_OUT, create_dataset, get_game, score_answer, verify
from agentkit.gamerl.games.base import CATEGORIES, LEVELS

NAMES = GAMES.names()


def test_twelve_games_in_four_categories_and_a_fixed_held_out_split():
    assert len(NAMES) >= 12
    assert {get_game(n).category for n in NAMES} == set(CATEGORIES)
    assert set(HELD_OUT) < set(NAMES) and len(HELD_OUT) >= 3


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("level", LEVELS)
def test_entries_are_reproducible_and_their_gold_answers_verify(name, level):
    ds = create_dataset(name, size=12, seed=5, level=level, format="mixed")
    entries = list(ds)
    assert entries == list(create_dataset(name, size=12, seed=5, level=level, format="mixed"))
    assert entries != list(create_dataset(name, size=12, seed=6, level=level, format="mixed"))
    for e in entries:
        m = e["metadata"]
        assert m["qa_level"] == level and m["game"] == name and m["analysis"]
        assert score_answer(f"<answer>{e['answer']}</answer>", e) == 1.0, (m["task"], e["answer"])
        back = json.loads(json.dumps(e))  # what an export or a saved run holds
        assert score_answer(f"\\boxed{{{e['answer']}}}", back) == 1.0
        if m["verify"]["kind"] == "choice":
            wrong = [lab for lab in "ABCDEFGH"[: len(m["options"])] if lab != e["answer"]]
            if not m["verify"].get("check"):  # a checker may accept several options
                assert all(score_answer(w, e) == 0.0 for w in wrong)


@pytest.mark.parametrize("name", NAMES)
def test_every_task_kind_appears_and_distractors_are_wrong(name):
    game = get_game(name)
    ds = create_dataset(name, size=60, seed=1, level="Medium", format="fill")
    seen = {e["metadata"]["task"] for e in ds}
    assert seen == {t.name for t in game.templates}
    for template in game.templates:
        rng = random.Random(3)
        state = game.generate(rng, "Easy")
        task = template.make(game, state, rng, "Easy")
        e = {"question": "", "answer": task.answer, "metadata": {"game": name, "state": state, "verify": task.verify}}
        assert all(verify(f"<answer>{d}</answer>", e).score == 0.0 for d in task.distractors), template.name
        assert len(set(task.distractors)) == len(task.distractors)


@pytest.mark.parametrize("name", NAMES)
def test_moves_step_and_the_png_draws(name):
    game = get_game(name)
    state = game.generate(random.Random(0), "Easy")
    frozen = json.dumps(state, sort_keys=True)
    for move in game.moves(state)[:6]:
        game.step(state, move)  # what each move does: test_a_move_changes_the_state_as_the_rules_say
    assert json.dumps(state, sort_keys=True) == frozen  # step never mutates
    img = game.draw(state)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    assert img.width > 50 and img.height > 50 and buf.getvalue()[:4] == b"\x89PNG"
    assert game.text(state)


WALLS5 = [[r, c] for r in range(5) for c in range(5) if r in (0, 4) or c in (0, 4)]
# (game, state, move, the state after it by the game's rules, worked out by hand); a move of None: illegal below
STEPS = [
    (
        "g2048",
        {"board": [[2, 2, 0, 0], [0, 0, 0, 0], [4, 0, 4, 4], [0, 0, 0, 2]]},
        "L",
        {"board": [[4, 0, 0, 0], [0, 0, 0, 0], [8, 4, 0, 0], [2, 0, 0, 0]]},
    ),  # one merge per tile, leftmost first
    ("g2048", {"board": [[2, 0], [2, 4]]}, "U", {"board": [[4, 4], [0, 0]]}),
    (
        "langton",
        {"grid": ["...", "...", "..."], "ant": [1, 1], "heading": "U", "steps": 1},
        "step",
        {"grid": ["...", ".#.", "..."], "ant": [1, 2], "heading": "R", "steps": 1},
    ),  # white: right, flip, forward
    (
        "langton",
        {"grid": ["#..", "...", "..."], "ant": [0, 0], "heading": "U", "steps": 1},
        "step",
        {"grid": ["...", "...", "..."], "ant": [0, 2], "heading": "L", "steps": 1},
    ),  # black: left; the board wraps
    ("life", {"grid": ["...", "OOO", "..."], "steps": 1}, "tick", {"grid": [".O.", ".O.", ".O."], "steps": 1}),
    (
        "maze",
        {"grid": ["#####", "#S..#", "#...#", "#..G#", "#####"]},
        "R",
        {"grid": ["#####", "#S..#", "#...#", "#..G#", "#####"], "player": [1, 2]},
    ),
    (
        "minesweeper",
        {"size": 3, "mines": [[0, 0]], "opened": [[2, 2]]},
        (1, 1),
        {"size": 3, "mines": [[0, 0]], "opened": [[1, 1], [2, 2]]},
    ),
    (
        "sokoban",
        {"walls": WALLS5, "boxes": [[1, 2]], "goals": [[1, 3]], "player": [1, 1]},
        "R",
        {"walls": WALLS5, "boxes": [[1, 3]], "goals": [[1, 3]], "player": [1, 2]},
    ),  # the box is pushed along
    (
        "sudoku",
        {"grid": [[0, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]], "box": [2, 2]},
        (0, 0, 1),
        {"grid": [[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]], "box": [2, 2]},
    ),
    (
        "tents",
        {"size": 3, "trees": [[1, 1]], "rows": [1, 0, 0], "cols": [0, 1, 0], "tents": []},
        (0, 1),
        {"size": 3, "trees": [[1, 1]], "rows": [1, 0, 0], "cols": [0, 1, 0], "tents": [[0, 1]]},
    ),
    (
        "tetris",
        {"grid": ["....", "....", "....", "###."], "piece": "I", "rotation": 0, "col": 0},
        (1, 3),
        {"grid": ["....", "...#", "...#", "...#"], "piece": "I", "rotation": 0, "col": 0},
    ),  # the full row clears
    ("tictactoe", {"board": "X........"}, (1, 1), {"board": "X...O...."}),  # O moves after one X
    (
        "wordsearch",
        {"grid": ["CAT", "XXX", "DOG"], "words": ["CAT", "DOG"]},
        "CAT",
        {"grid": ["CAT", "XXX", "DOG"], "words": ["DOG"]},
    ),
    ("blocks3d", {"heights": [[0, 1], [2, 0]]}, ("add", 0, 0), {"heights": [[1, 1], [2, 0]]}),
]
ILLEGAL = [
    ("maze", {"grid": ["#####", "#S..#", "#...#", "#..G#", "#####"]}, "U"),  # into a wall
    ("sokoban", {"walls": WALLS5, "boxes": [[1, 3]], "goals": [[1, 3]], "player": [1, 2]}, "R"),  # box to a wall
    ("sudoku", {"grid": [[0, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]], "box": [2, 2]}, (0, 0, 2)),
    ("tictactoe", {"board": "X........"}, (0, 0)),  # taken
    ("tetris", {"grid": ["....", "....", "....", "###."], "piece": "I", "rotation": 0, "col": 0}, (0, 1)),
    ("blocks3d", {"heights": [[0, 1], [2, 0]]}, ("remove", 1, 1)),  # nothing to remove
    ("wordsearch", {"grid": ["CAT", "XXX", "DOG"], "words": ["CAT", "DOG"]}, "COW"),
]


@pytest.mark.parametrize(("name", "state", "move", "after"), STEPS, ids=[f"{c[0]}-{i}" for i, c in enumerate(STEPS)])
def test_a_move_changes_the_state_as_the_rules_say(name, state, move, after):
    assert get_game(name).step(state, move) == after


@pytest.mark.parametrize(("name", "state", "move"), ILLEGAL, ids=[c[0] for c in ILLEGAL])
def test_an_illegal_move_is_refused(name, state, move):
    with pytest.raises(ValueError):
        get_game(name).step(state, move)


def test_every_game_has_a_hand_checked_move():
    assert {c[0] for c in STEPS} == set(NAMES)


# ---- solvers -------------------------------------------------------------------------------------------------------
def test_maze_checker_accepts_any_shortest_path_and_nothing_else():
    maze = get_game("maze")
    state = {"grid": ["#####", "#S..#", "#...#", "#..G#", "#####"]}
    e = {"metadata": {"state": state}}
    assert maze.solve(state) and len(maze.solve(state)) == 4
    for path in (("R", "R", "D", "D"), ("D", "D", "R", "R"), ("D", "R", "D", "R")):
        assert maze.check(e, path)
    assert not maze.check(e, ("R", "R", "D"))  # short of the goal
    assert not maze.check(e, ("R", "D", "R", "D", "L", "R"))  # reaches it, not shortest
    assert not maze.check(e, ("U", "R", "R", "D", "D"))  # into a wall


def test_sokoban_solution_is_optimal_and_solves():
    game = get_game("sokoban")
    state = {
        "size": 5, "walls": [[r, c] for r in range(5) for c in range(5) if r in (0, 4) or c in (0, 4)],
        "targets": [[1, 3]], "boxes": [[2, 3]], "player": [3, 3],
    }  # fmt: skip
    assert game.solve(state) == ["U"]
    state["player"] = [3, 1]
    path = game.solve(state)
    assert path == ["R", "R", "U"] and game.check({"metadata": {"state": state}}, tuple(path))  # walk, walk, push
    end = state
    for m in path:
        end = game.step(end, m)
    assert game.solved(end)


def test_tictactoe_minimax_values_and_checker():
    game = get_game("tictactoe")
    win_now = {"board": "XX.OO...."}  # X to move, (0, 2) wins
    value, best = game.solve(win_now)
    assert value == 1 and best == [(0, 2)]
    assert game.check({"metadata": {"state": win_now}}, (0, 2))
    assert not game.check({"metadata": {"state": win_now}}, (2, 2))
    assert game.solve({"board": "........."})[0] == 0  # perfect play draws
    race = {"board": "OO.X.X..."}  # X to move; winning at once and blocking (still winning later) both keep +1
    v, best = game.solve(race)
    assert v == 1 and best == [(0, 2), (1, 1)]
    assert not game.check({"metadata": {"state": race}}, (2, 0))  # lets O win


def test_sudoku_puzzles_are_unique_and_solutions_legal():
    from agentkit.gamerl.games.sudoku import count_solutions

    game = get_game("sudoku")
    for level in LEVELS:
        state = game.generate(random.Random(11), level)
        assert count_solutions(state["grid"], *state["box"])[0] == 1
        sol, n = game.solve(state), len(state["grid"])
        br, bc = state["box"]
        assert all(sorted(row) == list(range(1, n + 1)) for row in sol)
        assert all(sorted(sol[r][c] for r in range(n)) == list(range(1, n + 1)) for c in range(n))
        for r0 in range(0, n, br):
            for c0 in range(0, n, bc):
                assert sorted(sol[r][c] for r in range(r0, r0 + br) for c in range(c0, c0 + bc)) == list(
                    range(1, n + 1)
                )
        assert all(state["grid"][r][c] in (0, sol[r][c]) for r in range(n) for c in range(n))


def test_tents_are_unique_and_follow_the_rules():
    from agentkit.gamerl.games.tents import solutions

    game = get_game("tents")
    for seed in range(5):
        state = game.generate(random.Random(seed), "Medium")
        trees = [tuple(t) for t in state["trees"]]
        assert len(solutions(state["size"], trees, state["rows"], state["cols"], limit=3)) == 1
        tents = game.solve(state)
        assert len(tents) == len(trees)
        assert all(abs(a[0] - b[0]) > 1 or abs(a[1] - b[1]) > 1 for a in tents for b in tents if a != b)
        assert [sum(t[0] == r for t in tents) for r in range(state["size"])] == state["rows"]


def test_minesweeper_deductions_are_sound():
    game = get_game("minesweeper")
    for seed in range(20):
        state = game.generate(random.Random(seed), random.choice(LEVELS))
        mines = set(map(tuple, state["mines"]))
        certain, safe = game.solve(state)
        assert certain <= mines and not (safe & mines) and (certain or safe)


def test_wordsearch_words_occur_once():
    from agentkit.gamerl.games.wordsearch import occurrences

    game = get_game("wordsearch")
    state = game.generate(random.Random(2), "Hard")
    for word, (r, c, d) in game.solve(state).items():
        assert occurrences(state["grid"], word) == [(r, c, d)]


def test_life_blinker_and_langton_first_steps():
    life = get_game("life")
    blinker = {"grid": [".....", "..O..", "..O..", "..O..", "....."], "steps": 1}
    assert life.solve(blinker) == [".....", ".....", ".OOO.", ".....", "....."]
    assert life.solve({**blinker, "steps": 2}) == blinker["grid"]
    ant = get_game("langton")
    s = {"grid": ["...", "...", "..."], "ant": [1, 1], "heading": "U", "steps": 2}
    end = ant.solve(s)  # white: right, flip, forward → (1, 2) facing R; white: right → facing D, to (2, 2)
    assert end["ant"] == [2, 2] and end["heading"] == "D" and end["grid"] == ["...", ".##", "..."]


def test_tetris_drop_and_2048_slides():
    from agentkit.gamerl.games.g2048 import slide, slide_row
    from agentkit.gamerl.games.tetris import drop

    grid = ["....", "....", "#..#"]
    board, cleared, top = drop(grid, "O", 0, 1)
    assert (cleared, top) == (1, 1) and board == ["....", "....", ".##."]
    assert slide_row([2, 2, 2, 2]) == ([4, 4, 0, 0], 8)
    assert slide_row([2, 2, 4, 0]) == ([4, 4, 0, 0], 4)
    assert slide_row([0, 4, 4, 4]) == ([8, 4, 0, 0], 8)
    assert slide([[2, 0], [2, 4]], "U") == ([[4, 4], [0, 0]], 4)
    assert slide([[2, 0], [2, 4]], "R") == ([[0, 2], [2, 4]], 0)


def test_blocks3d_views_by_hand():
    from agentkit.gamerl.games.blocks3d import views

    v = views([[1, 2], [0, 3]])
    assert (v["cubes"], v["front"], v["side"], v["top"]) == (6, [1, 3], [2, 3], 3)
    # tops 3; sides: (0,0) h1: up 1 left 1 down 1 right 0; (0,1) h2: up 2 right 2 left 1 down 0;
    # (1,1) h3: down 3 right 3 left 3 up 1 → 3 + 3 + 5 + 10
    assert v["surface"] == 21


def test_levels_make_boards_bigger_and_plans_longer():
    maze = get_game("maze")
    lengths = {
        level: sum(len(maze.solve(maze.generate(random.Random(s), level))) for s in range(30)) / 30 for level in LEVELS
    }
    assert lengths["Easy"] < lengths["Medium"] < lengths["Hard"]
