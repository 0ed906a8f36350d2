"""Grow-and-refine (ACE §3.2) with a budget that is enforced, not only stated in the curator's prompt.

After a batch grows the playbook, refinement

1. **de-duplicates**: bullets whose MiniLM embeddings have cosine ≥ ``dedup_threshold`` and that state the same
   numbers (``same_numbers``) are grouped greedily, oldest first (the official analyzer's grouping), and each
   group becomes one MERGE delta that keeps the best-rated member's text (no model call: the merge is
   deterministic and replayable). *Proactive* mode checks the bullets the batch added or rewrote against the
   whole playbook after every batch; *lazy* mode waits until the playbook is over budget, then checks all pairs;
2. **evicts** until the playbook's tokens in the generator's tokenizer fit ``budget_tokens``: problematic bullets
   first (harmful ≥ helpful, harmful > 0; the most net-harmful first), then unused ones (oldest first), then the
   lowest rated (helpful − harmful, then times used, then age).

Embeddings are cached by content (``EmbeddingCache``, saved beside the playbook as ``FILE.emb.npz``), so a batch
embeds only its new texts. The threshold 0.70 was calibrated on the pairs of ``agentkit.ace.calibration`` (the
official 0.90 merges none of its paraphrase pairs with MiniLM); docs/ace.md has the table.

``retrieve`` picks the top-k bullets for a query (the official retriever's option) instead of sending them all.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np

from agentkit.ace.deltas import BatchResult, Delta
from agentkit.ace.playbook import Bullet, Playbook, id_number
from agentkit.config import Fraction, NonNegInt, PosInt, option
from agentkit.files import atomic_write
from agentkit.models.embedder import DEFAULT_EMBEDDER, embed

NUMBER = re.compile(r"\d+(?:[.,]\d+)*")  # the numbers same_numbers compares


@dataclass
class RefineConfig:
    """Grow-and-refine: the playbook's token budget and how near-duplicate bullets are merged."""

    budget_tokens: PosInt = option(
        80_000,
        "most tokens the rendered playbook may take in the generator's tokenizer (official prompt: 80,000); over it, bullets are merged and pruned",
    )
    dedup: Literal["proactive", "lazy", "off"] = option(
        "proactive",
        "proactive: after every batch, its bullets against all; lazy: all pairs, only when over budget; off",
    )
    dedup_threshold: Fraction = option(
        0.70, "cosine similarity at or above which two bullets merge (calibrated in the module docstring)"
    )
    embedder: str = option(
        DEFAULT_EMBEDDER, "sentence-transformer for de-duplication and retrieval (a catalog name or directory)"
    )
    top_k: NonNegInt = option(
        0, "agentkit serve --agent ace: 0 sends the whole playbook, k > 0 only the k bullets nearest the question"
    )


def same_numbers(a: str, b: str) -> bool:
    """False when both texts state numbers and not the same ones: "1 mile = 1.609 km" and "1 nautical mile =
    1.852 km" are different facts however close their embeddings.

    >>> same_numbers("An hour has 3,600 seconds.", "There are 3600 seconds in one hour."), same_numbers("x 1.609", "x 1.852")
    (True, False)
    """
    na, nb = _numbers(a), _numbers(b)
    return not (na and nb and na != nb)


class EmbeddingCache:
    """Content → L2-normalised embedding; ``vectors(texts)`` embeds only texts it has not seen."""

    def __init__(self, embedder: str = DEFAULT_EMBEDDER):
        self.embedder = embedder
        self.rows: dict[str, int] = {}
        self.matrix = np.zeros((0, 0), np.float32)

    @staticmethod
    @lru_cache(maxsize=1 << 17)  # every refinement looks up all bullets
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def vectors(self, texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if self.key(t) not in self.rows))
        if new:
            e = embed(new, self.embedder)
            base = len(self.rows)
            self.matrix = e if base == 0 else np.concatenate([self.matrix, e])
            self.rows.update({self.key(t): base + i for i, t in enumerate(new)})
        return self.matrix[[self.rows[self.key(t)] for t in texts]] if texts else np.zeros((0, 1), np.float32)

    def save(self, path: Path) -> None:
        import io

        buf = io.BytesIO()
        np.savez(buf, keys=np.array(list(self.rows), dtype="U40"), matrix=self.matrix, embedder=self.embedder)
        atomic_write(path, buf.getvalue())

    @classmethod
    def load(cls, path: Path, embedder: str = DEFAULT_EMBEDDER) -> EmbeddingCache:
        """The cache saved at ``path`` if it exists and was made by ``embedder``; else an empty one."""
        cache = cls(embedder)
        try:
            with np.load(path) as z:
                if str(z["embedder"]) == embedder:
                    cache.rows = {str(k): i for i, k in enumerate(z["keys"])}
                    cache.matrix = z["matrix"].astype(np.float32)
        except (OSError, ValueError, KeyError):
            pass  # no cache yet, or an unreadable one: embed again
        return cache


def duplicate_groups(
    pb: Playbook, cache: EmbeddingCache, threshold: float, among: list[str] | None = None, chunk: int = 1024
) -> list[list[str]]:
    """Groups (oldest first) of near-duplicate bullets. ``among``: only bullets in it start a group (the ones a
    batch added or rewrote); None: every bullet. Each bullet joins at most one group.

    The greedy pass: seeds in age order; a seed still free takes every free bullet it may merge with (cosine ≥
    ``threshold`` and ``same_numbers``). The pairs are found as arrays, ``chunk`` seeds at a time; the Python loop
    runs only over seeds that have a candidate. With every bullet a seed, a seed's older neighbours are already
    taken when its turn comes (each took its free neighbours), so only younger columns are compared: half the
    products."""
    bullets = sorted(pb.bullets.values(), key=lambda b: (id_number(b.id), b.id))
    if len(bullets) < 2:
        return []
    index = {b.id: i for i, b in enumerate(bullets)}
    E = cache.vectors([b.content for b in bullets])  # [N, D]
    # same_numbers as array arithmetic: each bullet's set of numbers as an integer key, -1 for none; two bullets
    # may merge when either states no number or both state the same ones
    sets: dict[frozenset[str], int] = {}
    key = np.array([sets.setdefault(n, len(sets)) if n else -1 for n in map(_numbers, (b.content for b in bullets))])
    free = np.ones(len(bullets), dtype=bool)  # not yet in a group
    seeds = np.array(sorted(index[i] for i in among if i in index) if among is not None else range(len(bullets)))
    groups = []
    for start in range(0, len(seeds), chunk):
        rows = seeds[start : start + chunk]
        first = int(rows[0]) if among is None else 0  # all seeds: columns from the chunk's oldest on
        r, c = np.nonzero(E[rows] @ E[first:].T >= threshold)  # row-major: each seed's pairs together, in order
        c += first
        i, j = rows[r], key[c]
        keep = (c != i) & ((j == -1) | (key[i] == -1) | (j == key[i]))  # not itself; same_numbers
        r, c = r[keep], c[keep]
        starts = np.flatnonzero(np.diff(r, prepend=-1))  # where each seed's candidates begin
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(r)]):
            i = int(rows[r[lo]])
            if not free[i]:
                continue
            hit = c[lo:hi][free[c[lo:hi]]]
            if hit.size:
                group = sorted([i, *hit.tolist()])
                free[group] = False
                groups.append([bullets[j].id for j in group])
    return groups


@lru_cache(maxsize=1 << 17)  # every refinement reads all bullets
def _numbers(text: str) -> frozenset[str]:
    """The numbers a text states (``same_numbers``' sets)."""
    return frozenset(m.replace(",", "") for m in NUMBER.findall(text))


def merge_deltas(pb: Playbook, groups: list[list[str]]) -> list[Delta]:
    """One MERGE per group, keeping the text of the best-rated member (helpful − harmful, used, then oldest)."""

    def rating(b: Bullet) -> tuple:
        return (b.helpful - b.harmful, b.used, -id_number(b.id))

    return [Delta("MERGE", ids=tuple(g), content=max((pb.bullets[i] for i in g), key=rating).content) for g in groups]


class TokenCounter:
    """An upper bound on the tokens of ``Playbook.to_text()``: the tokens of each line (cached by line) plus one
    per line break, since a tokenizer never needs more than one token for a newline between two lines."""

    def __init__(self, count: Callable[[str], int]):
        self.count = count
        self.cache: dict[str, int] = {}

    def line(self, text: str) -> int:
        if text not in self.cache:
            self.cache[text] = self.count(text)
        return self.cache[text]

    def bullet(self, b: Bullet) -> int:
        return self.line(b.line()) + 1

    def playbook(self, pb: Playbook) -> int:
        headers = sum(self.line(f"## {s}") + 2 for s in pb.sections)
        return headers + sum(self.bullet(b) for b in pb.bullets.values())


def eviction_deltas(pb: Playbook, budget: int, tokens: TokenCounter, total: int | None = None) -> list[Delta]:
    """REMOVE deltas, worst first, until the playbook fits ``budget`` tokens (see the module docstring).
    ``total``: ``tokens.playbook(pb)`` when the caller has it."""
    over = (tokens.playbook(pb) if total is None else total) - budget
    if over <= 0:
        return []

    def order(b: Bullet) -> tuple:
        if b.problematic:
            return (0, -(b.harmful - b.helpful), b.created, id_number(b.id))
        if b.unused:
            return (1, 0, b.created, id_number(b.id))
        return (2, b.helpful - b.harmful, b.used, b.created, id_number(b.id))

    out = []
    for b in sorted(pb.bullets.values(), key=order):
        if over <= 0:
            break
        out.append(Delta("REMOVE", id=b.id))
        over -= tokens.bullet(b)
    return out


def retrieve(pb: Playbook, cache: EmbeddingCache, queries: list[str], k: int) -> list[set[str]]:
    """The ids of the ``k`` bullets nearest to each query (all of them when the playbook has k or fewer)."""
    bullets = list(pb.bullets.values())
    if len(bullets) <= k:
        return [{b.id for b in bullets} for _ in queries]
    S = cache.vectors(queries) @ cache.vectors([b.content for b in bullets]).T  # [Q, N]
    top = np.argpartition(-S, k - 1, axis=1)[:, :k]
    return [{bullets[j].id for j in row} for row in top]


def touched(res: BatchResult) -> list[str]:
    """Ids of the bullets a batch added or rewrote (what proactive de-duplication checks)."""
    return [d.id or d.ids[0] for d in res.applied if d.op in ("ADD", "UPDATE", "MERGE")]


class Refiner:
    """Runs refinement on a ``PlaybookStore`` after each batch: ``refine(store, touched(res))`` commits the
    de-duplication MERGEs (source ``dedup``) and the evictions (source ``evict``) as their own versions."""

    def __init__(self, cfg: RefineConfig, count_tokens: Callable[[str], int], cache: EmbeddingCache | None = None):
        self.cfg = cfg
        self.cache = cache or EmbeddingCache(cfg.embedder)
        self.tokens = TokenCounter(count_tokens)

    def refine(self, store, changed: list[str]) -> dict[str, int]:
        pb = store.playbook
        merged = 0
        lazy = self.cfg.dedup == "lazy" and self.tokens.playbook(pb) > self.cfg.budget_tokens
        if (self.cfg.dedup == "proactive" and changed) or lazy:
            among = changed if self.cfg.dedup == "proactive" else None
            groups = duplicate_groups(pb, self.cache, self.cfg.dedup_threshold, among)
            if groups:
                res = store.commit(merge_deltas(pb, groups), source="dedup")
                merged = sum(len(d.ids) - 1 for d in res.applied if d.op == "MERGE")
        pb = store.playbook
        total = self.tokens.playbook(pb)
        evict = eviction_deltas(pb, self.cfg.budget_tokens, self.tokens, total)
        if evict:
            total -= sum(self.tokens.bullet(pb.bullets[d.id]) for d in evict)  # sections stay: exact
            store.commit(evict, source="evict")
        return {"merged": merged, "evicted": len(evict), "tokens": total}
