"""Suite (a): arithmetic and algebra word problems with numbers too large for mental arithmetic.

Seeded and deterministic: ``arithmetic_suite(n, seed)`` returns the same tasks on every machine. Kinds:

- ``mul``:    "What is 347 × 58?"                         (3-digit × 2/3-digit products)
- ``chain``:  "Compute (4821 - 1937) × 23 + 611."          (three operations, brackets)
- ``word``:   shop / warehouse stories with 2-3 steps       (e.g. crates × items − sold)
- ``linear``: "Solve for x: 37x + 412 = 2189."              (integer solution by construction)

``EASY_KINDS`` (``add``, ``sub``, ``small_mul``: "What is 47 + 38?") are small-number problems, opt-in only.
``steps`` (opt-in): "Start with 386. Multiply by 47, then subtract 1250, then …": four dependent steps, one
tool call each (the multi-turn workload of ``agentkit bench agent``).

Answers are integers (as strings); score with ``agentkit.eval.metrics.numeric_match``. The default kinds carry
``meta["expr"]``, a Python expression that computes the answer (for tool-use training data).
"""

from __future__ import annotations

import random

from agentkit.data.tasks import Task

KINDS = ("mul", "chain", "word", "linear")

_ITEMS = [("crates", "apples"), ("boxes", "pencils"), ("pallets", "bricks"), ("trays", "eggs"), ("bags", "marbles")]
_NAMES = ["Amara", "Bogdan", "Chen", "Dalia", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun"]


def _mul(r: random.Random) -> tuple[str, int, dict]:
    a, b = r.randint(101, 999), r.randint(23, 999)
    return f"What is {a} × {b}?", a * b, {"a": a, "b": b, "expr": f"{a} * {b}"}


def _chain(r: random.Random) -> tuple[str, int, dict]:
    a, b = r.randint(1000, 9999), r.randint(100, 999)
    c, d = r.randint(12, 99), r.randint(100, 999)
    return f"Compute ({a} - {b}) × {c} + {d}.", (a - b) * c + d, {"expr": f"({a} - {b}) * {c} + {d}"}


def _word(r: random.Random) -> tuple[str, int, dict]:
    name = r.choice(_NAMES)
    box, item = r.choice(_ITEMS)
    n, per = r.randint(23, 480), r.randint(12, 96)
    sold = r.randint(100, n * per - 1)
    if r.random() < 0.5:
        q = f"{name} has {n} {box} with {per} {item} in each. {name} sells {sold} {item}. How many {item} are left?"
        return q, n * per - sold, {"expr": f"{n} * {per} - {sold}"}
    price = r.randint(3, 29)
    q = (
        f"{name} packs {n} {box} of {per} {item} and sells every {item[:-1] if item.endswith('s') else item} "
        f"for {price} dollars. How many dollars does {name} earn?"
    )
    return q, n * per * price, {"expr": f"{n} * {per} * {price}"}


def _linear(r: random.Random) -> tuple[str, int, dict]:
    x, a = r.randint(-99, 999), r.randint(12, 97)
    b = r.randint(-999, 999)
    c = a * x + b
    sign = "+" if b >= 0 else "-"
    return f"Solve for x: {a}x {sign} {abs(b)} = {c}.", x, {"expr": f"({c} - ({b})) // {a}"}


def _add(r: random.Random) -> tuple[str, int, dict]:
    a, b = r.randint(10, 99), r.randint(10, 99)
    return f"What is {a} + {b}?", a + b, {}


def _sub(r: random.Random) -> tuple[str, int, dict]:
    a, b = r.randint(50, 99), r.randint(10, 49)
    return f"What is {a} - {b}?", a - b, {}


def _small_mul(r: random.Random) -> tuple[str, int, dict]:
    a, b = r.randint(2, 9), r.randint(2, 12)
    return f"What is {a} × {b}?", a * b, {}


def _steps(r: random.Random) -> tuple[str, int, dict]:
    x = start = r.randint(101, 999)
    words, expr = [], str(x)
    for k in range(4):
        op = r.choice("*-+") if k else "*"
        y = r.randint(3, 97) if op == "*" else r.randint(100, 9999)
        words.append({"*": f"multiply by {y}", "-": f"subtract {y}", "+": f"add {y}"}[op])
        x = x * y if op == "*" else x - y if op == "-" else x + y
        expr = f"({expr}) {op} {y}"
    q = f"Start with {start}. {words[0].capitalize()}, then {', then '.join(words[1:])}. Use one Python call per step."
    return q, x, {"expr": expr, "steps": 4}


# Small-number kinds, not in the default KINDS: problems small models get right part of the time (useful where
# a mix of right and wrong answers is the point, e.g. uncertainty scoring).
EASY_KINDS = ("add", "sub", "small_mul")
_GEN = {
    "mul": _mul,
    "chain": _chain,
    "word": _word,
    "linear": _linear,
    "add": _add,
    "sub": _sub,
    "small_mul": _small_mul,
    "steps": _steps,
}


def arithmetic_suite(n: int = 100, seed: int = 0, kinds: tuple[str, ...] | list[str] = KINDS) -> list[Task]:
    """``n`` tasks cycling through ``kinds``; the i-th task depends only on (seed, i). Ids are ``arith-SEED-I``
    for the default kinds and ``easy-arith-SEED-I`` for ``EASY_KINDS``, so the two mix without clashing."""
    unknown = [k for k in kinds if k not in _GEN]
    if unknown:
        raise ValueError(f"unknown arithmetic kind(s) {unknown}; choose from {list(_GEN)}")
    tag = (
        "arith"
        if tuple(kinds) == tuple(KINDS)
        else "easy-arith"
        if tuple(kinds) == EASY_KINDS
        else "arith-" + "-".join(kinds)
    )
    tasks = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        r = random.Random(f"arith-{seed}-{i}")
        q, ans, meta = _GEN[kind](r)
        tasks.append(Task(id=f"{tag}-{seed}-{i}", question=q, answer=str(ans), kind=kind, metric="numeric", meta=meta))
    return tasks
