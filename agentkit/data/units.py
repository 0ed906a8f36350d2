"""Suite (c): unit conversions under a house style that only feedback teaches.

"Convert 12 miles to kilometres." → ``19.31 km``: the value rounded to two decimals, one space, the unit's
symbol. The question never states the style, and the scorer (``metric="exact"``) accepts only that string, so
a model has to learn the rules from feedback on earlier answers: the task for context adaptation (ACE), where
strategies transfer between examples and a checker decides correctness. The factors are the exact SI
definitions (a mile is 1.609344 km), so the arithmetic is checkable with the python tool.

Seeded and deterministic: ``units_suite(n, seed)`` gives the same tasks on every machine.
"""

from __future__ import annotations

import random

from agentkit.data.tasks import Task

# (from plural, to plural, to symbol, factor or None for temperature)
CONVERSIONS: tuple[tuple[str, str, str, float | None], ...] = (
    ("miles", "kilometres", "km", 1.609344),
    ("kilometres", "miles", "mi", 1 / 1.609344),
    ("feet", "metres", "m", 0.3048),
    ("inches", "centimetres", "cm", 2.54),
    ("pounds", "kilograms", "kg", 0.45359237),
    ("ounces", "grams", "g", 28.349523125),
    ("gallons", "litres", "L", 3.785411784),
    ("degrees Fahrenheit", "degrees Celsius", "°C", None),
)


def house_style(value: float, symbol: str) -> str:
    """The one accepted way to write an answer.

    >>> house_style(19.312128, "km"), house_style(-3.0, "°C")
    ('19.31 km', '-3.00 °C')
    """
    return f"{value:.2f} {symbol}"


def units_suite(n: int = 100, seed: int = 0) -> list[Task]:
    """``n`` conversions cycling through ``CONVERSIONS``; the i-th task depends only on (seed, i)."""
    tasks = []
    for i in range(n):
        src, dst, symbol, factor = CONVERSIONS[i % len(CONVERSIONS)]
        r = random.Random(f"units-{seed}-{i}")
        if factor is None:
            x = r.randint(-40, 212)
            value = (x - 32) * 5 / 9
        else:
            x = r.randint(2, 500)
            value = x * factor
        q = f"Convert {x} {src} to {dst}."
        tasks.append(
            Task(
                f"units-{seed}-{i}",
                q,
                house_style(value, symbol),
                "temperature" if factor is None else dst,
                "exact",
                {"value": x, "factor": factor, "symbol": symbol},
            )
        )
    return tasks
