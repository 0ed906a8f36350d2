"""Every figure of the README's Methods table comes from a committed run: ``docs/results/claims.yaml`` names, for each
figure of each row, the run file and the key it is read from, and this test reads it there. A figure the row shows
that the index does not claim, or a claim its file does not bear out, fails; so does a row the index does not know.
Rows whose runs are still to be made are listed under ``pending`` with the reason (the issue that re-runs them)."""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
CLAIMS = yaml.safe_load((RESULTS / "claims.yaml").read_text())

# a figure: a number with a decimal point, a fraction n/m, or a number followed by % or × (not a size such as 3×3)
FIGURE = re.compile(r"(?<![\w.])[−+-]?\d[\d,]*(?:\.\d+)?(?:\s?%|×(?!\d)|/\d+)?(?![\w])")
NUMBER = re.compile(r"[−+-]?\d+(?:\.\d+)?")


def norm(s: str) -> str:
    return s.replace("−", "-").replace(",", "").replace(" %", "%").replace("\u202f", "").strip()


def figures(text: str) -> set[str]:
    found = set()
    for m in FIGURE.finditer(text):
        n = norm(m.group(0))
        if "." in n or n.endswith(("%", "×")) or "/" in n:
            found.add(n)
    return found


def readme_rows() -> dict[str, str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("| method | status | measured here |")
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[2]
    return rows


def target(figure: str) -> tuple[float, int]:
    """The figure's value and decimals (a fraction n/m: n)."""
    n = norm(figure).rstrip("%×")
    n = n.split("/")[0]
    return float(n), len(n.partition(".")[2])


def agrees(value: float, figure: str, scale: float = 1.0) -> bool:
    want, decimals = target(figure)
    return abs(value * scale - want) <= 0.5 * 10**-decimals + 1e-9


def lookup(path: Path, key: str, col: int | None = None, nth: int = 0):
    """A .jsonl record key (its last record that has it); a dotted path of a .json or .yaml; for a .md, every
    number on the lines that hold ``key`` (``col``: the col-th number of the nth such line, both 0-based, the
    numbers of ``key`` itself not counted)."""
    if path.suffix == ".jsonl":
        value = None
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if key in rec:
                value = rec[key]
        return value
    if path.suffix == ".md":
        lines = [line for line in path.read_text().splitlines() if key in line]
        numbers = [[float(x) for x in NUMBER.findall(norm(line.replace(key, " ", 1)))] for line in lines]
        if col is not None:
            return numbers[nth][col] if len(numbers) > nth and len(numbers[nth]) > col else None
        return [x for row in numbers for x in row]
    return dig(json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text()), key)


def dig(obj, key: str):
    """``a.b[2].c`` into nested dicts and lists."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        obj = obj[int(part[1:-1])] if part.startswith("[") else obj[part]
    return obj


def resolve(claim: dict) -> list[float]:
    path = RESULTS / claim["file"]
    assert path.is_file(), f"{claim['file']}: no such run file"
    if "of" in claim:
        xs = [
            lookup(path, k) if isinstance(k, str) else lookup(path, k["key"], k.get("col"), k.get("nth", 0))
            for k in claim["of"]
        ]
        assert all(isinstance(x, (int, float)) for x in xs), f"{claim['file']}: {claim['of']} gave {xs}"
        xs = [float(x) for x in xs]
        if claim["op"] == "mean":
            return [sum(xs) / len(xs)]
        if claim["op"] == "complement":  # e.g. the share of seeds that did not diverge
            return [1 - xs[0]]
        a, b = xs
        return [{"ratio": a / b, "diff": a - b, "drop": 1 - a / b}[claim["op"]]]
    if "each" in claim:  # a dotted path in every record of a .jsonl (one per seed): the mean over the records of
        # the mean of the list's last ``tail`` share (a training curve's end)
        ends = []
        for line in path.read_text().splitlines():
            xs = dig(json.loads(line), claim["each"])
            n = max(1, round(len(xs) * claim["tail"]))
            ends.append(sum(xs[-n:]) / n)
        return [sum(ends) / len(ends)]
    value = lookup(path, claim["key"], claim.get("col"), claim.get("nth", 0))
    assert value is not None, f"{claim['file']}: no {claim['key']!r}"
    values = value if isinstance(value, list) else [value]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]


ROWS = readme_rows()


def test_every_row_is_claimed_or_pending():
    known = set(CLAIMS["rows"]) | set(CLAIMS.get("pending", {}))
    assert set(ROWS) <= known, f"README rows without claims: {sorted(set(ROWS) - known)}"
    assert known <= set(ROWS), f"claims for rows the README does not have: {sorted(known - set(ROWS))}"
    assert not set(CLAIMS["rows"]) & set(CLAIMS.get("pending", {}))


@pytest.mark.parametrize("row", sorted(CLAIMS["rows"]))
def test_each_figure_of_a_row_is_in_its_run_files(row):
    text = ROWS[row]
    claims = CLAIMS["rows"][row]
    claimed = {norm(c["figure"]) for c in claims}
    missing = figures(text) - claimed
    assert not missing, f"{row}: figures the index does not claim: {sorted(missing)}"
    for c in claims:
        assert norm(c["figure"]) in norm(text), f"{row}: {c['figure']} is not in the row"
        if "not_a_result" in c or "pending" in c:  # a version number; a figure whose run is still to be made
            continue
        values = resolve(c)
        if c.get("invert"):  # "1/29": the value is a share, the figure its reciprocal's denominator
            values, figure = [1 / v for v in values if v], c["figure"].split("/")[1]
        else:
            figure = c["figure"]
        scale = c.get("scale", 1.0)
        assert any(agrees(v, figure, scale) for v in values), (
            f"{row}: {c['figure']} is not what {c['file']} says at {c.get('key') or c.get('of')}: {values[:6]}"
        )


def test_the_figure_pattern():
    assert figures("0.833 vs 0.831, 175× and 41 % less, 0/32 to 26/32, 3×3×5, 3 seeds") == {
        "0.833",
        "0.831",
        "175×",
        "41%",
        "0/32",
        "26/32",
    }
