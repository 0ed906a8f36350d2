"""Next-token sampling from log-probabilities: temperature, top-k, top-p, per-row seeded generators."""

from __future__ import annotations

import torch


def filter_logits(logits: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Mask (to -inf) tokens outside the top-k and outside the smallest set with mass >= top_p. ``[B, V]``.

    >>> x = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    >>> filter_logits(x, top_p=0.7).isinf().tolist()
    [[False, False, True]]
    """
    if top_k and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, idx = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        # drop a token when the mass before it already reaches top_p (the first token always stays)
        drop = (probs.cumsum(-1) - probs) >= top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)
    return logits


def sample_next(
    logp: torch.Tensor,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
    generators: list[torch.Generator] | None = None,
    probs: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sample one token per row of ``logp [B, V]`` → ``[B]`` by inverting the CDF with one uniform per row.

    One uniform per row (not one per vocabulary entry, as Gumbel-max or ``torch.multinomial`` draw) keeps
    seeded sampling cheap: with ``generators`` each row draws from its own generator, so a row's sample does not
    depend on the rest of the batch. ``probs`` (= ``logp.exp()``, when the caller has it) is reused when
    temperature and filters leave the distribution as it is.
    """
    if temperature == 0:
        return logp.argmax(-1)
    if probs is None or temperature != 1.0 or top_k or top_p < 1.0:
        probs = filter_logits(logp / temperature, top_k, top_p).softmax(-1)
    if generators is None:
        u = torch.rand(probs.shape[0], 1, dtype=torch.float64, device=probs.device)
    else:
        u = torch.cat([torch.rand(1, 1, dtype=torch.float64, generator=g, device=probs.device) for g in generators])
    return _invert_cdf(probs, u)


def _invert_cdf(probs: torch.Tensor, u: torch.Tensor, block: int = 256) -> torch.Tensor:
    """Smallest index whose cumulative mass exceeds ``u · total``, per row. ``probs [B, V]``, ``u [B, 1]``.

    Two levels keep it cheap and exact: float64 sums of blocks of ``block`` tokens locate the block, then a
    cumulative sum inside that block alone locates the token (a full float64 cumsum over V cost ~15 ms a step).
    """
    b, v = probs.shape
    pad = (-v) % block
    p = torch.nn.functional.pad(probs, (0, pad)) if pad else probs
    p = p.view(b, -1, block)
    mass = p.sum(-1, dtype=torch.float64)  # [B, V/block]
    cum = mass.cumsum(-1)
    target = u * cum[:, -1:]
    blk = torch.searchsorted(cum, target, right=True).clamp_(max=cum.shape[-1] - 1)  # [B, 1]
    before = cum.gather(-1, blk) - mass.gather(-1, blk)
    inside = p.gather(1, blk[:, :, None].expand(-1, -1, block))[:, 0].double().cumsum(-1)  # [B, block]
    pos = torch.searchsorted(inside, target - before, right=True).clamp_(max=block - 1)
    return (blk * block + pos)[:, 0].clamp_(max=v - 1)
