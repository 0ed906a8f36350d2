"""A KV cache that grows in place: keys/values live in preallocated buffers and each step writes one slot.

transformers' DynamicLayer appends with ``torch.cat``, copying the whole cache every decode step; on CPU at batch
64 that copy took ~35% of each step (measured on SmolLM2-135M). Buffers here grow by doubling, so a step copies
only the new token's keys/values, and finished rows can be dropped from the batch (``select``).
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class GrowingLayer(DynamicLayer):
    """Drop-in for DynamicLayer: ``keys``/``values`` are views ``[B, H, :len, D]`` of larger buffers."""

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
        new_cap = max(needed, 2 * cap, 64)
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


def make_cache(config) -> DynamicCache:
    """A DynamicCache whose full-attention layers grow in place; sliding-window layers keep their own class."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def select_rows(cache: DynamicCache, indices: torch.Tensor) -> None:
    """Keep only the batch rows ``indices`` (in that order), in every layer."""
    for layer in cache.layers:
        layer.batch_select_indices(indices)


def growing_only(cache: DynamicCache) -> bool:
    return all(isinstance(layer, GrowingLayer) for layer in cache.layers)


def repeat_rows(cache: DynamicCache, rows: int, config) -> DynamicCache:
    """A new cache holding ``rows`` copies of the single row of ``cache`` (a shared prompt prefix)."""
    out = make_cache(config)
    for src, dst in zip(cache.layers, out.layers):
        if src.is_initialized:
            k = src.keys.expand(rows, -1, -1, -1)
            dst.update(k, src.values.expand(rows, -1, -1, -1))
    return out


def merge_right_aligned(parts: list[tuple[DynamicCache, list[int]]], n_rows: int, config) -> DynamicCache:
    """Merge caches of disjoint row groups into one ``n_rows`` cache, each group right-aligned to the longest.

    Keys carry their positions (RoPE is applied before caching), so where a key sits in the buffer does not
    matter, only that the attention mask marks the left filler as padding (see ``HFEngine._prefill``).
    """
    width = max(c.get_seq_length() for c, _ in parts)
    out = make_cache(config)
    for i, layer in enumerate(out.layers):
        ref = parts[0][0].layers[i]
        b, h, d = n_rows, ref.keys.shape[1], ref.keys.shape[-1]
        k = ref.keys.new_zeros(b, h, width, d)
        v = ref.values.new_zeros(b, h, width, ref.values.shape[-1])
        for cache, rows in parts:
            src = cache.layers[i]
            n = src.get_seq_length()
            idx = torch.tensor(rows, device=k.device)
            k[idx, :, width - n:] = src.keys
            v[idx, :, width - n:] = src.values
        layer.update(k, v)
    return out


def snapshot_row(cache: DynamicCache, row: int, mask_row: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One row's keys/values at its unmasked slots only (padding dropped): per layer ``[H, n, D]`` copies."""
    keep = mask_row.nonzero()[:, 0]
    return [(layer.keys[row][:, keep].clone(), layer.values[row][:, keep].clone()) for layer in cache.layers]


def stack_rows(rows: list[list[tuple[torch.Tensor, torch.Tensor]]], config) -> tuple[DynamicCache, torch.Tensor]:
    """A batch cache from row snapshots, right-aligned, and its attention mask ``[B, W]`` (0 on the filler)."""
    width = max(kv[0][0].shape[1] for kv in rows)
    out = make_cache(config)
    mask = torch.zeros(len(rows), width, dtype=torch.long, device=rows[0][0][0].device)
    for i, kv in enumerate(rows):
        mask[i, width - kv[0][0].shape[1]:] = 1
    for li, layer in enumerate(out.layers):
        h, d = rows[0][li][0].shape[0], rows[0][li][0].shape[-1]
        k = rows[0][li][0].new_zeros(len(rows), h, width, d)
        v = rows[0][li][1].new_zeros(len(rows), h, width, rows[0][li][1].shape[-1])
        for i, kv in enumerate(rows):
            n = kv[li][0].shape[1]
            k[i, :, width - n:], v[i, :, width - n:] = kv[li]
        layer.update(k, v)
    return out, mask
