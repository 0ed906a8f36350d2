"""Suite (c): the house style is the only accepted answer; values follow the SI definitions."""

import math

from agentkit.data.units import CONVERSIONS, units_suite
from agentkit.eval.metrics import score_task


def test_answers_follow_the_definitions_and_the_house_style():
    tasks = units_suite(16, seed=1)
    assert {t.meta["symbol"] for t in tasks} == {c[2] for c in CONVERSIONS}
    for t in tasks:
        x, factor = t.meta["value"], t.meta["factor"]
        value = (x - 32) * 5 / 9 if factor is None else x * factor
        number, symbol = t.answer.split(" ")
        assert symbol == t.meta["symbol"] and math.isclose(float(number), round(value, 2), abs_tol=1e-9)
        assert len(number.split(".")[1]) == 2 and t.metric == "exact"
    miles = next(t for t in tasks if t.question.startswith("Convert") and "miles to kilometres" in t.question)
    assert miles.answer == f"{miles.meta['value'] * 1.609344:.2f} km"


def test_only_the_house_style_scores():
    gold = "19.31 km"
    for answer, ok in [
        ("19.31 km", 1.0),
        ("<answer>19.31  km</answer>", 1.0),
        ("19.31km", 0.0),
        ("19.3 km", 0.0),
        ("19.31 kilometres", 0.0),
        ("19.31", 0.0),
    ]:
        assert score_task("exact", answer, gold)["correct"] == ok, answer
