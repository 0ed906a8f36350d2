"""Delta operations on a playbook, merged deterministically without a model call (ACE §3.1, "incremental delta
updates"; the official curator applies only ADD).

Operations (what a curator, the reflector's tags, de-duplication and eviction propose):

=========  ==========================  =================================================================
``ADD``    section, content            a new bullet (an unknown section goes to OTHERS, as officially)
``UPDATE`` id, content                 rewrite a bullet
``TAG``    id, tag, count=1            helpful / harmful / neutral (reflector), used (generator cited it)
``MERGE``  ids (≥ 2), content          one bullet replaces several: the oldest id survives with the
                                        summed counters, the others go
``REMOVE`` id                          drop a bullet
=========  ==========================  =================================================================

**Conflict rules for the deltas of one batch.** A batch is resolved as a set, so the order in which its deltas
arrive (which sample's curator answered first) never changes the result:

1. A delta naming a bullet that did not exist before the batch is rejected (``unknown bullet``).
2. REMOVE wins: a removed bullet leaves every MERGE group, and UPDATEs and TAGs of it are rejected.
3. MERGE groups that share a bullet are joined (connected components); the survivor is the oldest bullet (lowest
   id number), its content the smallest of the groups' contents in code-point order; a group left with one
   bullet is an UPDATE of it. Counters of merged bullets are added to the survivor, and TAGs of them go to it.
4. An UPDATE of a merged bullet is rejected (the merge rewrote it); of several UPDATEs of one bullet the one
   with the smallest content in code-point order wins, the others are rejected (``conflict``).
5. ADDs are taken in (section order, content) order and get ids in that order; an ADD whose content (case and
   whitespace ignored) a bullet of its section already has, after the batch's rewrites, is rejected.

``apply_batch`` returns the *resolved* deltas (ADDs carry their new ids, TAGs are summed per bullet and tag,
MERGEs name their survivor first); applying those to the same playbook gives the same result, which is what the
delta log stores and replays.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal

from agentkit.ace.playbook import OTHERS, Bullet, Playbook, clean_content, id_number

Op = Literal["ADD", "UPDATE", "TAG", "MERGE", "REMOVE"]
OPS: tuple[str, ...] = ("ADD", "UPDATE", "TAG", "MERGE", "REMOVE")
TAGS: tuple[str, ...] = ("helpful", "harmful", "neutral", "used")


@dataclass(frozen=True)
class Delta:
    """One operation; which fields it needs depends on ``op`` (see the module docstring)."""

    op: Op
    id: str | None = None
    ids: tuple[str, ...] = ()
    section: str | None = None
    content: str | None = None
    tag: str | None = None
    count: int = 1

    def __post_init__(self) -> None:  # the content a bullet will hold, so the log replays to the same playbook
        if self.content is not None:
            object.__setattr__(self, "content", clean_content(self.content))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op}
        for key in ("id", "section", "content", "tag"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        if self.ids:
            d["ids"] = list(self.ids)
        if self.op == "TAG" and self.count != 1:
            d["count"] = self.count
        return d

    @classmethod
    def parse(cls, d: Any, resolved: bool = False) -> Delta:
        """A delta from JSON, as a model or the log writes it: ``op`` or ``type`` (any case), ``id`` or
        ``bullet_id``, ``ids`` or ``source_ids`` / ``bullet_ids``. An ADD's id is kept only from the log
        (``resolved``): the playbook numbers new bullets, not the model. Raises ``ValueError`` saying what is
        wrong."""
        if not isinstance(d, dict):
            raise ValueError(f"an operation must be an object, got {type(d).__name__}")
        op = str(d.get("op") or d.get("type") or "").upper()
        if op == "DELETE":
            op = "REMOVE"
        if op not in OPS:
            raise ValueError(f"unknown operation {op or None!r}; one of {', '.join(OPS)}")
        bullet_id = d.get("id") or d.get("bullet_id")
        ids = d.get("ids") or d.get("source_ids") or d.get("bullet_ids") or ()
        content = clean_content(d["content"]) if d.get("content") is not None else None
        tag = str(d["tag"]).lower() if d.get("tag") is not None else None
        count = d.get("count", 1)
        if op in ("UPDATE", "TAG", "REMOVE") and not isinstance(bullet_id, str):
            raise ValueError(f"{op} needs the bullet's id")
        if op in ("ADD", "UPDATE", "MERGE") and not content:
            raise ValueError(f"{op} needs a non-empty content")
        if op == "MERGE" and (not isinstance(ids, (list, tuple)) or len(set(ids)) < 2):
            raise ValueError("MERGE needs ids: two or more different bullet ids")
        if op == "TAG" and tag not in TAGS:
            raise ValueError(f"TAG needs tag, one of {', '.join(TAGS)}")
        if op == "TAG" and (not isinstance(count, int) or count < 1):
            raise ValueError("TAG's count must be a positive integer")
        return cls(
            op,  # type: ignore[arg-type]
            bullet_id if op != "ADD" or resolved else None,
            tuple(str(i) for i in ids) if op == "MERGE" else (),
            str(d.get("section") or OTHERS) if op == "ADD" else None,
            content,
            tag if op == "TAG" else None,
            count if op == "TAG" else 1,
        )


@dataclass
class BatchResult:
    """``applied``: the resolved deltas (what the log stores); ``rejected``: (delta, reason) for the others;
    ``added``: ids of the new bullets."""

    applied: list[Delta] = field(default_factory=list)
    rejected: list[tuple[Delta, str]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.applied)


@lru_cache(maxsize=1 << 17)  # every batch with an ADD reads all bullets
def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _merge_groups(merges: list[Delta], removed: set[str]) -> list[tuple[list[str], str]]:
    """Connected components of the MERGE groups (removed bullets taken out): (members oldest first, content)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    contents: dict[str, list[str]] = defaultdict(list)
    for m in merges:
        live = [i for i in m.ids if i not in removed]
        for i in live:
            find(i)
        for a, b in zip(live, live[1:]):
            parent[find(a)] = find(b)
        if live:
            contents[live[0]].append(m.content or "")
    groups: dict[str, list[str]] = defaultdict(list)
    for i in parent:
        groups[find(i)].append(i)
    texts: dict[str, list[str]] = defaultdict(list)
    for first, cs in contents.items():
        texts[find(first)].extend(cs)
    return [
        (sorted(members, key=lambda i: (id_number(i), i)), min(texts[root]))
        for root, members in sorted(groups.items(), key=lambda kv: min((id_number(i), i) for i in kv[1]))
    ]


def apply_batch(pb: Playbook, deltas: list[Delta]) -> BatchResult:
    """Apply one batch of deltas to ``pb`` under the conflict rules above; the version goes up by one when
    anything changed (new and rewritten bullets record it in ``created`` / ``updated``). A changed bullet is
    replaced by a changed copy, never mutated, so a ``Playbook.copy`` sharing the bullets is not touched."""
    res = BatchResult()
    version = pb.version + 1
    known = set(pb.bullets)
    valid: list[Delta] = []
    for d in deltas:
        refs = [d.id] if d.op in ("UPDATE", "TAG", "REMOVE") else list(d.ids)
        missing = [i for i in refs if i not in known]
        if missing:
            res.rejected.append((d, f"unknown bullet {missing[0]}"))
        else:
            valid.append(d)

    removed = {d.id for d in valid if d.op == "REMOVE"}
    groups = _merge_groups([d for d in valid if d.op == "MERGE"], removed)
    survivor = {i: members[0] for members, _ in groups for i in members}
    updates: dict[str, list[Delta]] = defaultdict(list)
    tags: dict[tuple[str, str], int] = defaultdict(int)
    for d in valid:
        if d.op in ("UPDATE", "TAG") and d.id in removed:
            res.rejected.append((d, f"conflict: {d.id} is removed in this batch"))
        elif d.op == "UPDATE" and d.id in survivor:
            res.rejected.append((d, f"conflict: {d.id} is merged in this batch"))
        elif d.op == "UPDATE":
            updates[d.id].append(d)  # type: ignore[index]
        elif d.op == "TAG":
            tags[(survivor.get(d.id, d.id), d.tag)] += d.count  # type: ignore[arg-type]
        elif d.op == "MERGE" and not [i for i in d.ids if i not in removed]:
            res.rejected.append((d, "conflict: every bullet of the merge is removed in this batch"))

    owned: set[str] = set()

    def own(bid: str) -> Bullet:
        """The bullet to change: a copy the first time (``Playbook.copy`` shares bullets; none is mutated)."""
        if bid not in owned:
            pb.bullets[bid] = replace(pb.bullets[bid])
            owned.add(bid)
        return pb.bullets[bid]

    for (bid, tag), count in sorted(tags.items()):
        b = own(bid)
        setattr(b, tag, getattr(b, tag) + count)
        res.applied.append(Delta("TAG", id=bid, tag=tag, count=count))
    for bid in sorted(updates, key=lambda i: (id_number(i), i)):
        win, *lose = sorted(updates[bid], key=lambda d: d.content or "")
        res.rejected.extend((d, f"conflict: another UPDATE of {bid} in this batch wins") for d in lose)
        if _rewrite(own(bid), win.content or "", version):
            res.applied.append(Delta("UPDATE", id=bid, content=win.content))
    for members, content in groups:
        keep = own(members[0])
        for other in members[1:]:
            b = pb.bullets.pop(other)
            for counter in TAGS:
                setattr(keep, counter, getattr(keep, counter) + getattr(b, counter))
        if len(members) > 1:
            _rewrite(keep, content, version)
            res.applied.append(Delta("MERGE", ids=tuple(members), content=content))
        elif _rewrite(keep, content, version):
            res.applied.append(Delta("UPDATE", id=members[0], content=content))
    for bid in sorted(removed, key=lambda i: (id_number(i), i)):
        del pb.bullets[bid]
        res.applied.append(Delta("REMOVE", id=bid))
    _add(pb, [d for d in valid if d.op == "ADD"], version, res)
    res.applied.sort(key=_applied_order)  # a merge left with one bullet is an UPDATE: list it with them
    if res.applied:
        pb.version = version
    return res


_PHASE = {"TAG": 0, "UPDATE": 1, "MERGE": 2, "REMOVE": 3, "ADD": 4}


def _applied_order(d: Delta) -> tuple:
    first = d.id or d.ids[0]
    return _PHASE[d.op], id_number(first), first, d.tag or ""


def _rewrite(b: Bullet, content: str, version: int) -> bool:
    if b.content == content:
        return False
    b.content, b.updated = content, version
    return True


def _add(pb: Playbook, adds: list[Delta], version: int, res: BatchResult) -> None:
    if not adds:
        return
    rank = {s: i for i, s in enumerate(pb.sections)}
    placed = [(pb.find_section(d.section or OTHERS), d) for d in adds]
    if any(s is None for s, _ in placed) and pb.find_section(OTHERS) is None:
        pb.sections.append(OTHERS)
        rank[OTHERS] = len(rank)
    placed = [(s or pb.find_section(OTHERS), d) for s, d in placed]
    seen = {(b.section, _norm(b.content)) for b in pb.bullets.values()}
    for section, d in sorted(
        placed, key=lambda sd: (rank[sd[0]], sd[1].content or "", sd[1].section or "", sd[1].id or "")
    ):
        key = (section, _norm(d.content or ""))
        if key in seen:
            res.rejected.append((d, "duplicate: the section already has this bullet"))
            continue
        seen.add(key)
        # a replayed (resolved) ADD names its id; a new one gets the next
        bid = d.id if d.id and d.id not in pb.bullets else pb.new_id(section)  # type: ignore[arg-type]
        pb.next_id = max(pb.next_id, id_number(bid) + 1)
        pb.bullets[bid] = Bullet(bid, section, d.content or "", created=version, updated=version)  # type: ignore[arg-type]
        res.added.append(bid)
        res.applied.append(Delta("ADD", id=bid, section=section, content=d.content))
