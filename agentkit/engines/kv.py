"""A KV cache that grows in place: keys/values live in preallocated buffers and each step writes one slot.

transformers' DynamicLayer appends with ``torch.cat``, copying the whole cache every decode step; on CPU at batch
64 that copy took ~35% of each step (measured on SmolLM2-135M). Buffers here grow by doubling, so a step copies
only the new token's keys/values, and finished rows can be dropped from the batch (``select``). A cache made with
``headroom`` (the engine passes the decode budget) reserves that many slots beyond each growth, so a prefill
followed by its decode steps allocates and copies once: growing a stacked batch-32 cache from its exact size cost
1.3 s per agent turn (page faults and a copy of every layer) before this.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class GrowingLayer(DynamicLayer):
    """Drop-in for DynamicLayer: ``keys``/``values`` are views ``[B, H, :len, D]`` of larger buffers."""

    headroom = 0  # slots reserved beyond what an update needs whenever the buffers grow (see make_cache)

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        b, h, _, d = key_states.shape
        self._k = key_states.new_empty(b, h, 0, d)
        self._v = value_states.new_empty(b, h, 0, value_states.shape[-1])
        self._len = 0
        self.is_initialized = True

    def _reserve(self, needed: int) -> None:
        cap = self._k.shape[-2]
        if needed <= cap:
            return
        new_cap = max(needed + self.headroom, 2 * cap, 64)
        k = self._k.new_empty(*self._k.shape[:2], new_cap, self._k.shape[-1])
        v = self._v.new_empty(*self._v.shape[:2], new_cap, self._v.shape[-1])
        k[:, :, : self._len] = self._k[:, :, : self._len]
        v[:, :, : self._len] = self._v[:, :, : self._len]
        self._k, self._v = k, v

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        self._reserve(self._len + n)
        self._k[:, :, self._len : self._len + n] = key_states
        self._v[:, :, self._len : self._len + n] = value_states
        self._len += n
        self.keys, self.values = self._k[:, :, : self._len], self._v[:, :, : self._len]
        return self.keys, self.values

    def adopt(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        """Take buffers ``[B, H, capacity, D]`` whose first ``length`` slots hold the keys/values."""
        self.device = keys.device
        self._k, self._v, self._len = keys, values, length
        self.keys, self.values = keys[:, :, :length], values[:, :, :length]
        self.is_initialized = True

    def get_seq_length(self) -> int:
        return self._len if self.is_initialized else 0

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            self._k, self._v = self._k[indices], self._v[indices]
            self.keys, self.values = self._k[:, :, : self._len], self._v[:, :, : self._len]

    def batch_repeat_interleave(self, repeats: int) -> None:
        self.batch_select_indices(torch.arange(self._k.shape[0]).repeat_interleave(repeats))

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove and self.is_initialized:
            self._len -= abs(tokens_to_remove)
            self.keys, self.values = self._k[:, :, : self._len], self._v[:, :, : self._len]

    def reset(self) -> None:
        self.keys = self.values = None
        self.is_initialized = False


def make_cache(config, headroom: int = 0) -> DynamicCache:
    """A DynamicCache whose full-attention layers grow in place, reserving ``headroom`` more slots whenever they
    grow (the tokens still to come); sliding-window layers keep their own class."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    for layer in cache.layers:
        if isinstance(layer, GrowingLayer):
            layer.headroom = headroom
    return cache


def select_rows(cache: DynamicCache, indices: torch.Tensor) -> None:
    """Keep only the batch rows ``indices`` (in that order), in every layer."""
    for layer in cache.layers:
        layer.batch_select_indices(indices)


def growing_only(cache: DynamicCache) -> bool:
    return all(isinstance(layer, GrowingLayer) for layer in cache.layers)


def repeat_rows(cache: DynamicCache, rows: int, config, headroom: int = 0) -> DynamicCache:
    """A new cache holding ``rows`` copies of the single row of ``cache`` (a shared prompt prefix)."""
    out = make_cache(config, headroom)
    for src, dst in zip(cache.layers, out.layers):
        if src.is_initialized:
            k = src.keys.expand(rows, -1, -1, -1)
            dst.update(k, src.values.expand(rows, -1, -1, -1))
    return out


def _right_aligned(
    pieces: list[tuple[list[tuple[torch.Tensor, torch.Tensor]], list[int]]], n_rows: int, config, headroom: int = 0
) -> DynamicCache:
    """One ``n_rows`` cache from pieces ``(per-layer (keys, values) [b, H, n, D], their rows)``, each piece
    right-aligned to the longest: keys carry their positions (RoPE is applied before caching), so where a key
    sits in the buffer does not matter, only that the attention mask marks the left filler as padding. The
    buffers get ``headroom`` free slots after the keys."""
    width = max(kv[0][0].shape[-2] for kv, _ in pieces)
    out = make_cache(config, headroom)
    for i, layer in enumerate(out.layers):
        ref_k, ref_v = pieces[0][0][i]
        k = ref_k.new_empty(n_rows, ref_k.shape[1], width + headroom, ref_k.shape[-1])
        v = ref_v.new_empty(n_rows, ref_v.shape[1], width + headroom, ref_v.shape[-1])
        k[:, :, :width] = 0  # the filler is masked, but must be finite (0 × NaN is NaN in attention)
        v[:, :, :width] = 0
        for kv, rows in pieces:
            pk, pv = kv[i]
            idx = torch.tensor(rows, device=k.device)
            k[idx, :, width - pk.shape[-2] : width], v[idx, :, width - pv.shape[-2] : width] = pk, pv
        layer.adopt(k, v, width)
    return out


def merge_right_aligned(
    parts: list[tuple[DynamicCache, list[int]]], n_rows: int, config, headroom: int = 0
) -> DynamicCache:
    """Merge caches of disjoint row groups into one ``n_rows`` cache, each group right-aligned to the longest."""
    return _right_aligned(
        [([(layer.keys, layer.values) for layer in c.layers], rows) for c, rows in parts], n_rows, config, headroom
    )


def snapshot_row(cache: DynamicCache, row: int, mask_row: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One row's keys/values at its unmasked slots only (padding dropped): per layer ``[H, n, D]`` copies."""
    keep = mask_row.nonzero()[:, 0]
    return [(layer.keys[row][:, keep].clone(), layer.values[row][:, keep].clone()) for layer in cache.layers]


def stack_rows(
    rows: list[list[tuple[torch.Tensor, torch.Tensor]]], config, headroom: int = 0
) -> tuple[DynamicCache, torch.Tensor]:
    """A batch cache from row snapshots, right-aligned, and its attention mask ``[B, W]`` (0 on the filler)."""
    lengths = [kv[0][0].shape[1] for kv in rows]
    width = max(lengths)
    mask = torch.zeros(len(rows), width, dtype=torch.long, device=rows[0][0][0].device)
    for i, n in enumerate(lengths):
        mask[i, width - n :] = 1
    pieces = [([(k[None], v[None]) for k, v in kv], [i]) for i, kv in enumerate(rows)]
    return _right_aligned(pieces, len(rows), config, headroom), mask
