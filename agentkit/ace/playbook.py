"""The ACE playbook (arXiv 2510.04618): itemised strategies in sections, each bullet with stable id and counters.

The paper's text format (what the generator reads; ``playbook_utils.py`` of ``ace-agent/ace``)::

    ## STRATEGIES & INSIGHTS
    [str-00001] helpful=3 harmful=0 :: Multiply before you add.

    ## COMMON MISTAKES TO AVOID
    [err-00002] helpful=0 harmful=1 :: ...

Sections are separated by one blank line; a bullet is one line (content whitespace is collapsed to single
spaces when a bullet is written, so the line format always holds). ``from_text(to_text(p))`` keeps sections,
ids, order, helpful / harmful and content; the fields the text format has no room for (``neutral``, ``used``,
timestamps) live in the JSON form, which is lossless (``to_json`` / ``from_json``, byte-stable: saving the same
playbook twice gives the same bytes, which the delta log's replay check relies on).

A new bullet's id is ``{slug}-{n:05d}`` with n one more than the largest number in use (global, as the
official code), so ids never repeat within a playbook's history (``next_id`` only grows).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from agentkit.errors import AgentkitError

FORMAT = "agentkit.ace.playbook/1"
SECTIONS = (
    "STRATEGIES & INSIGHTS",
    "FORMULAS & CALCULATIONS",
    "CODE SNIPPETS & TEMPLATES",
    "COMMON MISTAKES TO AVOID",
    "PROBLEM-SOLVING HEURISTICS",
    "CONTEXT CLUES & INDICATORS",
    "OTHERS",
)
OTHERS = "OTHERS"
_SLUGS = {
    "strategies_and_insights": "str",
    "formulas_and_calculations": "calc",
    "code_snippets_and_templates": "code",
    "common_mistakes_to_avoid": "err",
    "problem_solving_heuristics": "prob",
    "context_clues_and_indicators": "ctx",
    "others": "misc",
}
# the official parser's pattern, anchored at both ends so a line is all bullet or none
BULLET_LINE = re.compile(r"\[([^\]\s]+)\]\s*helpful=(\d+)\s*harmful=(\d+)\s*::\s*(.*)$")
_ID_NUMBER = re.compile(r"-(\d+)$")
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


def section_key(name: str) -> str:
    """The section's match key: ``"Common mistakes to avoid"``, ``"common_mistakes_to_avoid"`` and
    ``"COMMON MISTAKES TO AVOID"`` name the same section (curators write any of them).

    >>> section_key("PROBLEM-SOLVING HEURISTICS")
    'problem_solving_heuristics'
    """
    s = name.strip().lower().replace("&", " and ")
    return "_".join(re.findall(r"[a-z0-9]+", s))


def section_slug(name: str) -> str:
    """The id prefix of a section: the official short names, else the initials of its words.

    >>> section_slug("COMMON MISTAKES TO AVOID"), section_slug("Unit conversions")
    ('err', 'uc')
    """
    key = section_key(name)
    if key in _SLUGS:
        return _SLUGS[key]
    words = key.split("_")
    return words[0][:4] if len(words) == 1 else "".join(w[0] for w in words[:5])


def clean_content(text: str) -> str:
    """A bullet's content on one line: runs of whitespace (newlines included) become one space."""
    return " ".join(str(text).split())


@lru_cache(maxsize=1 << 17)  # ids are sorted by it on every refinement
def id_number(bullet_id: str) -> int:
    """The number at the end of an id (``str-00012`` → 12); 0 for ids without one."""
    m = _ID_NUMBER.search(bullet_id)
    return int(m.group(1)) if m else 0


@dataclass
class Bullet:
    """One strategy. ``helpful`` / ``harmful`` / ``neutral``: the reflector's tags; ``used``: how often the
    generator cited it; ``created`` / ``updated``: the playbook version (delta-log entry) that wrote it."""

    id: str
    section: str
    content: str
    helpful: int = 0
    harmful: int = 0
    neutral: int = 0
    used: int = 0
    created: int = 0
    updated: int = 0

    @property
    def problematic(self) -> bool:
        """The official rule: harmful at least as often as helpful, and harmful at least once."""
        return self.harmful >= self.helpful and self.harmful > 0

    @property
    def high_performing(self) -> bool:
        return self.helpful > 5 and self.harmful < 2

    @property
    def unused(self) -> bool:
        """Never cited and never tagged."""
        return self.used == 0 and self.helpful + self.harmful + self.neutral == 0

    def line(self) -> str:
        return f"[{self.id}] helpful={self.helpful} harmful={self.harmful} :: {self.content}"


@dataclass
class Playbook:
    """Sections in order, each a list of bullets in insertion order. ``version``: delta-log entries applied;
    ``next_id``: the number the next new bullet gets."""

    sections: list[str] = field(default_factory=lambda: list(SECTIONS))
    bullets: dict[str, Bullet] = field(default_factory=dict)  # id -> bullet, in playbook order
    next_id: int = 1
    version: int = 0

    def __len__(self) -> int:
        return len(self.bullets)

    def find_section(self, name: str) -> str | None:
        """The playbook's own spelling of section ``name`` (any casing / separators), or None."""
        key = section_key(name)
        return next((s for s in self.sections if section_key(s) == key), None)

    def in_section(self, section: str) -> list[Bullet]:
        return [b for b in self.bullets.values() if b.section == section]

    def ordered(self) -> list[Bullet]:
        """Bullets in rendering order: by section, then insertion."""
        rank = {s: i for i, s in enumerate(self.sections)}
        return sorted(self.bullets.values(), key=lambda b: rank[b.section])  # stable: keeps insertion order

    def new_id(self, section: str) -> str:
        bullet_id = f"{section_slug(section)}-{self.next_id:05d}"
        self.next_id += 1
        return bullet_id

    # --- the paper's text format -------------------------------------------------------------------------
    def to_text(self, ids: set[str] | None = None) -> str:
        """The playbook as the generator reads it (only bullets in ``ids`` when given, e.g. retrieved ones)."""
        parts = []
        for s in self.sections:
            lines = [b.line() for b in self.in_section(s) if ids is None or b.id in ids]
            parts.append("\n".join([f"## {s}", *lines]))
        return "\n\n".join(parts)

    @classmethod
    def from_text(cls, text: str, where: str = "playbook") -> Playbook:
        """Parse the text format; a line that is neither a ``## section``, a bullet nor blank is an error naming
        its line. Bullets before any section go to OTHERS."""
        pb = cls(sections=[], next_id=1)
        current = None
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line:
                continue
            if line.startswith("##"):
                current = line[2:].strip()
                if not current:
                    raise AgentkitError(f"{where}:{n}: a section header without a name")
                if current not in pb.sections:
                    pb.sections.append(current)
                continue
            m = BULLET_LINE.match(line)
            if not m:
                raise AgentkitError(
                    f"{where}:{n}: not a section header or a bullet: {line[:60]!r}",
                    "bullets look like '[str-00001] helpful=0 harmful=0 :: text'",
                )
            bullet_id, helpful, harmful, content = m.groups()
            if bullet_id in pb.bullets:
                raise AgentkitError(f"{where}:{n}: bullet id {bullet_id} appears twice")
            if current is None:
                current = OTHERS
                pb.sections.append(OTHERS)
            pb.bullets[bullet_id] = Bullet(bullet_id, current, clean_content(content), int(helpful), int(harmful))
        pb.next_id = max((id_number(i) for i in pb.bullets), default=0) + 1
        return pb

    # --- JSON (lossless) ---------------------------------------------------------------------------------
    def to_dict_head(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": self.version, "next_id": self.next_id, "sections": list(self.sections)}

    def to_dict(self) -> dict[str, Any]:
        return {**self.to_dict_head(), "bullets": [dict(vars(b)) for b in self.ordered()]}

    def copy(self) -> Playbook:
        """A copy sharing the bullets: ``apply_batch`` replaces a bullet it changes instead of mutating it, so a
        committed playbook's bullets never change and copies of it cost one dict."""
        return Playbook(list(self.sections), dict(self.bullets), self.next_id, self.version)

    def to_json(self, lines: dict[int, tuple[Bullet, str]] | None = None) -> str:
        """The JSON form, one bullet per line (readable, diffable; json's C encoder does each line, where
        ``indent=`` would fall back to its pure-Python encoder: 20× slower on a 10,000-bullet playbook).

        ``lines``: a cache of each bullet object's line, kept by the caller across versions (``PlaybookStore``):
        bullets are never mutated once in a playbook (``copy``), so a version re-encodes only the bullets its
        batch replaced. The cache is left holding this version's bullets only."""
        lines = {} if lines is None else lines
        fresh: dict[int, tuple[Bullet, str]] = {}
        for b in self.ordered():
            hit = lines.get(id(b))
            fresh[id(b)] = hit if hit is not None and hit[0] is b else (b, _ENCODE(vars(b)))
        lines.clear()
        lines.update(fresh)
        bullets = ",\n  ".join(line for _, line in fresh.values())
        body = json.dumps(self.to_dict_head(), ensure_ascii=False)[:-1]
        return f'{body}, "bullets": [\n  {bullets}\n]}}\n' if bullets else f'{body}, "bullets": []}}\n'

    @classmethod
    def from_dict(cls, d: Any, where: str = "playbook") -> Playbook:
        """A playbook from its JSON form; a wrong or missing field is one error naming it."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise AgentkitError(f"{where}: not an agentkit playbook (field 'format' is not {FORMAT!r})")
        for key, kind in (("version", int), ("next_id", int), ("sections", list), ("bullets", list)):
            if not isinstance(d.get(key), kind):
                raise AgentkitError(f"{where}: field {key!r} must be a {kind.__name__}")
        pb = cls(sections=[str(s) for s in d["sections"]], next_id=d["next_id"], version=d["version"])
        names = {f.name for f in fields(Bullet)}
        for i, b in enumerate(d["bullets"]):
            if not isinstance(b, dict) or not {"id", "section", "content"} <= b.keys() or b.keys() - names:
                raise AgentkitError(f"{where}: bullets[{i}] needs id, section, content and only Bullet's fields")
            bullet = Bullet(**b)
            if bullet.section not in pb.sections:
                raise AgentkitError(f"{where}: bullets[{i}]: section {bullet.section!r} is not in 'sections'")
            pb.bullets[bullet.id] = bullet
        return pb

    @classmethod
    def from_json(cls, text: str, where: str = "playbook") -> Playbook:
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise AgentkitError(f"{where}: not valid JSON ({e.msg}, line {e.lineno})") from None
        return cls.from_dict(d, where)

    @classmethod
    def load(cls, path: str | Path) -> Playbook:
        """A playbook file: JSON (``.json``, lossless) or the text format (anything else)."""
        path = Path(path)
        if not path.is_file():
            raise AgentkitError(f"{path} does not exist", "give a playbook .json file or one in the text format")
        text = path.read_text(encoding="utf-8")
        return cls.from_json(text, str(path)) if path.suffix == ".json" else cls.from_text(text, str(path))

    def stats(self) -> dict[str, Any]:
        """The counts the curator prompt shows (the official ``get_playbook_stats``)."""
        bs = list(self.bullets.values())
        return {
            "bullets": len(bs),
            "high_performing": sum(b.high_performing for b in bs),
            "problematic": sum(b.problematic for b in bs),
            "unused": sum(b.unused for b in bs),
            "by_section": {s: len(self.in_section(s)) for s in self.sections},
        }
