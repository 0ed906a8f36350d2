"""agentkit.data.arithmetic: deterministic, correct suite (a) tasks."""

import re

import pytest

from agentkit.data import arithmetic_suite


def test_arithmetic_deterministic_and_correct():
    a, b = arithmetic_suite(40, seed=3), arithmetic_suite(40, seed=3)
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]
    assert [t.question for t in arithmetic_suite(40, seed=4)] != [t.question for t in a]
    assert arithmetic_suite(10, seed=3)[7].question == a[7].question  # the i-th task depends only on (seed, i)
    for t in a:
        if t.kind == "mul":
            assert int(t.answer) == t.meta["a"] * t.meta["b"] and abs(int(t.answer)) > 1000
        if t.kind == "linear":
            m = re.match(r"Solve for x: (\d+)x ([+-]) (\d+) = (-?\d+)\.", t.question)
            a_, sign, b_, c = m.groups()
            x = int(t.answer)
            assert int(a_) * x + (int(b_) if sign == "+" else -int(b_)) == int(c)
        if t.kind == "chain":
            expr = t.question.removeprefix("Compute ").rstrip(".").replace("×", "*")
            assert eval(expr) == int(t.answer)  # noqa: S307 - our own generated arithmetic
    with pytest.raises(ValueError, match="unknown arithmetic kind"):
        arithmetic_suite(2, kinds=["division"])


def test_steps_kind_is_four_dependent_operations():
    ops = {"multiply by": lambda x, y: x * y, "subtract": lambda x, y: x - y, "add": lambda x, y: x + y}
    tasks = arithmetic_suite(20, seed=7, kinds=("steps",))
    assert len({t.question for t in tasks}) == 20 and all(t.id.startswith("arith-steps-7-") for t in tasks)
    for t in tasks:  # replay the words of the question, step by step
        m = re.match(r"Start with (\d+)\. (.*)\. Use one Python call per step\.$", t.question)
        x, steps = int(m.group(1)), m.group(2).lower().split(", then ")
        assert len(steps) == 4 and steps[0].startswith("multiply by")
        for step in steps:
            op, y = step.rsplit(" ", 1)
            x = ops[op](x, int(y))
        assert str(x) == t.answer == str(eval(t.meta["expr"]))  # noqa: S307 - our own generated arithmetic
