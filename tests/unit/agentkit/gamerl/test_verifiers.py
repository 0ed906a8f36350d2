"""Rule-first verification: tricky answer formats per kind, extraction sources, the judge fallback and its log."""

import pytest

from agentkit.gamerl.verifiers import DIRECTIONS, Judge, extract, path_counts, score_answer, verify, verify_batch

OPTS = ["3", "5", "7", "9"]
WORDS = ["wall", "open cell", "start", "goal"]


def entry(answer, **spec):
    spec.setdefault("kind", "text")
    return {"question": "q?", "answer": answer, "metadata": {"verify": spec}}


CHOICE = dict(kind="choice", options=OPTS)
CASES = [
    # ---- multiple choice: letters, brackets, option text, several labels ----
    ("C", "C", CHOICE, 1.0, "rule"),
    ("c", "C", CHOICE, 1.0, "rule"),
    ("(C)", "C", CHOICE, 1.0, "rule"),
    ("C)", "C", CHOICE, 1.0, "rule"),
    ("C. 7", "C", CHOICE, 1.0, "rule"),
    ("C: 7", "C", CHOICE, 1.0, "rule"),
    ("**C**", "C", CHOICE, 1.0, "rule"),
    ("Option C", "C", CHOICE, 1.0, "rule"),
    ("the answer is (C)", "C", CHOICE, 1.0, "rule"),
    ("7", "C", CHOICE, 1.0, "rule"),  # the option's text
    ("B", "C", CHOICE, 0.0, "rule"),
    ("A or C", "C", CHOICE, 0.0, "none"),  # two labels: no rule decides
    ("E", "C", CHOICE, 0.0, "none"),  # not a label of four options
    ("open cell", "B", dict(kind="choice", options=WORDS), 1.0, "rule"),
    ("Open Cell.", "B", dict(kind="choice", options=WORDS), 1.0, "rule"),
    ("A. A wall", "A", dict(kind="choice", options=WORDS), 1.0, "rule"),  # label then text with an article
    ("2", "2", dict(kind="choice", options=["x", "y", "z"], style="index"), 1.0, "rule"),
    ("(3)", "2", dict(kind="choice", options=["x", "y", "z"], style="index"), 0.0, "rule"),
    # ---- integers ----
    ("42", "42", dict(kind="int"), 1.0, "rule"),
    ("+42", "42", dict(kind="int"), 1.0, "rule"),
    ("42.0", "42", dict(kind="int"), 1.0, "rule"),
    ("1,234", "1234", dict(kind="int"), 1.0, "rule"),
    ("forty-two", "42", dict(kind="int"), 1.0, "rule"),
    ("Seven", "7", dict(kind="int"), 1.0, "rule"),
    ("12 moves", "12", dict(kind="int"), 1.0, "rule"),
    ("x = 12", "12", dict(kind="int"), 1.0, "rule"),
    ("$12$", "12", dict(kind="int"), 1.0, "rule"),
    ("−3", "-3", dict(kind="int"), 1.0, "rule"),  # Unicode minus
    ("13", "12", dict(kind="int"), 0.0, "rule"),
    ("12.5", "12", dict(kind="int"), 0.0, "none"),
    ("between 11 and 13", "12", dict(kind="int"), 0.0, "none"),
    ("I don't know", "12", dict(kind="int"), 0.0, "none"),
    # ---- fractions and decimals ----
    ("3/4", "0.75", dict(kind="number"), 1.0, "rule"),
    (r"\frac{3}{4}", "3/4", dict(kind="number"), 1.0, "rule"),
    (r"\dfrac{6}{8}", "3/4", dict(kind="number"), 1.0, "rule"),
    ("75%", "3/4", dict(kind="number"), 1.0, "rule"),
    ("0.333", "1/3", dict(kind="number"), 1.0, "rule"),
    ("0.3", "1/3", dict(kind="number"), 0.0, "rule"),  # one decimal is too coarse
    ("-0.5", "-1/2", dict(kind="number"), 1.0, "rule"),
    ("2/0", "2", dict(kind="number"), 0.0, "none"),
    # ---- coordinates ----
    ("(2, 3)", "(2, 3)", dict(kind="coord"), 1.0, "rule"),
    ("[2,3]", "(2, 3)", dict(kind="coord"), 1.0, "rule"),
    ("2, 3", "(2, 3)", dict(kind="coord"), 1.0, "rule"),
    ("row 2, column 3", "(2, 3)", dict(kind="coord"), 1.0, "rule"),
    ("(2;3)", "(2, 3)", dict(kind="coord"), 1.0, "rule"),
    ("(3, 2)", "(2, 3)", dict(kind="coord"), 0.0, "rule"),
    ("(1, 2, 3)", "(1, 2, 3)", dict(kind="coord", dim=3), 1.0, "rule"),
    ("(2, 3) or (3, 4)", "(2, 3)", dict(kind="coord"), 0.0, "none"),
    ("(2.5, 3)", "(2, 3)", dict(kind="coord"), 0.0, "none"),
    # ---- sets of coordinates ----
    ("(3, 4), (1, 2)", "(1, 2), (3, 4)", dict(kind="coords"), 1.0, "rule"),
    ("[(1,2),(3,4)]", "(1, 2), (3, 4)", dict(kind="coords"), 1.0, "rule"),
    ("(1, 2)", "(1, 2), (3, 4)", dict(kind="coords"), 0.0, "rule"),
    ("none", "none", dict(kind="coords"), 1.0, "rule"),
    ("There are none.", "none", dict(kind="coords"), 0.0, "none"),
    ("[]", "none", dict(kind="coords"), 1.0, "rule"),
    ("(1, 2), (3", "(1, 2), (3, 4)", dict(kind="coords"), 0.0, "none"),
    # ---- sets and sequences ----
    ("{3, 1} and 2", "1, 2, 3", dict(kind="set"), 1.0, "rule"),
    ("2; 3.0; 1", "1, 2, 3", dict(kind="set"), 1.0, "rule"),
    ("1, 2", "1, 2, 3", dict(kind="set"), 0.0, "rule"),
    ("up, right -> right then down", "U R R D", dict(kind="sequence", aliases=DIRECTIONS), 1.0, "rule"),
    ("URRD", "U R R D", dict(kind="sequence", aliases=DIRECTIONS), 1.0, "rule"),
    ("↑ → → ↓", "U R R D", dict(kind="sequence", aliases=DIRECTIONS), 1.0, "rule"),
    ("U,R,D,R", "U R R D", dict(kind="sequence", aliases=DIRECTIONS), 0.0, "rule"),
    ("north east east south", "U R R D", dict(kind="sequence", aliases=DIRECTIONS), 1.0, "rule"),
    # ---- grids ----
    ("1 2\n3 4", "1 2\n3 4", dict(kind="grid", rows=2, cols=2), 1.0, "rule"),
    ("[[1, 2], [3, 4]]", "1 2\n3 4", dict(kind="grid", rows=2, cols=2), 1.0, "rule"),
    ("1,2;3,4", "1 2\n3 4", dict(kind="grid", rows=2, cols=2), 1.0, "rule"),
    ("12\n34", "1 2\n3 4", dict(kind="grid", rows=2, cols=2), 1.0, "rule"),
    ("| 1 | 2 |\n| 3 | 4 |", "1 2\n3 4", dict(kind="grid", rows=2, cols=2), 1.0, "rule"),
    ("O.\n.O", "O.\n.O", dict(kind="grid", rows=2, cols=2), 1.0, "rule"),  # '.' cells survive cleaning
    ("o.\n.o", "O.\n.O", dict(kind="grid", rows=2, cols=2), 1.0, "rule"),
    ("1 2\n4 3", "1 2\n3 4", dict(kind="grid", rows=2, cols=2), 0.0, "rule"),
    ("1 2 3\n4 5 6", "1 2\n3 4", dict(kind="grid", rows=2, cols=2), 0.0, "none"),
    # ---- text ----
    ("The Goal", "goal", dict(kind="text"), 1.0, "rule"),
    ("draw", "draw", dict(kind="text", accept=["tie"]), 1.0, "rule"),
    ("tie", "draw", dict(kind="text", accept=["tie"]), 1.0, "rule"),
    ("nobody wins", "draw", dict(kind="text"), 0.0, "none"),
]


@pytest.mark.parametrize(("answer", "gold", "spec", "score", "path"), CASES)
def test_tricky_formats(answer, gold, spec, score, path):
    v = verify(f"<answer>{answer}</answer>", entry(gold, **spec))
    assert (v.score, v.path) == (score, path), v


def test_there_are_at_least_fifty_tricky_formats():
    assert len(CASES) >= 50


@pytest.mark.parametrize(
    ("output", "answer", "source"),
    [
        ("so <answer>(2, 3)</answer>", "(2, 3)", "answer_tag"),
        ("<answer>x</answer> then <answer>\\boxed{7}</answer>", "7", "answer_tag"),  # the last tag, its box
        ("<answer>7", "7", "answer_tag"),  # unclosed at a stop string
        ("we get \\boxed{\\frac{3}{4}} overall", "\\frac{3}{4}", "boxed"),
        ("analysis...\n### C", "C", "marker"),  # GameQA's format
        ("Counting...\nFinal answer: 12 moves.", "12 moves.", "answer_is"),
        ("Counting...\nThe answer is B", "B", "answer_is"),
        ('The answer is "none" because no line is open.', '"none"', "answer_is"),
        ("The answer is (2, 3). Then the ant turns.", "(2, 3)", "answer_is"),
        ("step 1\nstep 2\n\n  14  \n", "14", "last_line"),
        ("", "", "last_line"),
    ],
)
def test_extraction_sources(output, answer, source):
    assert extract(output) == (answer, source)


def test_a_grid_without_tags_reads_as_many_lines_as_it_has_rows():
    e = entry("1 2\n3 4", kind="grid", rows=2, cols=2)
    assert verify("The solved grid is:\n1 2\n3 4", e).score == 1.0
    assert score_answer(None, e) == 0.0


def test_game_checker_accepts_every_valid_answer_and_only_those():
    seen = []

    def check(entry, parsed):
        seen.append(parsed)
        return parsed in {("U", "R"), ("R", "U")}

    e = entry("U R", kind="sequence", aliases=DIRECTIONS, check=True)
    assert verify("<answer>R U</answer>", e, checker=check).score == 1.0  # not the stored gold, still valid
    assert verify("<answer>up, right</answer>", e, checker=check).path == "game"
    assert verify("<answer>R R</answer>", e, checker=check).score == 0.0
    assert seen == [("R", "U"), ("U", "R"), ("R", "R")]


class ScriptedJudge(Judge):
    """A judge whose engine's replies are scripted (the rule path must not call it)."""

    def __init__(self, replies):
        self.calls, self.replies = [], replies

    def __call__(self, items):
        self.calls.append(list(items))
        return self.replies[: len(items)]


def test_the_judge_sees_only_what_no_rule_decided_and_the_path_is_logged():
    entries = [entry("12", kind="int"), entry("12", kind="int"), entry("draw", kind="text")]
    outputs = ["<answer>12</answer>", "<answer>a dozen</answer>", "<answer>nobody wins</answer>"]
    judge = ScriptedJudge([True, False])
    verdicts = verify_batch(outputs, entries, judge)
    assert [(v.score, v.path) for v in verdicts] == [(1.0, "rule"), (1.0, "judge"), (0.0, "judge")]
    assert judge.calls == [[("q?", "12", "a dozen"), ("q?", "draw", "nobody wins")]]
    assert path_counts(verdicts) == {"rule": 1, "game": 0, "judge": 2, "none": 0}


def test_a_judge_that_cannot_answer_leaves_the_sample_undecided():
    verdicts = verify_batch(["<answer>a dozen</answer>"], [entry("12", kind="int")], ScriptedJudge([None]))
    assert (verdicts[0].score, verdicts[0].path) == (0.0, "none")


class FailingEngine:
    def generate(self, prompts, params):
        raise ConnectionError("judge server down")


def test_a_failing_judge_engine_keeps_rule_verdicts():
    verdicts = verify_batch(
        ["<answer>12</answer>", "<answer>a dozen</answer>"], [entry("12", kind="int")] * 2, Judge(FailingEngine())
    )
    assert [v.path for v in verdicts] == ["rule", "none"]


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match="unknown answer kind 'colour'"):
        verify("<answer>red</answer>", entry("red", kind="colour"))


def test_the_judge_on_a_real_engine_answers_yes_or_no(tiny_engine):
    """A random tiny model, constrained to Yes / No: every undecided sample gets a verdict from it."""
    entries = [entry("12", kind="int"), entry("draw", kind="text")]
    verdicts = verify_batch(["<answer>a dozen</answer>", "<answer>a tie</answer>"], entries, Judge(tiny_engine))
    assert [v.path for v in verdicts] == ["judge", "judge"]
    assert all(v.score in (0.0, 1.0) for v in verdicts)


def test_accept_lists_other_valid_answers_of_any_kind():
    """n-queens has several solutions: each board in ``accept`` is read as the gold is; others stay wrong."""
    board = "Q _\n_ _"
    other = "_ Q\n_ _"
    e = {"answer": board, "metadata": {"verify": {"kind": "grid", "rows": 2, "cols": 2, "accept": [other]}}}
    assert verify("<answer>\n_ Q\n_ _\n</answer>", e).score == 1.0
    assert verify("<answer>\nQ,_;_,_\n</answer>", e).score == 1.0
    wrong = verify("<answer>\n_ _\nQ _\n</answer>", e)
    assert wrong.score == 0.0 and wrong.path == "rule"


def test_decide_is_verify_after_extract():
    from agentkit.gamerl.verifiers import decide, extract

    e = {"answer": "42", "metadata": {"verify": {"kind": "int"}}}
    for out in ("<answer>forty-two</answer>", "so \\boxed{41}", "nothing here"):
        assert decide(*extract(out), e) == verify(out, e)
