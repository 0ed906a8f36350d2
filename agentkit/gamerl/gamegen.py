"""Code2Logic's first step (arXiv 2505.13886, §3.1): an LLM writes a game's code from its description, and the
code is accepted only if it runs and behaves, checked by executing it in the sandbox.

The code must define six functions (``GAME_INTERFACE``), a puzzle's whole contract:

- ``new_state(rng)``: a start state drawn with ``rng`` (a seeded ``random.Random``);
- ``legal_moves(state)``: the moves allowed there (a list; empty when none);
- ``apply(state, move)``: the state after the move, a new value (``state`` left as it was);
- ``is_solved(state)``: whether the goal is reached;
- ``render(state)``: the state as text (what a question shows);
- ``solve(state)``: a list of moves from ``state`` to a solved state.

Validation (``validate_game``) runs the code with a harness, one sandbox call, on several seeds; the harness's
findings come back as the value of the call's ``result`` expression (never through what the code prints), and the
verdict is made outside the sandbox. A game is accepted when: the six functions exist; ``new_state`` is
deterministic given its seed and not the same state on every seed; ``render`` gives text; the start has a legal
move (or is solved); applying a legal move neither changes the state it was given nor leaves it as it was; a
random playout of legal moves runs; ``solve``'s moves are legal and reach a solved state; and a breadth-first
search over ``legal_moves`` / ``apply`` (ours, bounded) agrees with ``solve``: the shortest solution it finds is
no longer than ``solve``'s, and it never exhausts the states without a solution where ``solve`` found one (over
its budget it does not judge). Every rejection names its reason.

The accepted code then goes to ``agentkit.gamerl.code2logic`` (templates drafted from it, validated by it), as a
user's game file would: ``code2logic_from_description`` runs the two steps and reports acceptance at each.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentkit.gamerl.code2logic import Code2LogicResult, _sandbox_config, code2logic, sandbox_value

GAME_INTERFACE = ("new_state", "legal_moves", "apply", "is_solved", "render", "solve")

EXAMPLE_DESCRIPTION = "A counter starts at a random number from 1 to 9 and must reach a target from 10 to 30; a move adds 1 or doubles the counter."

EXAMPLE_GAME = """def new_state(rng):
    return (rng.randint(1, 9), rng.randint(10, 30))

def legal_moves(state):
    value, target = state
    return [m for m in ("+1", "*2") if (value + 1 if m == "+1" else value * 2) <= target]

def apply(state, move):
    value, target = state
    return (value + 1 if move == "+1" else value * 2, target)

def is_solved(state):
    return state[0] == state[1]

def render(state):
    return f"Counter: {state[0]}, target: {state[1]}"

def solve(state):
    from collections import deque
    seen, queue = {state}, deque([(state, [])])
    while queue:
        s, path = queue.popleft()
        if is_solved(s):
            return path
        for m in legal_moves(s):
            n = apply(s, m)
            if n not in seen:
                seen.add(n)
                queue.append((n, path + [m]))
    return []"""

WRITE_PROMPT = """You write small puzzle games in Python. A game defines exactly these functions:
new_state(rng) -> a start state drawn with rng (random.Random); legal_moves(state) -> list of moves;
apply(state, move) -> the new state (do not modify the given one); is_solved(state) -> bool;
render(state) -> str; solve(state) -> list of moves that reaches a solved state.
Use only the standard library. States and moves should be tuples, numbers or strings.

Example. Game: {example_description}
```python
{example_game}
```

Game: {description}
Write its Python code in one ```python block."""

# Runs in the sandbox after the game's code: every check's raw finding, returned as the result expression's value.
_HARNESS = (
    f"_C2L_NAMES = {GAME_INTERFACE!r}\n"
    + """
import random as _r
def _c2l_bfs(start, budget):
    from collections import deque as _dq
    seen, queue = {repr(start)}, _dq([(start, 0)])
    while queue:
        s, d = queue.popleft()
        if is_solved(s):
            return d
        for m in list(legal_moves(s)):
            n = apply(s, m)
            if repr(n) not in seen:
                if len(seen) >= budget:
                    return None
                seen.add(repr(n))
                queue.append((n, d + 1))
    return -1
def _c2l_game_check(instances, seed, playout, budget):
    g = globals()
    missing = [n for n in _C2L_NAMES if not callable(g.get(n))]
    if missing:
        return {"missing": missing}
    found = []
    for i in range(instances):
        s = seed * 1000 + i
        a, b = new_state(_r.Random(s)), new_state(_r.Random(s))
        rec = {"seed": s, "state": repr(a)[:200], "deterministic": repr(a) == repr(b)}
        text = render(a)
        rec["render"] = text[:200] if isinstance(text, str) else None
        moves = list(legal_moves(a))
        rec["moves"], rec["solved_at_start"] = len(moves), bool(is_solved(a))
        if moves:
            before = repr(a)
            after = apply(a, moves[0])
            rec["mutates"], rec["changes"] = repr(a) != before, repr(after) != before
        rng, st, steps = _r.Random(s), a, 0
        for _ in range(playout):
            ms = list(legal_moves(st))
            if not ms or is_solved(st):
                break
            st = apply(st, rng.choice(ms))
            steps += 1
        rec["playout"] = steps
        plan, st, legal = list(solve(a)), a, True
        for m in plan:
            if m not in list(legal_moves(st)):
                legal = False
                break
            st = apply(st, m)
        rec["solver_length"], rec["solver_legal"] = len(plan), legal
        rec["solver_solves"] = legal and bool(is_solved(st))
        rec["bfs_length"] = _c2l_bfs(a, budget)
        found.append(rec)
    return {"missing": [], "instances": found}
"""
)


@dataclass
class GameReport:
    """One game draft's validation: accepted or not, why not, and what the harness found per instance."""

    source: str
    accepted: bool
    reason: str
    instances: list[dict[str, Any]] = field(default_factory=list)


def extract_code(text: str) -> str:
    """The first fenced code block of a model's answer (```python … ```; a block cut off before its closing fence
    runs to the end), else the whole text.

    Examples:
        >>> extract_code("Here:\\n```python\\nx = 1\\n```\\nDone.")
        'x = 1'
        >>> extract_code("Here:\\n```python\\ny = 2\\n")
        'y = 2'
    """
    m = re.search(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", text, re.S)
    return (m.group(1) if m else text).strip()


def write_games(engine, description: str, n: int, temperature: float = 0.7, seed: int = 0, max_tokens: int = 700):
    """``n`` drafts of a game's code from its description (``WRITE_PROMPT``, one example game).

    Args:
        engine: any Engine.
        description: the game in words (rules, goal, how a start state is drawn).
        n: drafts, each sampled with its own seed ``seed * 1000 + i``.
        temperature: the sampling temperature.
        seed: the drafts' seed.
        max_tokens: the longest draft.

    Returns:
        The drafts' code (``extract_code`` of each answer).
    """
    from agentkit.engines.base import SamplingParams

    prompt = WRITE_PROMPT.format(
        example_description=EXAMPLE_DESCRIPTION, example_game=EXAMPLE_GAME, description=description.strip()
    )
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seeds=[seed * 1000 + i for i in range(n)])
    outs = engine.generate([[{"role": "user", "content": prompt}]] * n, params)
    return [extract_code(o[0].text) for o in outs]


def _verdict(found: dict[str, Any]) -> str:
    """The first reason to reject a game from the harness's findings ("" when none)."""
    if found["missing"]:
        return f"missing function(s): {', '.join(found['missing'])}"
    inst = found["instances"]
    checks = [
        (lambda r: not r["deterministic"], "new_state is not deterministic given its rng"),
        (lambda r: not r["render"], "render does not return text"),
        (lambda r: r["moves"] == 0 and not r["solved_at_start"], "a start state has no legal move"),
        (lambda r: r.get("mutates"), "apply changes the state it is given"),
        (lambda r: r.get("changes") is False, "a legal move leaves the state as it was"),
        (lambda r: not r["solver_legal"], "solve plays an illegal move"),
        (lambda r: not r["solver_solves"], "solve's moves do not reach a solved state"),
        (
            lambda r: r["bfs_length"] is not None and (r["bfs_length"] < 0 or r["bfs_length"] > r["solver_length"]),
            "solve and a breadth-first search disagree",
        ),
    ]
    for bad, reason in checks:
        if any(bad(r) for r in inst):
            return reason
    if len(inst) >= 2 and len({r["state"] for r in inst}) == 1:
        return "new_state draws the same state on every seed"
    return ""


def validate_game(
    sandbox, source: str, instances: int = 4, seed: int = 0, playout: int = 50, budget: int = 20_000
) -> GameReport:
    """Run a game draft's code with the harness in one sandbox call and judge it (the module docstring).

    Args:
        sandbox: the ``Sandbox`` the code runs in.
        source: the game's code.
        instances: start states checked (seeds ``seed * 1000 + i``).
        seed: the first seed.
        playout: the random playout's longest run of moves.
        budget: states the breadth-first search may visit before it gives up (then it does not judge).

    Returns:
        The game's report.
    """
    if not source.strip():
        return GameReport(source, False, "no code")
    expr = f"_c2l_game_check({instances}, {seed}, {playout}, {budget})"
    found, error = sandbox_value(sandbox, source + "\n" + _HARNESS, expr)
    if error is not None:
        shown = error if error.startswith("the sandbox failed") else f"the code failed: {error}"
        return GameReport(source, False, shown[:300])
    if not (isinstance(found, dict) and isinstance(found.get("missing"), list)):
        return GameReport(source, False, "the harness returned no findings")
    reason = _verdict(found)
    return GameReport(source, not reason, reason, found.get("instances", []))


def code2logic_from_description(
    engine,
    description: str,
    name: str,
    out: str | Path,
    games: int = 4,
    templates: int = 8,
    instances: int = 8,
    seed: int = 0,
    sandbox=None,
) -> dict[str, Any]:
    """Code2Logic end to end: the model writes the game's code, the first draft that validates is saved as
    ``out/<name>.py``, then templates are drafted from it and validated (``agentkit.gamerl.code2logic``).

    Args:
        engine: any Engine, the model for both steps.
        description: the game in words.
        name: the game's name (its file's stem; lower case, digits, underscores).
        out: the folder for ``games.jsonl`` (every draft, verdict and reason), ``<name>.py``, and Code2Logic's
            ``templates.jsonl``, ``tasks.jsonl`` and ``summary.json``.
        games: game drafts.
        templates: template drafts from the accepted game (none drafted when no game is accepted).
        instances: tasks instantiated per template.
        seed: drafting and instance seed.
        sandbox: the ``Sandbox`` to run in (default: a fresh one).

    Returns:
        Acceptance at each stage: ``games``, ``games_accepted``, then Code2Logic's counts (zeros without a game).
    """
    from agentkit.errors import AgentkitError
    from agentkit.files import atomic_write
    from agentkit.tools.sandbox import Sandbox

    if not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", name):
        raise AgentkitError(f"game name {name!r}: lower case letters, digits and underscores only", "e.g. hanoi_3")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with nullcontext(sandbox) if sandbox is not None else Sandbox(_sandbox_config()) as sb:
        reports = [validate_game(sb, src, seed=seed) for src in write_games(engine, description, games, seed=seed)]
        atomic_write(out / "games.jsonl", "".join(json.dumps(asdict(r)) + "\n" for r in reports))
        accepted = next((r for r in reports if r.accepted), None)
        result = Code2LogicResult(name, [])  # no game, no templates: every count 0
        if accepted is not None:
            game_file = out / f"{name}.py"
            atomic_write(game_file, accepted.source + "\n")
            result = code2logic(engine, game_file, templates, instances, (), seed, sb)
            result.save(out)
    summary = {"game": name, "games": len(reports), "games_accepted": sum(r.accepted for r in reports)}
    summary["game_reasons"] = dict(Counter(r.reason for r in reports if r.reason))
    summary.update(result.counts)
    atomic_write(out / "summary.json", json.dumps(summary, indent=1))
    return summary
