"""Grouped-query attention without copying the cache, on a CPU.

transformers' ``sdpa`` attention repeats each layer's keys and values to the number of query heads whenever an
attention mask is given (``repeat_kv``: on CUDA the grouped kernels need no mask), so a decode step over a padded
batch copies every layer's whole cache, times the group size (SmolLM2: 3 key/value heads for 9 query heads). A
batch of agent rows is always padded: their histories differ in length. torch's CPU kernels take the groups as
they are under a mask (``enable_gqa``, torch ≥ 2.5), with the same result to the bit: this module's
``sdpa_gqa`` calls them so, and hands every other case (no mask, no groups, another device, gradients, position
biases, paged caches) to transformers' own function.

``use(model)`` switches a model that runs ``sdpa`` to it; HFEngine does so on a CPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

NAME = "agentkit_sdpa_gqa"


def sdpa_gqa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None, **kwargs):
    """transformers' ``sdpa_attention_forward``, with grouped key/value heads passed to torch as groups under a
    mask on a CPU. Shapes: query ``[B, Hq, q, D]``, key and value ``[B, Hkv, kv, D]``, mask ``[B, 1, q, kv]``;
    returns ``([B, q, Hq, D], None)`` as transformers' does."""
    groups = getattr(module, "num_key_value_groups", 1)
    if (
        groups == 1
        or attention_mask is None
        or query.device.type != "cpu"
        or key.shape[-1] != value.shape[-1]
        or kwargs.get("position_bias") is not None
        or kwargs.get("cache") is not None
        or (torch.is_grad_enabled() and (query.requires_grad or key.requires_grad))
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=False, enable_gqa=True
    )
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, sdpa_gqa)
ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)  # the masks sdpa gets, in the same form


def use(model) -> bool:
    """Run ``model``'s attention through ``sdpa_gqa`` where it runs transformers' ``sdpa`` (the same results);
    True when switched."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    model.set_attn_implementation(NAME)
    return True
