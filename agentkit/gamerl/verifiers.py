r"""Rule-first verification of game answers: extraction, one parser per answer kind, a game checker when many
answers are valid, and a judge model only when no rule decides.

Game-RL's official reward asks a 72B judge "Correctness: Yes/No" for every sample (a substring match when the call
fails), although nearly every GameQA answer is a letter, a number or coordinates. Here each entry names its answer
kind in ``metadata["verify"]`` and a rule decides:

=========== ============================================= ===================================================
kind        gold                                          accepted forms (examples)
=========== ============================================= ===================================================
choice      a label ("C"; labels "ABCD…" or "1", "2"…)    ``C``, ``(c)``, ``C) 12``, ``Option C``, the option's text
int         ``"42"``                                      ``42``, ``+42``, ``42.0``, ``1,234``, ``forty-two``… ``42 steps``
number      ``"3/4"``, ``"0.75"``, ``"-2"``               ``\frac{3}{4}``, ``0.75``, ``75%``, ``0.33`` for 1/3 (≥ 2 decimals)
coord       ``"(2, 3)"`` (any dimension)                  ``[2,3]``, ``2, 3``, ``row 2, column 3``, ``(2;3)``
coords      ``"(0, 1), (2, 3)"`` (a set)                  any order, any brackets, ``none`` for the empty set
set         ``"a, b, c"``                                 any order, separators ``,`` ``;`` ``and`` or spaces
sequence    ``"U R R D"``                                 ``up, right, right, down``, ``URRD``, ``U->R->R->D``, arrows
grid        rows of cells (``"1 2\n3 4"``)                ``1,2;3,4``, ``[[1, 2], [3, 4]]``, ``12\n34`` (one-char cells)
text        a word or phrase (``aliases`` allowed)        SQuAD-normalised equality; anything else is left to a judge
=========== ============================================= ===================================================

``metadata["verify"]["accept"]`` lists other valid answers of any kind (each read as the gold is).

A parser returns None when it cannot read the answer as its kind (no number, several different numbers, two
labels…): then no rule decides, and the judge (any Engine, ``Judge``) is asked if one is given; without one the
sample scores 0. ``metadata["verify"]["check"] = True`` sends the parsed answer to the game's own checker
(``Game.check``), which accepts every valid answer (any shortest path, any winning move), not one stored gold.

Every ``Verdict`` says which path decided (``rule``, ``game``, ``judge``, ``none``) and where the answer was read
(``answer_tag``, ``boxed``, ``marker``, ``answer_is``, ``last_line``), so a run can log and count them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import cache, lru_cache
from typing import Any, NamedTuple

from agentkit.errors import AgentkitError
from agentkit.eval.metrics import last_boxed, normalize_answer

KINDS = ("choice", "int", "number", "coord", "coords", "set", "sequence", "grid", "text")


class Verdict(NamedTuple):
    """score: 1.0 correct, 0.0 not. path: what decided (rule / game / judge / none: nothing could). source: where
    the answer was read from. extracted: that answer text. parsed: what the kind's parser read (None: unreadable).
    (A named tuple: immutable, and made in a fraction of a frozen dataclass's time, once per sample.)"""

    score: float
    path: str
    source: str
    extracted: str
    parsed: Any = None


# ---- extraction -------------------------------------------------------------------------------------------------
_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S | re.I)
_ANSWER_IS = re.compile(r"(?:final answer|the answer|answer)\s*(?:is|:)\s*:?\s*(.+)", re.I)
_BECAUSE = re.compile(r"\.\s+(?=[A-Z])|,?\s+(?:because|since|as)\s+", re.I)


def extract(text: str, lines: int = 1) -> tuple[str, str]:
    r"""``(answer, source)``: the last ``<answer>…</answer>`` (a ``\boxed{}`` inside it wins), else the last
    ``\boxed{}``, else what follows GameQA's last ``###``, else "answer is …" / "Answer: …", else the last
    ``lines`` non-empty lines (a grid answer reads as many lines as it has rows).

    >>> extract("I think... <answer>\\boxed{(2, 3)}</answer>")
    ('(2, 3)', 'answer_tag')
    >>> extract("steps...\nSo the answer is: C.")
    ('C.', 'answer_is')
    >>> extract("1 2\n3 4", lines=2)
    ('1 2\n3 4', 'last_line')
    """
    lower = text.lower()  # the regexes below run only on outputs holding their words
    tags = _TAG.findall(text) if "<answer>" in lower else None
    if tags:
        inner = tags[-1]
        boxed = last_boxed(inner)
        return (boxed if boxed is not None else inner).strip(), "answer_tag"
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip(), "boxed"
    if "###" in text:
        after = text.rsplit("###", 1)[1].strip()
        if after:
            return after, "marker"
    found = _ANSWER_IS.findall(text) if "answer" in lower else None
    if found and found[-1].strip():  # up to the end of its sentence: "… is "none" because …" reads "none"
        return _BECAUSE.split(found[-1].strip(), 1)[0].strip(), "answer_is"
    rows = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(rows[-lines:]), "last_line"


_WRAPPERS = re.compile(r"\\text\{([^{}]*)\}|\\mathrm\{([^{}]*)\}|\*\*|`|\$")


def _clean(s: str, period: bool = True) -> str:
    """Without markdown / LaTeX wrappers, quotes and (``period``) a closing full stop."""
    s = _WRAPPERS.sub(lambda m: m.group(1) or m.group(2) or "", s).strip()
    s = s.strip(" \t\"'")
    return s.rstrip(".") if period else s


# ---- numbers ------------------------------------------------------------------------------------------------------
_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_NUMBER = re.compile(
    r"(?<![\w.])([-+−]?)\s?(?:\\d?frac\{(\d+)\}\{(\d+)\}|(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:\s*/\s*(\d+))?(\s*%)?)"
)


def _word_number(s: str) -> int | None:
    s = s.lower().strip().replace("-", " ")
    parts = s.split()
    if len(parts) == 1 and parts[0] in _WORDS:
        return _WORDS[parts[0]]
    if 1 <= len(parts) <= 2 and parts[0] in _TENS and (len(parts) == 1 or parts[1] in _WORDS and _WORDS[parts[1]] < 10):
        return _TENS[parts[0]] + (_WORDS[parts[1]] if len(parts) == 2 else 0)
    return None


def numbers(s: str) -> list[tuple[Fraction, int | None]]:
    r"""Every number in ``s`` as ``(exact value, decimals written or None)``: integers, thousands commas,
    decimals, fractions ``a/b`` and ``\frac{a}{b}``, percentages, a Unicode minus.

    >>> tuple((str(v), d) for v, d in numbers(r"-\frac{3}{4} or 1,234.50 and 50%"))
    (('-3/4', None), ('2469/2', 2), ('1/2', None))
    """
    out = []
    for m in _NUMBER.finditer(s):
        sign = -1 if m.group(1) in ("-", "−") else 1
        if m.group(2) is not None:
            den = int(m.group(3))
            if den == 0:
                continue
            out.append((sign * Fraction(int(m.group(2)), den), None))
            continue
        whole, frac, den, pct = m.group(4), m.group(5), m.group(6), m.group(7)
        value = Fraction(whole.replace(",", "") + ("." + frac if frac else ""))
        decimals = len(frac) if frac else None
        if den is not None:
            if int(den) == 0 or frac:
                continue
            value, decimals = value / int(den), None
        if pct:
            value, decimals = value / 100, None if decimals is None else decimals + 2
        out.append((sign * value, decimals))
    return out


@lru_cache(maxsize=1 << 16)  # golds repeat on every sample, answers within a group
def _one_number(s: str) -> tuple[Fraction, int | None] | None:
    """The answer's number when it has exactly one value (``42 steps``, ``x = 42``), or a number word."""
    found = numbers(s)
    values = {v for v, _ in found}
    if len(values) == 1:
        return found[-1]
    if not found:
        w = _word_number(_clean(s))
        return None if w is None else (Fraction(w), None)
    return None


@lru_cache(maxsize=1 << 16)  # golds repeat on every sample, answers within a group
def parse_int(s: str) -> int | None:
    """Integer value of an answer with exactly one number (or a number word).

    >>> parse_int("42 steps"), parse_int("forty-two"), parse_int("42.0"), parse_int("3 or 4"), parse_int("2.5")
    (42, 42, 42, None, None)
    """
    got = _one_number(s)
    if got is None or got[0].denominator != 1:
        return None
    return int(got[0])


def number_matches(s: str, gold: str) -> bool | None:
    """Exact value, or a decimal that rounds the gold at ≥ 2 written decimals (0.33 for 1/3); None: unreadable.

    >>> number_matches("0.33", "1/3"), number_matches("0.3", "1/3"), number_matches(r"\\frac{6}{8}", "0.75")
    (True, False, True)
    """
    got, want = _one_number(s), _one_number(gold)
    if got is None or want is None:
        return None
    value, decimals = got
    if value == want[0]:
        return True
    if decimals is not None and decimals >= 2 and want[0].denominator != 1:
        return round(want[0], decimals) == value
    return False


# ---- coordinates, sets, sequences, grids --------------------------------------------------------------------
_INT = re.compile(r"(?<![\w.])[-−]?\d+(?![\d.]*\d)")


def _ints(s: str) -> list[int]:
    return [int(x.replace("−", "-")) for x in _INT.findall(s)]


@lru_cache(maxsize=1 << 16)  # golds repeat on every sample, answers within a group
def parse_coord(s: str, dim: int = 2) -> tuple[int, ...] | None:
    """The answer's integers as one ``dim``-tuple.

    >>> parse_coord("row 2, column 3"), parse_coord("[2,3]"), parse_coord("(1, 2), (3, 4)")
    ((2, 3), (2, 3), None)
    """
    xs = _ints(s)
    return tuple(xs) if len(xs) == dim else None


_EMPTY = {"none", "empty", "no cells", "nothing", "[]", "{}", "()", "∅", "no"}


@lru_cache(maxsize=1 << 16)  # golds repeat on every sample, answers within a group
def parse_coords(s: str, dim: int = 2) -> frozenset[tuple[int, ...]] | None:
    """A set of coordinates, any order; None when the integers do not group into ``dim``-tuples.

    >>> sorted(parse_coords("(3,4) and (1, 2)")), parse_coords("none")
    ([(1, 2), (3, 4)], frozenset())
    """
    if _clean(s).lower() in _EMPTY:
        return frozenset()
    xs = _ints(s)
    if not xs or len(xs) % dim:
        return None
    return frozenset(tuple(xs[i : i + dim]) for i in range(0, len(xs), dim))


_SPLIT = re.compile(r"\s*(?:,|;|->|→|=>|\band\b|\bthen\b|\s)\s*", re.I)
# moves of grid games, in any of their usual spellings
DIRECTIONS = {
    **dict.fromkeys(("u", "up", "north", "n", "↑", "^"), "U"),
    **dict.fromkeys(("d", "down", "south", "s", "↓", "v"), "D"),
    **dict.fromkeys(("l", "left", "west", "w", "←", "<"), "L"),
    **dict.fromkeys(("r", "right", "east", "e", "→", ">"), "R"),
}


def _token(t: str, aliases: dict[str, str] | None) -> str:
    t = t.strip("()[]{}\"'.` ").lower()
    if aliases and t in aliases:
        return aliases[t]
    got = numbers(t)
    if len(got) == 1 and _NUMBER.fullmatch(t.replace(" ", "")):
        return str(got[0][0])
    return normalize_answer(t) or t


def _cell(t: str) -> str:
    """A grid cell: numbers by value, symbols as written (case aside)."""
    if t.isdigit():
        return str(int(t))
    if not any(ch.isdigit() for ch in t):
        return t.strip("'\"`").lower()
    got = numbers(t)
    return str(got[0][0]) if len(got) == 1 and _NUMBER.fullmatch(t) else t.strip("'\"`").lower()


def parse_sequence(s: str, aliases: dict[str, str] | None = None) -> tuple[str, ...] | None:
    """Tokens in order, each normalised (aliases such as ``DIRECTIONS`` map spellings to one symbol); a run of
    one-letter aliases with no separators (``URRD``) reads letter by letter.

    >>> parse_sequence("up, right -> R then down", DIRECTIONS), parse_sequence("URRD", DIRECTIONS)
    (('U', 'R', 'R', 'D'), ('U', 'R', 'R', 'D'))
    """
    s = _clean(s).strip("[](){}")
    if not s:
        return None
    compact = s.replace(" ", "")
    if aliases and len(compact) > 1 and all(ch.lower() in aliases and len(ch) == 1 for ch in compact):
        if not any(len(k) > 1 and k in compact.lower() for k in aliases if k.isalpha()):
            return tuple(aliases[ch.lower()] for ch in compact)
    parts = [p for p in _SPLIT.split(s) if p and p.strip("()[]{}\"'.` ")]
    return tuple(_token(p, aliases) for p in parts) or None


def parse_set(s: str, aliases: dict[str, str] | None = None) -> frozenset[str] | None:
    """Tokens as a set (``parse_sequence``), ``none`` / ``[]`` for the empty set.

    >>> sorted(parse_set("{3, 1} and 2.0"))
    ['1', '2', '3']
    """
    if _clean(s).lower() in _EMPTY:
        return frozenset()
    seq = parse_sequence(s, aliases)
    return None if seq is None else frozenset(seq)


_ROW_BRACKETS = re.compile(r"\[([^\[\]]*)\]")


@lru_cache(maxsize=1 << 16)  # golds repeat on every sample, answers within a group
def parse_grid(s: str, rows: int, cols: int) -> tuple[tuple[str, ...], ...] | None:
    """``rows × cols`` cells from newline- or ``;``-separated rows, cells split by spaces, commas or ``|`` (or one
    character each), or a nested list; None when the shape differs.

    >>> parse_grid("[[1, 2], [3, 4]]", 2, 2) == parse_grid("12\\n34", 2, 2) == parse_grid("1,2; 3,4", 2, 2)
    True
    """
    s = _clean(s, period=False)  # '.' is a cell in many boards
    lines = _ROW_BRACKETS.findall(s) if s.startswith("[") else re.split(r"\s*(?:\n|;|/)\s*", s)
    lines = [ln.strip(" |") for ln in lines if ln.strip(" |")]
    if len(lines) != rows:
        return None
    out = []
    for ln in lines:
        cells = [c for c in re.split(r"[\s,|]+", ln) if c]
        if len(cells) == 1 and len(cells[0]) == cols:
            cells = list(cells[0])
        if len(cells) != cols:
            return None
        out.append(tuple(_cell(c) for c in cells))
    return tuple(out)


# ---- multiple choice ----------------------------------------------------------------------------------------------
@lru_cache(maxsize=1 << 14)  # an entry's options are read for each of its G samples
def _option_texts(options: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(normalize_answer(o) for o in options)


@lru_cache(maxsize=64)
def labels(n: int, style: str = "letter") -> tuple[str, ...]:
    """Option labels: ``A, B, …`` or ``1, 2, …``."""
    return tuple(chr(65 + i) for i in range(n)) if style == "letter" else tuple(str(i + 1) for i in range(n))


def parse_choice(s: str, options: Sequence[str], style: str = "letter") -> str | None:
    """The label chosen: a bare label (any case, in brackets, followed by ``.`` ``)`` ``:`` and the option text),
    "option C", or the text of exactly one option; None for none or several.

    >>> opts = ["3", "5", "7", "9"]
    >>> tuple(parse_choice(a, opts) for a in ("c", "(C) 7", "Option C", "7", "A or C", "C. 9"))
    ('C', 'C', 'C', 'C', None, 'C')
    """
    labs = labels(len(options), style)
    s = _clean(s)
    upper = s.upper()
    if upper in labs:
        return upper
    norm = normalize_answer(s)
    texts = _option_texts(tuple(map(str, options)))
    if norm and texts.count(norm) == 1:
        return labs[texts.index(norm)]
    lab = "[A-Z]" if style == "letter" else r"\d+"
    flags = re.I if style == "letter" else 0
    m = re.match(rf"^(\()?({lab})(\))?([.:\]])?(?=\s|$)", s, flags)
    if m and m.group(2).upper() in labs:
        # "(C) …", "C) …", "C. …" name the label; a bare "A …" must not be followed by another label ("A or C")
        if m.group(1) or m.group(3) or m.group(4) or not set(re.findall(rf"\b({lab})\b", s[m.end() :])) & set(labs):
            return m.group(2).upper()
        return None
    found = {
        x.upper()
        for x in re.findall(rf"(?:\b(?:option|choice)\s*\(?({lab})\)?\b|\(({lab})\))", s, re.I)
        for x in x
        if x
    }
    found &= set(labs)
    return found.pop() if len(found) == 1 else None


# ---- one entry ------------------------------------------------------------------------------------------------------
Checker = Callable[[dict[str, Any], Any], bool]


def rule_decides(answer: str, gold: str, spec: dict[str, Any]) -> tuple[bool | None, Any]:
    """``(correct or None when no rule decides, what was parsed)`` for the extracted answer against ``gold``, or
    against any of ``spec["accept"]`` (other valid answers: every solution of an n-queens board)."""
    ok, parsed = _decide(answer, gold, spec)
    if ok is False and spec.get("accept") and spec.get("kind", "text") != "text":  # text reads accept itself
        if any(_decide(answer, str(alt), spec)[0] for alt in spec["accept"]):
            return True, parsed
    return ok, parsed


@lru_cache(maxsize=1 << 16)  # golds repeat on every sample
def _normalized(gold: str) -> str:
    return normalize_answer(gold)


def _decide(answer: str, gold: str, spec: dict[str, Any]) -> tuple[bool | None, Any]:
    kind = spec.get("kind", "text")
    aliases = spec.get("aliases")
    if kind == "choice":
        style = spec.get("style", "letter")
        got = parse_choice(answer, spec["options"], style)
        return (None if got is None else got == gold.strip().upper()), got
    if kind == "int":
        got = parse_int(answer)
        return (None if got is None else got == parse_int(gold)), got
    if kind == "number":
        return number_matches(answer, gold), answer
    if kind == "coord":
        dim = spec.get("dim", 2)
        got = parse_coord(answer, dim)
        return (None if got is None else got == parse_coord(gold, dim)), got
    if kind == "coords":
        dim = spec.get("dim", 2)
        got = parse_coords(answer, dim)
        return (None if got is None else got == parse_coords(gold, dim)), got
    if kind in ("set", "sequence"):
        parse = parse_set if kind == "set" else parse_sequence
        got = parse(answer, aliases)
        return (None if got is None else got == parse(gold, aliases)), got
    if kind == "grid":
        rows, cols = spec["rows"], spec["cols"]
        got = parse_grid(answer, rows, cols)
        return (None if got is None else got == parse_grid(gold, rows, cols)), got
    if kind == "text":
        norm = normalize_answer(_clean(answer))
        golds = [gold, *spec.get("accept", ())]
        return (True if any(norm == _normalized(str(g)) for g in golds) else None), norm
    raise ValueError(f"unknown answer kind {kind!r} (one of {', '.join(KINDS)})")


def verify(output: str, entry: dict[str, Any], checker: Checker | None = None) -> Verdict:
    """The rule verdict on a model's whole output for a dataset entry.

    Args:
        output: the model's whole output (the answer is extracted: ``<answer>``, ``\\boxed{}``, markers, last line).
        entry: a dataset entry, ``{"question", "answer", "metadata"}``; ``metadata["verify"]`` names the kind.
        checker: the game's ``check``, which decides answers that many values satisfy (found from
            ``metadata["game"]`` when None and the spec asks for it).

    Returns:
        The Verdict: score, the deciding path (``rule``, ``game``; ``none`` when no rule could decide: score 0
        unless a judge is asked, ``verify_batch``), where the answer was read, and what was parsed.

    >>> e = {"question": "…", "answer": "C", "metadata": {"verify": {"kind": "choice", "options": ["1", "2", "3"]}}}
    >>> verify("Counting gives 3. <answer>(C)</answer>", e)
    Verdict(score=1.0, path='rule', source='answer_tag', extracted='(C)', parsed='C')
    """
    return decide(*extract_for(output, entry), entry, checker)


_TEXT = {"kind": "text"}


def extract_for(output: str, entry: dict[str, Any]) -> tuple[str, str]:
    """``extract`` as ``verify`` runs it for ``entry``: a grid answer reads as many lines as the grid has rows."""
    spec = entry.get("metadata", {}).get("verify") or _TEXT
    lines = spec.get("rows", 1) if spec.get("kind") == "grid" else 1
    return extract(output if isinstance(output, str) else "", lines)


def decide(answer: str, source: str, entry: dict[str, Any], checker: Checker | None = None) -> Verdict:
    """``verify``'s verdict on an answer already extracted (``extract``; ``source``: where it was read).

    >>> e = {"question": "…", "answer": "(2, 3)", "metadata": {"verify": {"kind": "coord"}}}
    >>> decide("row 2, column 3", "last_line", e).score
    1.0
    """
    spec = entry.get("metadata", {}).get("verify") or _TEXT
    if spec.get("check"):
        from agentkit.gamerl.games import game_checker

        checker = checker or game_checker(entry)
        parsed = _parse_for_check(answer, spec)
        if parsed is None:
            return Verdict(0.0, "none", source, answer)
        return Verdict(float(bool(checker(entry, parsed))), "game", source, answer, parsed)
    if spec.get("kind") == "rg":  # reasoning-gym's own rule, on the answer extracted here
        rg_entry = {**entry, "metadata": {k: v for k, v in entry["metadata"].items() if k != "verify"}}
        return Verdict(float(rg_scorer(spec["dataset"])(answer, rg_entry)), "rule", source, answer)
    ok, parsed = rule_decides(answer, str(entry["answer"]), spec)
    if ok is None:
        return Verdict(0.0, "none", source, answer, parsed)
    return Verdict(float(ok), "rule", source, answer, parsed)


def _parse_for_check(answer: str, spec: dict[str, Any]) -> Any:
    kind = spec.get("kind")
    if kind == "sequence":
        return parse_sequence(answer, spec.get("aliases"))
    if kind in ("coord", "coords"):
        return (parse_coord if kind == "coord" else parse_coords)(answer, spec.get("dim", 2))
    if kind == "grid":
        return parse_grid(answer, spec["rows"], spec["cols"])
    if kind == "int":
        return parse_int(answer)
    if kind == "choice":
        return parse_choice(answer, spec["options"], spec.get("style", "letter"))
    return _clean(answer)


def reasoning_gym():
    """The ``reasoning_gym`` package (PyPI ``reasoning-gym``), or an error saying how to install it."""
    try:
        import reasoning_gym
    except ImportError as e:
        raise AgentkitError(
            "reasoning-gym is not installed", "pip install reasoning-gym (it is in the [dev] extra)"
        ) from e
    return reasoning_gym


@cache
def rg_scorer(name: str) -> Callable[[str, dict[str, Any]], float]:
    """reasoning-gym's own ``score_answer`` of its dataset ``name`` (the rule of the ``rg`` kind)."""
    return reasoning_gym().get_score_answer_fn(name)


def score_answer(answer: str | None, entry: dict[str, Any]) -> float:
    """reasoning-gym's ``score_answer``: the rule verdict's score.

    Args:
        answer: the model's output (None: no answer).
        entry: the dataset entry.

    Returns:
        1.0 when the rules accept the answer for the entry, else 0.0.

    >>> score_answer("The ant ends at row 2, column 3.", {"answer": "(2, 3)", "metadata": {"verify": {"kind": "coord"}}})
    1.0
    """
    return verify(answer or "", entry).score


# ---- the judge: only where no rule decides -----------------------------------------------------------------------
JUDGE_PROMPT = (
    "Decide whether a model's answer to a question is correct, given the reference answer.\n\n"
    "Question:\n{question}\n\nReference answer: {gold}\n\nModel answer: {answer}\n\n"
    "Is the model answer correct? Reply Yes or No."
)


class Judge:
    """Game-RL's judge ("Correctness: Yes/No"), on any Engine, greedy and constrained to ``Yes`` / ``No`` (an
    engine without structured outputs is read for a leading yes / no). It sees the extracted answer only."""

    def __init__(self, engine: Any, max_tokens: int = 4):
        self.engine, self.max_tokens = engine, max_tokens

    def __call__(self, items: Sequence[tuple[str, str, str]]) -> list[bool | None]:
        """``(question, gold, answer)`` triples → True / False, or None where the call failed or the reply is
        neither yes nor no."""
        from agentkit.engines.base import SamplingParams
        from agentkit.engines.structured import Constraint

        if not items:
            return []
        prompts = [
            [{"role": "user", "content": JUDGE_PROMPT.format(question=q, gold=g, answer=a)}] for q, g, a in items
        ]
        params = SamplingParams(temperature=0, max_tokens=self.max_tokens, constraint=Constraint(choice=("Yes", "No")))
        try:
            outs = self.engine.generate(prompts, params)
        except Exception:  # a judge that fails leaves the sample undecided; the rule verdicts stand
            return [None] * len(items)
        replies = [o[0].text.strip().lower() for o in outs]
        return [True if r.startswith("yes") else False if r.startswith("no") else None for r in replies]


def verify_batch(
    outputs: Sequence[str], entries: Sequence[dict[str, Any]], judge: Judge | None = None
) -> list[Verdict]:
    """``verify`` for each output, then one batched judge call for those no rule decided (path ``judge``; a
    judge that cannot answer leaves them at path ``none``, score 0)."""
    verdicts = [verify(o, e) for o, e in zip(outputs, entries, strict=True)]
    undecided = [i for i, v in enumerate(verdicts) if v.path == "none" and v.extracted]
    if judge is None or not undecided:
        return verdicts
    said = judge([(entries[i]["question"], str(entries[i]["answer"]), verdicts[i].extracted) for i in undecided])
    for i, ok in zip(undecided, said):
        if ok is not None:
            v = verdicts[i]
            verdicts[i] = Verdict(float(ok), "judge", v.source, v.extracted, v.parsed)
    return verdicts


def path_counts(verdicts: Sequence[Verdict]) -> dict[str, int]:
    """How many verdicts each path decided (the per-run log of who decided)."""
    out = dict.fromkeys(("rule", "game", "judge", "none"), 0)
    for v in verdicts:
        out[v.path] += 1
    return out


def clear_caches() -> None:
    """Forget memoised parses and solver results (benchmarks time from cold)."""
    from agentkit.gamerl.games.base import _solved

    for f in (parse_int, parse_coord, parse_coords, parse_grid, _one_number, _solved, _normalized, _option_texts):
        f.cache_clear()
