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
forward per pair; ``inbatch_term`` runs it a few pairs at a time as batched matmuls and skips pairs of weight 0.
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
    sim: [B, B_kv] weights, row i over the recorded chunks j that chunk i attends to (0 on chunk i itself).
    key_mask: [B_kv, L_kv] bool, True on recorded chunk j's real tokens (padding is never attended).
    query_mask: [B, L] bool or None: positions that receive the term (a chunk's real tokens; the paper zeroes it on
        the first half of a chunk when that half is the retriever's query); None = every position.
    The recorded chunks are those of the ``"record"`` forward: the whole batch (B_kv = B), or only the chunks some
    row of Sim weights (``RevelaModel.lm_loss``).
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
    query_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Σ_j sim[i, j] · softmax(q_i k_jᵀ · scaling) v_j for every chunk i, over the pairs (i, j) with sim[i, j] ≠ 0.

    q [B, H, L, d]; k, v [B_kv, H_kv, L_kv, d] (H a multiple of H_kv: grouped-query heads share a K/V head);
    sim [B, B_kv]; key_mask [B_kv, L_kv] bool; query_mask [B, L] bool or None: the positions that receive the term
    (0 elsewhere; None = all). Returns [B, H, L, d].

    Only each row's span of query positions is computed (``_query_span``): with the paper's first-half mask and
    right padding that is about half of L, and the term's attention costs about half.

    Pairs run in groups of ``pairs_per_call`` as three batched matmuls (scores, values, V-norms), so the L×L scores
    of only a few pairs exist at a time. Not SDPA: V-normalisation needs the same weights applied to ‖V‖, which
    puts SDPA on its slow math path (measured: 40 ms a layer against 14 ms here, `agentkit bench revela`'s shapes).
    Pairs whose weight is exactly 0 are skipped, which changes neither the value nor any gradient: ∂Sim_ij/∂S is
    Sim_ij(δ − Sim_i·) = 0 there. With τ = 1e-4 a weight underflows to 0 once its cosine trails the row's best by
    more than ~0.01, so the cost follows the number of near-ties, not B².
    """
    b, h, length, d = q.shape
    hkv, lk = k.shape[1], k.shape[2]
    groups = h // hkv
    pos, valid = _query_span(key_mask.new_ones(b, length) if query_mask is None else query_mask)  # [B, Lq]
    lq = pos.shape[1]
    at = pos[:, None, :, None].expand(b, h, lq, d)
    qs = q.gather(2, at)  # [B, H, Lq, d]: each row's span of query positions
    bias = torch.zeros(key_mask.shape, dtype=q.dtype, device=q.device).masked_fill(~key_mask, torch.finfo(q.dtype).min)
    keep = valid.to(q.dtype)  # [B, Lq]
    vn = v.norm(dim=-1, keepdim=True) if v_norm else None  # [B_kv, H_kv, L_kv, 1]: ‖V_j‖ per key
    out = q.new_zeros(b, h, lq, d)
    rows, cols = torch.nonzero(sim, as_tuple=True)

    def pairs(qs, k, v, w, i, j):  # the term of one group of pairs: [n, H, Lq, d], weighted by w [n]
        # grouped-query heads: the G query heads of a K/V head go along the rows, [n·H_kv, G·Lq, d], so K and V are
        # used as they are (no per-head copies) and each product is one batched matmul
        n = i.numel()
        qi = qs.index_select(0, i).reshape(n * hkv, groups * lq, d)
        kj, vj = (x.index_select(0, j).reshape(n * hkv, lk, -1) for x in (k, v))
        mask = bias.index_select(0, j).repeat_interleave(hkv, dim=0)[:, None, :]  # [n·H_kv, 1, L_kv]: padding -inf
        p = torch.softmax(torch.baddbmm(mask, qi, kj.transpose(1, 2), alpha=scaling), dim=-1)  # [n·H_kv, G·Lq, L_kv]
        # one factor per (pair, position) scales the output: w_ij · (position receives the term) [/ Σ p‖V_j‖]
        f = (w.to(q.dtype)[:, None] * keep.index_select(0, i)).view(n, 1, 1, lq, 1)
        if v_norm:
            norm = torch.bmm(p, vn.index_select(0, j).reshape(n * hkv, lk, 1))
            f = f / (norm.view(n, hkv, groups, lq, 1) + _EPS)
        return (torch.bmm(p, vj).view(n, hkv, groups, lq, d) * f).view(n, h, lq, d)

    # With more weighted pairs than chunks, each group is recomputed in the backward pass instead of keeping its
    # gathered q/k/v copies and outputs (n pairs × H × L × d each), so memory stays O(B·H·L·d) per layer however
    # many pairs are weighted (a dense Sim). With at most B pairs (the usual peaked Sim) keeping them costs no more
    # than the layer's own q/k/v, and the recomputation would only cost time.
    recompute = torch.is_grad_enabled() and (q.requires_grad or sim.requires_grad) and rows.numel() > b
    for start in range(0, rows.numel(), pairs_per_call):
        i, j = rows[start : start + pairs_per_call], cols[start : start + pairs_per_call]
        args = (qs, k, v, sim[i, j], i, j)
        term = torch.utils.checkpoint.checkpoint(pairs, *args, use_reentrant=False) if recompute else pairs(*args)
        out = out.index_add(0, i, term)
    return q.new_zeros(b, h, length, d).scatter(2, at, out)


def _query_span(query_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Row i's positions from its first to its last True, all rows to one length Lq: (positions [B, Lq], their
    mask [B, Lq]). A short row's span runs on past L and wraps to its start (masked), so positions stay distinct."""
    b, length = query_mask.shape
    idx = torch.arange(length, device=query_mask.device).expand(b, -1)
    any_ = query_mask.any(dim=1)
    first = torch.where(query_mask, idx, length).amin(dim=1).where(any_, 0)  # [B]
    last = torch.where(query_mask, idx, -1).amax(dim=1)
    span = max(int((last - first).max()) + 1, 1)
    pos = (first[:, None] + torch.arange(span, device=idx.device)) % length  # [B, Lq]
    return pos, query_mask.gather(1, pos)


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
    extra = inbatch_term(query, k, v, revela.sim, revela.key_mask, scale, revela.v_norm, query_mask=revela.query_mask)
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
