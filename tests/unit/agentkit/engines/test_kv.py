"""agentkit.engines.kv: the in-place growing cache behaves as transformers' DynamicLayer does, and the row
operations (snapshot, stack, merge) put every key where the attention mask says it is.

The first test is the contract with transformers: GrowingLayer subclasses DynamicLayer and overrides the methods
below; when a new transformers renames or re-signs one of them, this test fails before any engine does."""

import inspect

import torch
from transformers import DynamicCache, LlamaConfig
from transformers.cache_utils import DynamicLayer

from agentkit.engines.kv import (
    GrowingLayer,
    make_cache,
    merge_right_aligned,
    repeat_rows,
    select_rows,
    snapshot_row,
    stack_rows,
)

OVERRIDDEN = {
    "lazy_initialization": ["self", "key_states", "value_states"],
    "update": ["self", "key_states", "value_states", "args", "kwargs"],
    "get_seq_length": ["self"],
    "batch_select_indices": ["self", "indices"],
    "batch_repeat_interleave": ["self", "repeats"],
    "crop": ["self", "tokens_to_remove"],
    "reset": ["self"],
}
CONFIG = LlamaConfig(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, hidden_size=8)


def test_the_transformers_methods_we_override_keep_their_signatures():
    for name, params in OVERRIDDEN.items():
        assert list(inspect.signature(getattr(DynamicLayer, name)).parameters) == params, name
    cache = DynamicCache(config=CONFIG)  # make_cache swaps exactly these layers
    assert [type(layer) for layer in cache.layers] == [DynamicLayer, DynamicLayer]
    assert all(isinstance(layer, GrowingLayer) for layer in make_cache(CONFIG).layers)


def _kv(b, n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, 2, n, 4, generator=g), torch.randn(b, 2, n, 4, generator=g)


def test_updates_crop_and_row_selection_match_dynamic_layer():
    ours, ref = GrowingLayer(), DynamicLayer()
    for n, seed in ((5, 0), (1, 1), (70, 2), (1, 3)):  # 70 forces the buffers to grow past their first 64 slots
        k, v = _kv(3, n, seed)
        got, want = ours.update(k, v), ref.update(k, v)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert ours.get_seq_length() == ref.get_seq_length() == 77
    ours.crop(-7)
    ref.crop(-7)
    assert ours.get_seq_length() == 70 and torch.equal(ours.keys, ref.keys)
    idx = torch.tensor([2, 0])
    ours.batch_select_indices(idx)
    ref.batch_select_indices(idx)
    assert torch.equal(ours.keys, ref.keys) and torch.equal(ours.values, ref.values)
    ours.batch_repeat_interleave(2)
    ref.batch_repeat_interleave(2)
    assert torch.equal(ours.keys, ref.keys) and ours.keys.shape[0] == 4


def test_headroom_reserves_slots_so_decode_steps_do_not_copy():
    cache = make_cache(CONFIG, headroom=10)
    layer = cache.layers[0]
    layer.update(*_kv(1, 64, 0))
    buffer = layer._k
    assert buffer.shape[-2] == 74  # the prefill's 64 slots and the 10 promised
    for step in range(10):
        layer.update(*_kv(1, 1, step + 1))
    assert layer._k is buffer and layer.get_seq_length() == 74


def test_snapshot_stack_and_merge_right_align_rows_under_the_mask():
    cache = make_cache(CONFIG)
    k, v = _kv(2, 5, 0)
    for layer in cache.layers:
        layer.update(k, v)
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])  # row 0 is left-padded by two
    rows = [snapshot_row(cache, i, mask[i]) for i in range(2)]
    assert rows[0][0][0].shape == (2, 3, 4) and torch.equal(rows[0][0][0], k[0][:, 2:])
    stacked, m = stack_rows(rows[::-1], CONFIG, headroom=3)
    assert m.tolist() == [[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]
    assert torch.equal(stacked.layers[1].keys[0], k[1]) and torch.equal(stacked.layers[1].keys[1][:, 2:], k[0][:, 2:])
    assert torch.count_nonzero(stacked.layers[1].keys[1][:, :2]) == 0  # the filler is zero, never NaN
    assert stacked.layers[0]._k.shape[-2] == 8  # width 5 and headroom 3

    short = make_cache(CONFIG)
    for layer in short.layers:
        layer.update(*_kv(1, 2, 9))
    merged = merge_right_aligned([(cache, [0, 2]), (short, [1])], 3, CONFIG)
    assert merged.layers[0].keys.shape == (3, 2, 5, 4)
    assert torch.equal(merged.layers[0].keys[2], k[1]) and torch.equal(
        merged.layers[0].keys[1][:, 3:], short.layers[0].keys[0]
    )
    select_rows(merged, torch.tensor([1]))
    assert merged.layers[0].keys.shape[0] == 1 and merged.layers[1].keys.shape[0] == 1


def test_repeat_rows_copies_one_prefix_to_every_row():
    one = make_cache(CONFIG)
    k, v = _kv(1, 4, 0)
    for layer in one.layers:
        layer.update(k, v)
    many = repeat_rows(one, 3, CONFIG)
    many.layers[0].update(*_kv(3, 1, 1))  # rows diverge after the shared prefix without touching each other
    assert all(torch.equal(many.layers[0].keys[r, :, :4], k[0]) for r in range(3))
    assert not torch.equal(many.layers[0].keys[0, :, 4], many.layers[0].keys[1, :, 4])
