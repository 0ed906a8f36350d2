"""Keys/values of finished sequences, kept to continue them later without re-encoding (agent turns).

After a turn the agent loop sends ``prompt + turn + tool result`` back to the engine. HFEngine stores each
finished row's keys/values under its token ids (``put``), and the next call looks up, for each prompt, the
stored sequence sharing the longest common prefix with it (``longest``): a stored sequence that the prompt
continues (an agent's next turn), or one the prompt branches off (Tool-Light's entropy-guided branching
restarts from the middle of a finished chain), whose keys/values are then cut to the shared part. Only the rest
of the prompt is encoded. Keys carry their
positions (RoPE is applied before caching), so a stored row is valid wherever it is placed in a later batch.
LRU eviction holds the store to ``budget_mb``.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys and values [H, n, D]


class PrefixCache:
    def __init__(self, budget_mb: int = 1024):
        self.budget = budget_mb * 2**20
        self.entries: OrderedDict[tuple[int, ...], KV] = OrderedDict()
        self.arrays: dict[tuple[int, ...], np.ndarray] = {}  # the keys as arrays, for the common-prefix scan
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
        self.arrays[key] = np.asarray(key, dtype=np.int64)
        self.bytes += size
        while self.bytes > self.budget:
            old, old_kv = self.entries.popitem(last=False)
            del self.arrays[old]
            self.bytes -= self._size(old_kv)

    def longest(self, ids: list[int], min_shared: int = 16) -> tuple[tuple[int, ...], KV] | None:
        """The stored keys/values covering the longest common prefix of ``ids`` with any stored sequence, cut to
        that prefix, as ``(prefix ids, kv)``; None when no sequence shares ``min_shared`` tokens. At least one
        token of ``ids`` is always left to encode (for the next-token logits)."""
        cap = len(ids) - 1
        q = np.asarray(ids[:cap], dtype=np.int64)
        best, best_key = 0, None
        for key, arr in self.arrays.items():
            n = min(len(arr), cap)
            if n <= best:
                continue
            eq = arr[:n] == q[:n]
            lcp = n if eq.all() else int(eq.argmin())
            if lcp > best:
                best, best_key = lcp, key
        if best_key is None or best < min_shared:
            self.misses += 1
            return None
        self.entries.move_to_end(best_key)
        self.hits += 1
        self.reused_tokens += best
        kv = self.entries[best_key]
        if best < len(best_key):  # a branch off the stored sequence: its first `best` positions are still valid
            kv = [(k[:, :best], v[:, :best]) for k, v in kv]
        return tuple(ids[:best]), kv

    def clear(self) -> None:
        self.entries.clear()
        self.arrays.clear()
        self.bytes = 0
