"""Keys/values of finished sequences, kept to continue them later without re-encoding (agent turns).

After a turn the agent loop sends ``prompt + turn + tool result`` back to the engine. HFEngine stores each
finished row's keys/values under its token ids (``put``), and the next call looks up the longest stored prefix
of each prompt (``longest``), so only the tool result and what follows it are encoded. Keys carry their
positions (RoPE is applied before caching), so a stored row is valid wherever it is placed in a later batch.
LRU eviction holds the store to ``budget_mb``.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys and values [H, n, D]


class PrefixCache:
    def __init__(self, budget_mb: int = 1024):
        self.budget = budget_mb * 2**20
        self.entries: OrderedDict[tuple[int, ...], KV] = OrderedDict()
        self.lengths: dict[int, int] = {}  # length -> number of entries of that length
        self.bytes = 0
        self.hits = self.misses = self.reused_tokens = 0

    @staticmethod
    def _size(kv: KV) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)

    def put(self, ids: list[int], kv: KV) -> None:
        key = tuple(ids)
        size = self._size(kv)
        if key in self.entries or size > self.budget:
            return
        self.entries[key] = kv
        self.lengths[len(key)] = self.lengths.get(len(key), 0) + 1
        self.bytes += size
        while self.bytes > self.budget:
            old, old_kv = self.entries.popitem(last=False)
            self.bytes -= self._size(old_kv)
            self.lengths[len(old)] -= 1
            if not self.lengths[len(old)]:
                del self.lengths[len(old)]

    def longest(self, ids: list[int]) -> tuple[tuple[int, ...], KV] | None:
        """The longest stored sequence that is a strict prefix of ``ids`` (at least one token must remain to
        encode, for the next-token logits)."""
        for n in sorted((n for n in self.lengths if n < len(ids)), reverse=True):
            key = tuple(ids[:n])
            kv = self.entries.get(key)
            if kv is not None:
                self.entries.move_to_end(key)
                self.hits += 1
                self.reused_tokens += n
                return key, kv
        self.misses += 1
        return None

    def clear(self) -> None:
        self.entries.clear()
        self.lengths.clear()
        self.bytes = 0
