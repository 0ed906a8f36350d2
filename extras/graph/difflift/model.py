"""∂lift (DiffLift): learned liftings of graphs to hypergraphs and cell complexes, trained end to end.

A lifting adds higher-order cells, each a weighted node set: ``Cells(node [P], cell [P], weight [P])`` lists the
(node, cell, weight) incidences (a hyperedge's members, a 2-cell's boundary nodes). Learned liftings (z = GIN(X)):
- hypergraph: each node v proposes a hyperedge {v} ∪ kNN_{k_v}(z_v), with k_v = gumbel_softmax(MLP(z_v), τ = 1,
  hard) over k ∈ [k_min, k_max] (the j-th neighbour's membership m_j = Σ_{k ≥ j} onehot_k keeps the straight-
  through gradient), kept with b ~ Bernoulli(p), p = σ(MLP(Σ_j m_j z_j / Σ_j m_j)), STE b + p − sg(p);
- cell complex: each candidate edge (v, kNN_j(z_v)) gets s = σ(10·MLP([z_u ‖ z_v])) and is added when s > ½ (STE
  weight 1{s > ½} + s − sg(s)); every triangle of the graph plus its added edges becomes a 2-cell weighted by the
  product of its edges' weights (cycles of length 3, as the official code keeps from ``nx.cycle_basis``).
Static liftings (baselines): closed 1-hop neighbourhoods, fixed-k feature kNN, and the cycle basis (2-cells).
The topological network (UniGCN-style): cell features are weighted means of their nodes,
h_c = Σ_v w_vc h_v / Σ_v w_vc, and each layer
h_v ← ReLU(W_s h_v + W_e Σ_{u ∈ N(v)} a_uv h_u / √(d_u d_v) + W_c Σ_{c ∋ v} w_vc h_c / √(d_v d_c)) (UniGCN's normalisation).
Training uses only the task loss.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn


class Cells(NamedTuple):
    node: torch.Tensor  # [P] node of each incidence
    cell: torch.Tensor  # [P] cell of each incidence (0 … num_cells − 1)
    weight: torch.Tensor  # [P] incidence weight (1 for static liftings; STE weights for learned ones)


def knn(z: torch.Tensor, k: int, batch: torch.Tensor | None = None) -> torch.Tensor:
    """``[N, k]`` indices of each row's k nearest other rows (Euclidean), within its own graph when ``batch`` is
    given; a row with fewer than k partners repeats its farthest one."""
    d = torch.cdist(z, z)
    d.fill_diagonal_(float("inf"))
    if batch is not None:
        d = d.masked_fill(batch[:, None] != batch[None, :], float("inf"))
    idx = d.topk(min(k, z.size(0) - 1), largest=False).indices
    far = torch.gather(d, 1, idx).isinf()  # not a partner: fall back to the nearest real one (or self)
    first = torch.where(far[:, :1], torch.arange(z.size(0))[:, None], idx[:, :1])
    return torch.where(far, first.expand_as(idx), idx)


def static_hyperedges(members: torch.Tensor) -> Cells:
    """One hyperedge per node from ``members [N, k]`` (plus the node itself), weight 1."""
    n, k = members.shape
    node = torch.cat([torch.arange(n), members.reshape(-1)])
    cell = torch.cat([torch.arange(n), torch.arange(n).repeat_interleave(k)])
    return Cells(node, cell, torch.ones(len(node)))


def closed_neighbourhoods(edge_index: torch.Tensor, n: int) -> Cells:
    """One hyperedge per node: the node and its neighbours (the static 1-hop lifting)."""
    node = torch.cat([torch.arange(n), edge_index[0]])
    cell = torch.cat([torch.arange(n), edge_index[1]])
    return Cells(node, cell, torch.ones(len(node)))


def cycle_cells(edge_index: torch.Tensor, n: int, max_len: int) -> Cells:
    """2-cells from networkx's cycle basis of the graph, cycles of length ≤ ``max_len`` (the static cycle lifting)."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edge_index.t().tolist())
    cycles = [c for c in nx.cycle_basis(g) if len(c) <= max_len]
    node = torch.tensor([v for c in cycles for v in c], dtype=torch.long)
    cell = torch.tensor([i for i, c in enumerate(cycles) for _ in c], dtype=torch.long)
    return Cells(node, cell, torch.ones(len(node)))


def triangles(edge_index: torch.Tensor, weight: torch.Tensor, n: int) -> Cells:
    """Every triangle u < v < w of the (undirected, weighted) graph as a 2-cell on its three nodes, weighted by
    the product of its three edge weights (so a triangle closed by a learned edge carries that edge's gradient)."""
    keep = edge_index[0] < edge_index[1]
    ei, w = edge_index[:, keep], weight[keep]
    adj = torch.zeros(n, n)
    adj[ei[0], ei[1]] = adj[ei[1], ei[0]] = 1.0
    wmat = torch.zeros(n, n, dtype=w.dtype).index_put((ei[0], ei[1]), w).index_put((ei[1], ei[0]), w)
    u, v = ei
    common = (adj[u] * adj[v]).bool() & (torch.arange(n)[None] > v[:, None])  # w > v > u
    e_idx, third = common.nonzero(as_tuple=True)
    if len(e_idx) == 0:
        empty = torch.empty(0, dtype=torch.long)
        return Cells(empty, empty, torch.empty(0))
    a, b, c = u[e_idx], v[e_idx], third
    tw = wmat[a, b] * wmat[a, c] * wmat[b, c]
    t = torch.arange(len(a))
    return Cells(torch.cat([a, b, c]), t.repeat(3), tw.repeat(3))


class LearnedHyperedges(nn.Module):
    """The hypergraph ∂lift: a learned size k_v ∈ [k_min, k_max] and keep-probability per node's kNN hyperedge."""

    def __init__(self, d: int, k_min: int = 2, k_max: int = 10):
        super().__init__()
        self.k_min, self.k_max = k_min, k_max
        self.size = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, k_max - k_min + 1))
        self.keep = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1))

    def forward(self, z: torch.Tensor, batch: torch.Tensor | None = None, tau: float = 1.0) -> Cells:
        n = z.size(0)
        nbr = knn(z.detach(), self.k_max, batch)  # [N, k_max]
        onehot = (
            F.gumbel_softmax(self.size(z), tau=tau, hard=True)
            if self.training
            else F.one_hot(self.size(z).argmax(-1), self.k_max - self.k_min + 1).float()
        )
        # m_j = 1 if the chosen k ≥ j: neighbours 1 … k_min always, then a reversed cumulative sum of the one-hot
        tail = onehot.flip(-1).cumsum(-1).flip(-1)  # [N, K]: tail[:, i] = P(k ≥ k_min + i)
        member = torch.cat([torch.ones(n, self.k_min - 1), tail], 1)[:, : nbr.size(1)]  # [N, k_max]
        z_e = (z[nbr] * member[..., None]).sum(1) + z
        p = torch.sigmoid(self.keep(z_e / (member.sum(1, keepdim=True) + 1))).squeeze(-1)
        b = torch.bernoulli(p.detach()) if self.training else (p > 0.5).float()
        kept = b + p - p.detach()  # straight-through
        node = torch.cat([torch.arange(n), nbr.reshape(-1)])
        cell = torch.cat([torch.arange(n), torch.arange(n).repeat_interleave(nbr.size(1))])
        weight = torch.cat([kept, (member * kept[:, None]).reshape(-1)])
        return Cells(node, cell, weight)


class LearnedEdges(nn.Module):
    """The cell-complex ∂lift: score each node's k kNN edges, add those with σ(10·MLP) > ½ (STE weights)."""

    def __init__(self, d: int, k: int = 5, sharpen: float = 10.0):
        super().__init__()
        self.k, self.sharpen = k, sharpen
        self.score = nn.Sequential(nn.Linear(2 * d, d), nn.ReLU(), nn.Linear(d, 1))

    def forward(self, z: torch.Tensor, batch: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(edge_index [2, 2E'], weight [2E'])`` of the added edges, both directions."""
        nbr = knn(z.detach(), self.k, batch)
        src = torch.arange(z.size(0)).repeat_interleave(nbr.size(1))
        dst = nbr.reshape(-1)
        s = torch.sigmoid(self.sharpen * self.score(torch.cat([z[src], z[dst]], -1))).squeeze(-1)
        w = (s > 0.5).float() + s - s.detach()
        keep = (s > 0.5) & (src != dst)
        ei = torch.stack([src[keep], dst[keep]])
        return torch.cat([ei, ei.flip(0)], 1), torch.cat([w[keep], w[keep]])


class TopoNet(nn.Module):
    """The UniGCN-style network over nodes, (weighted) edges and higher-order cells; ``lifting`` names how the
    cells are made (``none``, ``one_hop``, ``knn``, ``cycle``, ``hyper``, ``cell``)."""

    def __init__(
        self,
        d_in: int,
        d: int,
        classes: int,
        layers: int = 2,
        lifting: str = "hyper",
        dropout: float = 0.5,
        k_min: int = 2,
        k_max: int = 10,
        graph_level: bool = False,
    ):
        from torch_geometric.nn import GINConv

        super().__init__()
        self.lifting, self.dropout, self.graph_level = lifting, dropout, graph_level
        self.inp = nn.Linear(d_in, d)
        self.self_w = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))
        self.edge_w = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(layers))
        self.cell_w = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(layers))
        self.head = nn.Linear(d, classes)
        if lifting in ("hyper", "cell"):  # the embedding the learned lifting reads (a GIN, as in the paper)
            self.gin = GINConv(nn.Sequential(nn.Linear(d_in, d), nn.ReLU(), nn.Linear(d, d)))
            self.lift = LearnedHyperedges(d, k_min, k_max) if lifting == "hyper" else LearnedEdges(d, k_max // 2)

    def cells(self, x, edge_index, batch, static: Cells | None):
        """``(edge_index, edge_weight, cells)`` that the layers run on."""
        ew = torch.ones(edge_index.size(1))
        if self.lifting not in ("hyper", "cell"):
            return edge_index, ew, static
        z = self.gin(x, edge_index)
        if self.lifting == "hyper":
            return edge_index, ew, self.lift(z, batch)
        added, aw = self.lift(z, batch)
        ei, w = torch.cat([edge_index, added], 1), torch.cat([ew, aw])
        return ei, w, triangles(ei, w, x.size(0))

    def forward(self, x, edge_index, batch=None, static: Cells | None = None) -> torch.Tensor:
        ei, ew, cells = self.cells(x, edge_index, batch, static)
        n = x.size(0)
        h = self.inp(x)
        deg = torch.ones(n).index_add_(0, ei[1], ew)  # weighted degree + 1
        norm = ew / torch.sqrt(deg[ei[0]] * deg[ei[1]])  # GCN's symmetric normalisation keeps degree information
        for sw, snd, cw in zip(self.self_w, self.edge_w, self.cell_w):
            h = F.dropout(h, self.dropout, self.training)
            out = sw(h) + snd(torch.zeros_like(h).index_add_(0, ei[1], norm[:, None] * h[ei[0]]))
            if cells is not None and len(cells.node):
                out = out + cw(cell_to_node(h, cells, n))
            h = F.relu(out)
        if self.graph_level:
            from torch_geometric.nn import global_add_pool

            h = global_add_pool(h, batch)
        return self.head(h)


def cell_to_node(h: torch.Tensor, cells: Cells, n: int) -> torch.Tensor:
    """UniGCN's cell-to-node step, ``[N, d]``: h_c = Σ_u w_uc h_u / Σ_u w_uc (a weighted mean of its nodes), then
    h_v ← Σ_{c ∋ v} w_vc h_c / √(d_v d_c), with d_v = 1 + Σ_c w_vc and d_c the weighted mean d_u of c's nodes
    (nodes in no cell get 0)."""
    node, cell, w = cells
    m = int(cell.max()) + 1
    wsum = torch.zeros(m).index_add_(0, cell, w).clamp_min(1e-6)
    hc = torch.zeros(m, h.size(1)).index_add_(0, cell, w[:, None] * h[node]) / wsum[:, None]
    dv = torch.ones(n).index_add_(0, node, w)
    dc = torch.zeros(m).index_add_(0, cell, w * dv[node]) / wsum
    coef = w / torch.sqrt(dv[node] * dc[cell].clamp_min(1e-6))
    return torch.zeros_like(h).index_add_(0, node, coef[:, None] * hc[cell])
