"""Answer extraction and scoring: exact match, token F1 (SQuAD normalisation), numeric-answer match."""

from __future__ import annotations

import re
import string
from collections import Counter

_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def extract_answer(text: str) -> str:
    r"""The final answer of a model's output: ``\boxed{…}``, ``<answer>…</answer>``, "answer is …", else the text.

    >>> extract_answer(r"so the result is \boxed{42}.")
    '42'
    >>> extract_answer("<answer>Paris</answer>")
    'Paris'
    """
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    m = re.findall(r"<answer>(.*?)</answer>", text, flags=re.S)
    if m:
        inner = m[-1]
        return (last_boxed(inner) or inner).strip()
    m = re.findall(r"answer is[:\s]*([^\n]+)", text, flags=re.I)
    if m:
        return m[-1].strip().rstrip(".")
    return text.strip()


_BRACE = re.compile(r"[{}]")


def last_boxed(text: str) -> str | None:
    r"""The contents of the last ``\boxed{…}`` (braces balanced), or None.

    >>> last_boxed(r"\boxed{1} then \boxed{\frac{1}{2}} and"), last_boxed(r"\boxed{open")
    ('\\frac{1}{2}', None)
    """
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i, depth = start + len("\\boxed{"), 1
    for m in _BRACE.finditer(text, i):
        depth += 1 if m.group() == "{" else -1
        if depth == 0:
            return text[i : m.start()]
    return None


_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """Lower-case, drop punctuation, articles and extra whitespace (SQuAD).

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    return " ".join(_ARTICLES.sub(" ", s.lower().translate(_PUNCTUATION)).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal.

    >>> exact_match("the Paris", "paris")
    1.0
    """
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall after normalisation.

    >>> round(token_f1("Velmira Oskaro Tan", "Velmira Oskaro"), 3)
    0.8
    """
    p, g = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or common == 0:
        return float(p == g)
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def parse_number(text: str) -> float | None:
    """The last number in ``text`` (commas as thousands separators allowed).

    >>> parse_number("so 17 × 23 = 391.")
    391.0
    >>> parse_number("x = -1,204") is None
    False
    """
    nums = _NUM.findall(text)
    if not nums:
        return None
    try:
        return float(nums[-1].replace(",", ""))
    except ValueError:
        return None


def numeric_match(prediction: str, gold: str, rel_tol: float = 1e-6) -> float:
    """1.0 when the last number of the extracted answer equals the gold number.

    >>> numeric_match(r"The answer is \\boxed{20,126}", "20126")
    1.0
    >>> numeric_match("17*23 = 381", "391")
    0.0
    """
    p, g = parse_number(extract_answer(prediction)), parse_number(gold)
    if p is None or g is None:
        return 0.0
    return float(abs(p - g) <= rel_tol * max(1.0, abs(g)))


def value_match(prediction: str, gold: str) -> float:
    """1.0 when the answer's last number, rounded to as many decimals as the gold's, equals the gold's: the value
    right whatever the format (the units suite's answers are exact strings; this is their number alone).

    >>> value_match("19.312128", "19.31 km"), value_match("19.3 kilometres", "19.31 km"), value_match("-", "1")
    (1.0, 0.0, 0.0)
    """
    p, g = parse_number(extract_answer(prediction)), parse_number(gold)
    if p is None or g is None:
        return 0.0
    nums = _NUM.findall(gold)
    decimals = len(nums[-1].partition(".")[2]) if nums else 0
    return float(round(p, decimals) == g)


def score_task(metric: str, prediction: str, gold: str) -> dict[str, float]:
    """Scores for one prediction by the task's metric: ``{"correct": …}`` plus ``em``/``f1`` for text answers."""
    if metric == "numeric":
        return {"correct": numeric_match(prediction, gold)}
    if metric == "exact":  # the whole answer, as written (spacing aside): the units suite's house style
        return {"correct": float(" ".join(extract_answer(prediction).split()) == " ".join(gold.split()))}
    if metric == "em_f1":
        ans = extract_answer(prediction)
        em = exact_match(ans, gold)
        return {"correct": em, "em": em, "f1": token_f1(ans, gold)}
    raise ValueError(f"unknown metric {metric!r} (numeric, em_f1 or exact)")


# ---- tool-use efficiency (Tool-Light, arXiv 2509.23285; official evaluation/calculate_metrics.py) -------------
def efficiency(correct: list[float], calls: list[int], zero_calls: str = "as_one") -> float:
    """Mean over samples of ``correct / #tool calls``: accuracy bought per call.

    ``zero_calls`` follows the official code: ``"as_one"`` (its QA setting: a sample without calls counts as one
    call) or ``"skip"`` (its math setting: samples without calls are left out).

    >>> efficiency([1, 1, 0, 1], [1, 2, 3, 0])
    0.625
    >>> efficiency([1, 1, 0, 1], [1, 2, 3, 0], zero_calls="skip")
    0.5
    """
    if zero_calls not in ("as_one", "skip"):
        raise ValueError(f"zero_calls must be 'as_one' or 'skip', not {zero_calls!r}")
    pairs = [(c, n) for c, n in zip(correct, calls) if n > 0 or zero_calls == "as_one"]
    return sum(c / max(n, 1) for c, n in pairs) / len(pairs) if pairs else float("nan")


def necessity(results: dict[str, dict[str, tuple[float, int]]]) -> dict[str, dict[str, float]]:
    """Tool-call necessity of each method against the others on the same questions.

    ``results[method][question] = (correct, tool calls)``. A correct answer of method m to question q scores +1
    for each other method that was wrong on q with fewer calls (m's calls were needed) and −1 for each other
    method that was right on q with fewer calls (they were not). ``raw`` is the sum over questions divided by
    the number of questions; ``normalised`` is min–max scaled across the methods, so it **depends on the pool of
    methods compared** (all 1.0 when every raw score is equal). Questions missing from a method are skipped.

    >>> r = necessity({"a": {"q": (1, 2)}, "b": {"q": (0, 1)}, "c": {"q": (1, 0)}, "d": {"q": (1, 3)}})
    >>> [r[m]["raw"] for m in "abcd"], [r[m]["normalised"] for m in "abcd"]
    ([0.0, 0.0, 0.0, -1.0], [1.0, 1.0, 1.0, 0.0])
    """
    methods = list(results)
    raw = {}
    for m in methods:
        total = 0.0
        for q, (ok, calls) in results[m].items():
            if not ok:
                continue
            for o in methods:
                if o != m and q in results[o] and results[o][q][1] < calls:
                    total += -1.0 if results[o][q][0] else 1.0
        raw[m] = total / max(len(results[m]), 1)
    lo, hi = min(raw.values()), max(raw.values())
    return {m: {"raw": raw[m], "normalised": 1.0 if hi == lo else (raw[m] - lo) / (hi - lo)} for m in methods}
