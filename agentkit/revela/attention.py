"""Revela's in-batch attention as a transformers attention function: no fork, any model that dispatches through
``ALL_ATTENTION_FUNCTIONS`` (Llama/SmolLM2, Qwen2/3, Gemma 3, Mistral, …).

Revela (Cai et al., ICLR 2026, arXiv 2506.16552) lets every chunk D_i of a batch attend to every other chunk D_j
in every layer, weighted by the retriever's similarity::

    h_i = s_i + Σ_{j≠i} Sim(D_i, D_j) · softmax(Q_i K_jᵀ / √d) V_j

``s_i`` is the layer's ordinary causal self-attention of chunk i; ``Q_i`` [L, d] its queries; ``K_j, V_j`` [L, d]
the keys/values chunk j had in a first, plain forward pass (cached per layer); the softmax runs over chunk j's
real (non-padding) tokens, without a causal mask. ``Sim`` [B, B] is a row-softmax of retriever cosine similarities
with the diagonal masked (``similarity``), so the LM loss reaches the retriever only through ``Sim``.

How it hooks in: ``register()`` adds an attention function named ``"revela"`` (and its mask function, the same as
SDPA's) to transformers' registries; a model loaded with ``attn_implementation="revela"`` behaves exactly like
``"sdpa"`` until a forward gets the keyword ``revela=InBatch(...)``, which transformers passes down to every
attention call. Mode ``"record"`` stores each layer's K/V; mode ``"attend"`` adds the in-batch term. A model
family whose attention modules do not call ``ALL_ATTENTION_FUNCTIONS`` (old remote code) needs a forward hook on
its attention modules instead: see docs/revela.md "Adding a model family".

Cost: one extra attention per layer over the batch's cached K/V (B² chunk pairs of L×L scores), never a second
forward per pair; ``inbatch_term`` runs it through SDPA a few pairs at a time and skips pairs of weight 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

ATTN_NAME = "revela"
_EPS = 1e-6


@dataclass
class InBatch:
    """One forward's in-batch state, passed to the model as ``revela=``.

    mode: ``"record"`` (plain attention, keep each layer's K/V) or ``"attend"`` (add the in-batch term).
    sim: [B, B] weights, row i over the chunks j that chunk i attends to (diagonal 0).
    key_mask: [B, L] bool, True on chunk j's real tokens (padding is never attended).
    query_mask: [B, L] bool or None: positions that receive the term (the paper zeroes it on the first half of a
        chunk when that half is the retriever's query); None = every position.
    v_norm: divide each pair's output by the attention-weighted mean ‖V_j‖ (the official default).
    keep_grad: keep the recorded K/V in the autograd graph (the official code does; off, the first pass runs
        without a graph and the step is cheaper).
    """

    mode: Literal["record", "attend"] = "record"
    sim: torch.Tensor | None = None
    key_mask: torch.Tensor | None = None
    query_mask: torch.Tensor | None = None
    v_norm: bool = False
    keep_grad: bool = False
    kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)


SIM_FLOOR = 1e-12


def similarity(queries: torch.Tensor, passages: torch.Tensor, tau: float = 1e-4) -> torch.Tensor:
    """Sim(D_i, D_j) = exp(S_ij/τ) / Σ_{k≠i} exp(S_ik/τ), S the cosine of [B, D] embeddings; diagonal 0. → [B, B].

    Row 1 below: cosines 0.8 and 0.6 at τ = 0.1 → softmax(8, 6) = (0.881, 0.119).

    >>> e = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
    >>> similarity(e, e, tau=0.1).round(decimals=3)
    tensor([[0.0000, 1.0000, 0.0000],
            [0.8810, 0.0000, 0.1190],
            [0.0020, 0.9980, 0.0000]])
    """
    if tau <= 0:
        raise ValueError(f"the temperature must be positive, got {tau}")
    s = F.normalize(queries, dim=-1) @ F.normalize(passages, dim=-1).T / tau
    eye = torch.eye(s.shape[0], dtype=torch.bool, device=s.device)
    s = s.masked_fill(eye, float("-inf"))
    # A logit more than ln(1/SIM_FLOOR) below its row's best gives a weight < SIM_FLOOR: make it exactly 0 (and its
    # pair skipped) before the softmax, so its gradient is exactly 0 too. At τ = 1e-4 most of a row's weights are
    # otherwise 1e-30..1e-45, float32 subnormals, and the retriever's whole backward then runs on subnormal
    # gradients, which CPUs multiply ~100x slower (`agentkit bench revela`: 50 s instead of 8 s). Such a weight
    # moves a layer's output by less than float32 resolves; the gradient loses terms of relative size ~SIM_FLOOR.
    s = s.masked_fill(s < s.amax(dim=-1, keepdim=True) + math.log(SIM_FLOOR), float("-inf"))
    return torch.softmax(s, dim=-1)


def inbatch_term(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sim: torch.Tensor,
    key_mask: torch.Tensor,
    scaling: float,
    v_norm: bool = False,
    pairs_per_call: int = 32,
) -> torch.Tensor:
    """Σ_j sim[i, j] · softmax(q_i k_jᵀ · scaling) v_j for every chunk i, over the pairs (i, j) with sim[i, j] ≠ 0.

    q [B, H, L, d]; k, v [B, H_kv, L, d] (grouped-query heads are repeated); sim [B, B]; key_mask [B, L] bool.
    Returns [B, H, L, d].

    Pairs run through SDPA in groups of ``pairs_per_call``, so the L×L scores of only a few pairs exist at a time.
    Pairs whose weight is exactly 0 are skipped, which changes neither the value nor any gradient: ∂Sim_ij/∂S is
    Sim_ij(δ − Sim_i·) = 0 there. With τ = 1e-4 a weight underflows to 0 once its cosine trails the row's best by
    more than ~0.01, so the cost follows the number of near-ties, not B².
    """
    b, h, length, d = q.shape
    groups = h // k.shape[1]
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    if v_norm:  # carry ‖V‖ as one more value channel: its attention-weighted mean is the normaliser
        v = torch.cat([v, v.norm(dim=-1, keepdim=True)], dim=-1)
    out = q.new_zeros(b, h, length, d)
    rows, cols = torch.nonzero(sim, as_tuple=True)

    def pairs(q, k, v, w, i, j):  # the term of one group of pairs: [n, H, L, d], weighted by w [n]
        o = F.scaled_dot_product_attention(q[i], k[j], v[j], attn_mask=key_mask[j][:, None, None, :], scale=scaling)
        if v_norm:
            o = o[..., :d] / (o[..., d:] + _EPS)
        return w.view(-1, 1, 1, 1).to(o.dtype) * o

    # With more weighted pairs than chunks, each group is recomputed in the backward pass instead of keeping its
    # gathered q/k/v copies and outputs (n pairs × H × L × d each), so memory stays O(B·H·L·d) per layer however
    # many pairs are weighted (a dense Sim). With at most B pairs (the usual peaked Sim) keeping them costs no more
    # than the layer's own q/k/v, and the recomputation would only cost time.
    recompute = torch.is_grad_enabled() and (q.requires_grad or sim.requires_grad) and rows.numel() > b
    for start in range(0, rows.numel(), pairs_per_call):
        i, j = rows[start : start + pairs_per_call], cols[start : start + pairs_per_call]
        args = (q, k, v, sim[i, j], i, j)
        term = torch.utils.checkpoint.checkpoint(pairs, *args, use_reentrant=False) if recompute else pairs(*args)
        out = out.index_add(0, i, term)
    return out


def inbatch_term_reference(q, k, v, sim, key_mask, scaling, v_norm=False):
    """The same term with every B×B×L×L score materialised at once (the official fork's way), for the tests."""
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = torch.einsum("ihqd,jhkd->ijhqk", q, k) * scaling
    scores = scores.masked_fill(~key_mask[None, :, None, None, :], float("-inf"))
    p = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    o = torch.einsum("ijhqk,jhkd->ijhqd", p, v)
    if v_norm:
        o = o / (torch.einsum("ijhqk,jhk->ijhq", p, v.norm(dim=-1)).unsqueeze(-1) + _EPS)
    return torch.einsum("ij,ijhqd->ihqd", sim.to(o.dtype), o)


def revela_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, revela=None, **kwargs):
    """transformers attention function: SDPA, plus Revela's in-batch term when the forward carries ``revela``."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    out, weights = sdpa_attention_forward(
        module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
    )
    if revela is None:
        return out, weights
    layer = module.layer_idx
    if revela.mode == "record":
        revela.kv[layer] = (key, value) if revela.keep_grad else (key.detach(), value.detach())
        return out, weights
    if layer not in revela.kv:
        raise RuntimeError(f"no recorded keys/values for layer {layer}: run the model once with mode='record'")
    k, v = revela.kv[layer]
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    extra = inbatch_term(query, k, v, revela.sim, revela.key_mask, scale, revela.v_norm)  # [B, H, L, d]
    if revela.query_mask is not None:
        extra = extra * revela.query_mask[:, None, :, None].to(extra.dtype)
    return out + extra.transpose(1, 2).to(out.dtype), weights  # transformers wants [B, L, H, d]


def register() -> str:
    """Add ``"revela"`` to transformers' attention and mask registries (idempotent); returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTN_NAME, revela_attention)
    AttentionMaskInterface.register(ATTN_NAME, sdpa_mask)
    return ATTN_NAME


def enable(model) -> None:
    """Switch a loaded transformers model to the ``"revela"`` attention (SDPA until a forward passes ``revela=``)."""
    register()
    model.set_attn_implementation(ATTN_NAME)
