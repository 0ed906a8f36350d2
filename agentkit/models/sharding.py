"""Models under DeepSpeed ZeRO-3, whose weights are partitioned across processes: what a recipe needs to load,
copy and keep using a model outside the trainer that partitioned it.

ZeRO-3 gives each process a slice of every weight and installs forward hooks that gather a module's weights
from all processes before it runs, a collective. That is right inside a trainer's step, where every process runs
the same forward passes, and wrong elsewhere: a rollout whose length differs between processes, an evaluation
on the main process alone, a frozen copy for a teacher or a reference. So:

- ``whole_weights()``: models loaded in the block are whole, not built inside ``deepspeed.zero.Init`` (which
  transformers does once a trainer's arguments exist; a load on one process would then wait for the others);
- ``whole(model)``: within the block a partitioned model's weights are whole on every process (entered by all);
- ``unpartition(model)``: after training, the model whole for good, its DeepSpeed hooks and attributes gone.

Each is a no-op on a model that is not partitioned, so callers need not know how they were launched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def is_partitioned(model: Any) -> bool:
    """Whether any of ``model``'s parameters is a ZeRO-3 partition (DeepSpeed marks them with ``ds_id``)."""
    return any(hasattr(p, "ds_id") for p in model.parameters())


@contextmanager
def whole_weights() -> Iterator[None]:
    """Models loaded in this block are whole on the process that loads them (``from_pretrained`` outside
    ``deepspeed.zero.Init``). A trainer's own model needs no such init: DeepSpeed partitions it when the trainer
    prepares it."""
    from transformers.integrations import deepspeed as ds

    ref = ds._hf_deepspeed_config_weak_ref
    config = ref() if ref is not None else None
    ds.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        if config is not None:
            ds.set_hf_deepspeed_config(config)


def gathered_out(model: Any) -> list[Any]:
    """``model``'s parameters that are ZeRO-3 partitions not gathered now (empty: every weight is whole here)."""
    return [p for p in model.parameters() if getattr(getattr(p, "ds_status", None), "name", "") == "NOT_AVAILABLE"]


@contextmanager
def whole(model: Any) -> Iterator[None]:
    """Within the block, ``model``'s partitioned weights are whole on this process; every process must enter it
    (gathering is a collective). Weights already whole, or never partitioned, are left as they are."""
    parts = gathered_out(model)
    if not parts:
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(parts):
        yield


def clear_hooks(model: Any) -> None:
    """Drop every forward and backward hook of ``model``'s modules (DeepSpeed's, on a copy or after training)."""
    for m in model.modules():
        for hooks in (m._forward_pre_hooks, m._forward_hooks, m._backward_hooks, m._backward_pre_hooks):
            hooks.clear()


def unpartition(model: Any) -> None:
    """Make a model trained under ZeRO-3 whole again, in place, on every process (each must call it): its weights
    gathered into plain parameters (tied weights stay tied), DeepSpeed's hooks removed. A no-op otherwise."""
    if not is_partitioned(model):
        return
    import torch

    params = {id(p): p for p in model.parameters()}
    with whole(model):
        fresh = {i: torch.nn.Parameter(p.data.clone(), requires_grad=p.requires_grad) for i, p in params.items()}
    for m in model.modules():
        for name, p in list(m._parameters.items()):
            if p is not None and id(p) in fresh:
                m._parameters[name] = fresh[id(p)]
    clear_hooks(model)
