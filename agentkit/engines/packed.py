"""Scoring many continuations of nested contexts in one forward pass (a "trunk" and its branches).

TIPS scores every gold answer after every tool result of a trajectory: the contexts are prefixes of one
another. Instead of a forward pass per (context, continuation), the longest context (the trunk) is encoded
once and each continuation is appended after it as a branch that sees only its own context's part of the trunk:

    ids       = trunk[0:L] ++ c_1 ++ c_2 ++ …               (Q = L + Σ k_r tokens)
    positions = 0..L-1,  l_1..l_1+k_1-1,  l_2..,  …        (a branch continues its context's positions)
    mask[q, k] = k ≤ q                      for q in the trunk (causal)
               = k < l_r  or  s_r ≤ k ≤ q   for q in branch r (its context's prefix, then causal in itself)

where l_r is row r's context length and s_r where its branch starts. The logprob of c_r[0] is read at trunk
position l_r − 1, of c_r[j] at the branch's position j − 1, so the result equals scoring each row on its own
(up to float rounding). Models with sliding-window layers get a second mask that also hides keys more than the
window behind the query (by position), passed as a per-layer-type mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Trunk:
    """A trunk's ids and the rows scored on it: ``rows[i]`` has context length ``ctx_lens[i]`` (a prefix of
    ``ids``) and continuation ``conts[i]``."""

    ids: list[int]
    rows: list[int]
    ctx_lens: list[int]
    conts: list[list[int]]

    @property
    def length(self) -> int:
        return len(self.ids) + sum(map(len, self.conts))


def group_trunks(contexts: list[list[int]], continuations: list[list[int]]) -> list[Trunk]:
    """Group rows whose contexts are prefixes of one another; each group's longest context is its trunk.

    Sorted lexicographically, a context comes right before the contexts it is a prefix of, so one pass
    chains each context to the next while it is a prefix of it.

    Examples:
        >>> [t.rows for t in group_trunks([[1, 2, 3], [1], [1, 2], [4]], [[9]] * 4)]
        [[1, 2, 0], [3]]
    """
    order = sorted(range(len(contexts)), key=lambda i: (contexts[i], i))
    chains: list[list[int]] = []
    for i in order:
        if chains:
            last = contexts[chains[-1][-1]]
            if len(last) <= len(contexts[i]) and contexts[i][: len(last)] == last:
                chains[-1].append(i)
                continue
        chains.append([i])
    return [Trunk(contexts[c[-1]], c, [len(contexts[i]) for i in c], [continuations[i] for i in c]) for c in chains]


def pack(trunks: list[Trunk], pad_id: int, window: int | None = None):
    """One batch of packed trunks: ``ids``/``positions`` ``[B, Q]``, boolean masks ``[B, 1, Q, Q]`` (full, and
    sliding when ``window`` is set, else None) and, per row of each trunk, the indices (into ``[B·Q]``) of the
    logits that predict its continuation tokens. Padding slots attend only to themselves."""
    width = max(t.length for t in trunks)
    b = len(trunks)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    pos = torch.zeros((b, width), dtype=torch.long)
    mask = torch.eye(width, dtype=torch.bool).repeat(b, 1, 1)
    reads: list[list[list[int]]] = []
    for t_i, t in enumerate(trunks):
        n = len(t.ids)
        ids[t_i, :n] = torch.tensor(t.ids)
        pos[t_i, :n] = torch.arange(n)
        mask[t_i, :n, :n] = torch.ones(n, n, dtype=torch.bool).tril()
        start, rows = n, []
        for ctx_len, cont in zip(t.ctx_lens, t.conts):
            k = len(cont)
            end = start + k
            if k:
                ids[t_i, start:end] = torch.tensor(cont)
                pos[t_i, start:end] = torch.arange(ctx_len, ctx_len + k)
                mask[t_i, start:end, :ctx_len] = True
                mask[t_i, start:end, start:end] = torch.ones(k, k, dtype=torch.bool).tril()
            base = t_i * width
            rows.append([base + ctx_len - 1] + [base + j for j in range(start, end - 1)] if k else [])
            start = end
        reads.append(rows)
    sliding = None
    if window is not None:
        dist = pos[:, :, None] - pos[:, None, :]
        sliding = (mask & (dist < window))[:, None]
    return ids, pos, mask[:, None], sliding, reads


def budget_batches(trunks: list[Trunk], max_tokens: int, max_rows: int, max_waste: float = 0.1) -> list[list[Trunk]]:
    """Trunks in batches of at most ``max_rows`` whose padded size (rows × longest) stays under ``max_tokens``
    and wastes at most ``max_waste`` of it on padding (a single trunk over the budget gets a batch of its own).
    Trunks of a few hundred tokens already fill a CPU's matrix units, where padding is pure loss."""
    out: list[list[Trunk]] = []
    cur: list[Trunk] = []
    for t in sorted(trunks, key=lambda t: -t.length):
        if cur:
            padded = (len(cur) + 1) * cur[0].length
            real = sum(x.length for x in cur) + t.length
            if len(cur) + 1 > max_rows or padded > max_tokens or padded - real > max_waste * padded:
                out.append(cur)
                cur = []
        cur.append(t)
    if cur:
        out.append(cur)
    return out
