"""APF (arXiv 2504.14250): anomaly-aware pre-training and fine-tuning for graph anomaly detection.

- Rayleigh quotient of a signal X ``[N, d]`` on a graph with Laplacian L = D − A:
  RQ(X) = tr(XᵀLX) / tr(XᵀX) = Σ_{(i,j) ∈ E, i<j} ‖x_i − x_j‖² / Σ_i ‖x_i‖² (large: the signal varies across edges).
  Anomalies differ from their neighbours, so the subgraphs around them have large RQ. Each node keeps, of
  ``candidates`` random-walk subgraphs inside its 2-hop neighbourhood, the one whose centred features have the
  largest RQ (label-free; the rule for choosing among 2-hop subgraphs is our reading of the paper).
- Two learnable Chebyshev filters on L̂ = L_sym − I (spectrum in [−1, 1]): g(X) = Σ_k w_k T_k(L̂) X with
  T₀ = X, T₁ = L̂X, T_k = 2L̂T_{k−1} − T_{k−2}; the low-pass one starts at g(λ) = 1 − λ/2 (w = [½, −½, 0, …]),
  the high-pass one at λ/2 (w = [½, ½, 0, …]); Z_L = f_L(g_L X), Z_H = f_H(g_H X).
- Pre-training, two DGI objectives (bilinear discriminator D(z, s) = σ(zᵀWs), row-shuffled X as negatives):
  Z_L against the global summary s = σ(mean_v Z_L,v); Z_H against each node's summary s_v = σ(mean_{u∈S_v} Z_H,u)
  over its RQ subgraph S_v.
- Fine-tuning: gate C = σ(XW_c + b) ``[N, h]``, Z = C ⊙ Z_L + (1 − C) ⊙ Z_H, a classifier on Z, and the
  anomaly-aware gate regulariser BCE(mean_j C_vj, p^a if v is an anomaly else p^n) with p^a ≤ p^n (anomalies lean
  on the high-pass view).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def rayleigh_quotient(x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """tr(XᵀLX)/tr(XᵀX) of ``x [N, d]`` (or ``[N]``) on the undirected graph ``edge_index`` (both directions listed)."""
    x = x if x.dim() == 2 else x[:, None]
    src, dst = edge_index
    num = (x[src] - x[dst]).pow(2).sum() / 2  # each undirected edge is listed twice
    return num / x.pow(2).sum().clamp_min(1e-12)


def rq_subgraphs(
    x: torch.Tensor, edge_index: torch.Tensor, candidates: int = 8, walks: int = 4, seed: int = 0
) -> list[torch.Tensor]:
    """For every node v, the node set S_v (v first) of the candidate 2-hop subgraph with the largest Rayleigh
    quotient of the centred features; a candidate is v plus the nodes of ``walks`` random walks of length 2.

    Vectorised over all N·candidates subgraphs: each is a row of m = 1 + 2·walks node ids (repeats masked), its
    edges found by looking every pair up in the sorted edge keys u·N + v.
    """
    n = x.size(0)
    order = torch.argsort(edge_index[0], stable=True)
    dst = edge_index[1][order]
    deg = torch.bincount(edge_index[0], minlength=n)
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), deg.cumsum(0)])
    g = torch.Generator().manual_seed(seed)

    def step(nodes: torch.Tensor) -> torch.Tensor:
        d = deg[nodes]
        pick = (torch.rand(nodes.shape, generator=g) * d).long()
        return torch.where(d > 0, dst[(ptr[nodes] + pick).clamp_max(max(len(dst) - 1, 0))], nodes)

    start = torch.arange(n).repeat_interleave(candidates)[:, None].expand(-1, walks)  # [N·c, walks]
    one = step(start)
    cand = torch.cat([start[:, :1], one, step(one)], 1).sort(1).values  # [N·c, m]
    valid = torch.ones_like(cand, dtype=torch.bool)
    valid[:, 1:] = cand[:, 1:] != cand[:, :-1]
    rq = subgraph_rq(x - x.mean(0), edge_index, cand, valid)
    best = rq.view(n, candidates).argmax(1) + torch.arange(n) * candidates
    out = []
    for v, row in enumerate(best.tolist()):
        nodes = cand[row][valid[row]]
        out.append(torch.cat([torch.tensor([v]), nodes[nodes != v]]))
    return out


def subgraph_rq(x: torch.Tensor, edge_index: torch.Tensor, cand: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The Rayleigh quotient of ``x`` on each induced subgraph: ``cand [S, m]`` node ids per row (``valid``
    masks repeats) → ``[S]``. Edges are found by looking every pair u < v (by position) up in the sorted keys u·N + v."""
    n, m = x.size(0), cand.size(1)
    keys = torch.sort(edge_index[0] * n + edge_index[1]).values
    pair = cand[:, :, None] * n + cand[:, None, :]
    pos = torch.searchsorted(keys, pair).clamp_max(max(len(keys) - 1, 0))
    upper = torch.triu(torch.ones(m, m, dtype=torch.bool), 1)
    edge = (keys[pos] == pair) & upper & valid[:, :, None] & valid[:, None, :] if len(keys) else pair < 0
    xs = x[cand]  # [S, m, d]
    diff = (xs[:, :, None] - xs[:, None, :]).pow(2).sum(-1)  # [S, m, m]
    return (diff * edge).sum((1, 2)) / (xs.pow(2).sum(-1) * valid).sum(1).clamp_min(1e-12)


def two_hop_sets(edge_index: torch.Tensor, n: int) -> list[torch.Tensor]:
    """Every node's 2-hop neighbourhood (itself first): the rows of (A + I)² (the no-RQ ablation's readout)."""
    import scipy.sparse as sp

    a = sp.coo_matrix((np.ones(edge_index.size(1)), edge_index.numpy()), (n, n)).tocsr() + sp.eye(n, format="csr")
    a2 = (a @ a).tocsr()
    rows = (torch.from_numpy(a2.indices[a2.indptr[v] : a2.indptr[v + 1]]).long() for v in range(n))
    return [torch.cat([torch.tensor([v]), row[row != v]]) for v, row in enumerate(rows)]


def membership(sets: list[torch.Tensor], n: int) -> torch.Tensor:
    """Row-normalised sparse ``[N, N]``: row v averages the nodes of sets[v] (the per-node readout)."""
    rows = torch.cat([torch.full((len(s),), v) for v, s in enumerate(sets)])
    cols = torch.cat(sets)
    vals = torch.cat([torch.full((len(s),), 1.0 / len(s)) for s in sets])
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, (n, n), check_invariants=True).coalesce()


def chebyshev_basis(x: torch.Tensor, edge_index: torch.Tensor, order: int) -> torch.Tensor:
    """``[order + 1, N, d]``: T_k(L̂)X for k = 0 … order, L̂ = L_sym − I = −D^-½AD^-½ (isolated nodes: 0)."""
    from torch_geometric.utils import degree

    n = x.size(0)
    src, dst = edge_index
    dinv = degree(src, n).clamp_min(1).pow(-0.5)
    lhat = torch.sparse_coo_tensor(edge_index.flip(0), -dinv[src] * dinv[dst], (n, n), check_invariants=True).coalesce()
    out = [x, torch.sparse.mm(lhat, x)]
    for _ in range(order - 1):
        out.append(2 * torch.sparse.mm(lhat, out[-1]) - out[-2])
    return torch.stack(out[: order + 1])


class ChebFilter(nn.Module):
    """g(X) = Σ_k w_k T_k(L̂)X on a precomputed basis ``[K+1, N, d]``; ``init`` names the starting response."""

    INITS = {"low": (0.5, -0.5), "high": (0.5, 0.5), "band": (0.5, 0.0, -0.5)}  # 1 − λ/2, λ/2, λ(2 − λ)

    def __init__(self, order: int, init: str, learnable: bool = True):
        super().__init__()
        w = torch.zeros(order + 1)
        start = torch.tensor(self.INITS[init])
        w[: len(start)] = start
        self.w = nn.Parameter(w, requires_grad=learnable)

    def forward(self, basis: torch.Tensor) -> torch.Tensor:
        return torch.einsum("k,knd->nd", self.w, basis)


def mlp(d_in: int, hidden: int, dropout: float = 0.0) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.PReLU(), nn.Dropout(dropout), nn.Linear(hidden, hidden))


class APF(nn.Module):
    """Both branches, the DGI discriminators and the fine-tuning head; ``high=False`` drops the high-pass branch."""

    def __init__(self, d_in: int, hidden: int, order: int, high: bool = True, dropout: float = 0.0):
        super().__init__()
        self.g_low, self.f_low = ChebFilter(order, "low"), mlp(d_in, hidden, dropout)
        self.high = high
        if high:
            self.g_high, self.f_high = ChebFilter(order, "high"), mlp(d_in, hidden, dropout)
            self.w_high = nn.Parameter(torch.eye(hidden) * 0.1)
        self.w_low = nn.Parameter(torch.eye(hidden) * 0.1)
        self.gate = nn.Linear(d_in, hidden)
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def views(self, basis: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        z_low = self.f_low(self.g_low(basis))
        return z_low, (self.f_high(self.g_high(basis)) if self.high else None)

    def pretrain_loss(self, basis: torch.Tensor, shuffled: torch.Tensor, readout: torch.Tensor) -> torch.Tensor:
        """DGI on each view: BCE of D(z_v, s) = 1 for the real rows and 0 for the shuffled ones."""
        (zl, zh), (nl, nh) = self.views(basis), self.views(shuffled)
        s = torch.sigmoid(zl.mean(0))
        loss = dgi_bce(zl @ self.w_low @ s, nl @ self.w_low @ s)
        if self.high:
            sv = torch.sigmoid(torch.sparse.mm(readout, zh))  # per-node summary over its RQ subgraph
            loss = loss + dgi_bce(((zh @ self.w_high) * sv).sum(-1), ((nh @ self.w_high) * sv).sum(-1))
        return loss

    def forward(self, x: torch.Tensor, basis: torch.Tensor, gated: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """``(anomaly logits [N], gate C [N, h])``; ``gated=False`` fuses with C = ½ (the no-gate ablation)."""
        zl, zh = self.views(basis)
        if zh is None:
            return self.head(zl).squeeze(-1), torch.ones_like(zl)
        c = torch.sigmoid(self.gate(x)) if gated else torch.full_like(zl, 0.5)
        return self.head(c * zl + (1 - c) * zh).squeeze(-1), c


def dgi_bce(pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """DGI's loss on discriminator logits: BCE(pos, 1) + BCE(neg, 0), averaged over nodes."""
    return F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos)) + F.binary_cross_entropy_with_logits(
        neg, torch.zeros_like(neg)
    )


def gate_regulariser(gate: torch.Tensor, y: torch.Tensor, p_anomaly: float, p_normal: float) -> torch.Tensor:
    """BCE(mean_j C_vj, p^a if y_v = 1 else p^n), averaged over the labelled nodes given (``gate [n, h]``, ``y [n]``)."""
    target = torch.where(y.bool(), torch.tensor(p_anomaly), torch.tensor(p_normal))
    return F.binary_cross_entropy(gate.mean(-1).clamp(1e-6, 1 - 1e-6), target)
