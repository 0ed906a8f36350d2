"""Self-consistency training for self-interpretable GNNs (SC), on GSAT.

GSAT (Miao et al. 2022): a GIN computes node embeddings h = emb(G); an explainer MLP scores each edge from its
endpoints, a_uv = MLP([h_u ‖ h_v]); the attention α = σ(a) (concrete-sampled in training, symmetrised over the
two directions) scales every message of the same GIN, whose pooled output is classified:
  L_GSAT = CE(f(G, α), y) + reg · mean_e KL(Bern(α_e) ‖ Bern(r)).
SC then freezes the GIN layers and fine-tunes the explainer and the classifier head with
  L = L_GSAT + λ_sc · mean_e |α_old,e − α_new,e|,
  α_old = σ(expl(emb(G).detach())),   α_new = σ(expl(emb(G, edge_atten = α_old).detach())):
the explanation of the explanation-weighted graph should be the explanation itself.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class AttnGIN(nn.Module):
    """GIN layers h_v ← MLP((1 + ε)h_v + Σ_{u→v} α_uv h_u), sum pooling and a linear head.

    ``emb(x [N, d_in], edge_index [2, E], edge_atten [E] | None) → [N, hidden]``;
    ``forward(x, edge_index, batch [N], edge_atten) → logits [B, classes]``.
    """

    def __init__(self, d_in: int, hidden: int, layers: int, classes: int):
        super().__init__()
        self.node_enc = nn.Linear(d_in, hidden)
        self.mlps = nn.ModuleList(
            nn.Sequential(nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, hidden))
            for _ in range(layers)
        )
        self.eps = nn.Parameter(torch.zeros(layers))
        self.head = nn.Linear(hidden, classes)

    def emb(self, x: torch.Tensor, edge_index: torch.Tensor, edge_atten: torch.Tensor | None = None) -> torch.Tensor:
        h = self.node_enc(x)
        src, dst = edge_index
        for i, mlp in enumerate(self.mlps):
            msg = h[src] if edge_atten is None else h[src] * edge_atten[:, None]
            h = mlp((1 + self.eps[i]) * h + torch.zeros_like(h).index_add_(0, dst, msg))
            if i < len(self.mlps) - 1:
                h = F.relu(h)
        return h

    def forward(self, x, edge_index, batch, edge_atten=None) -> torch.Tensor:
        from torch_geometric.nn import global_add_pool

        return self.head(global_add_pool(self.emb(x, edge_index, edge_atten), batch))


class Explainer(nn.Module):
    """Edge logits a_uv = MLP([h_u ‖ h_v]) (``[E]``), GSAT's extractor."""

    def __init__(self, hidden: int, dropout: float):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 1))

    def forward(self, h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([h[edge_index[0]], h[edge_index[1]]], -1)).squeeze(-1)


def symmetrise(att: torch.Tensor, edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """(α_uv + α_vu)/2 for every edge whose reverse exists (the graphs here are undirected)."""
    key = edge_index[0] * num_nodes + edge_index[1]
    rev = edge_index[1] * num_nodes + edge_index[0]
    order = torch.argsort(key)
    pos = torch.searchsorted(key[order], rev).clamp_max(len(key) - 1)
    found = key[order][pos] == rev
    return torch.where(found, (att + att[order][pos]) / 2, att)


def concrete(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Binary concrete sample σ((a + log u − log(1 − u))/τ), u ~ U(0, 1) (GSAT's training-time attention)."""
    u = torch.rand_like(logits).clamp(1e-10, 1 - 1e-10)
    return torch.sigmoid((logits + u.log() - (1 - u).log()) / temperature)


def bernoulli_kl(att: torch.Tensor, r: float) -> torch.Tensor:
    """mean_e KL(Bern(α_e) ‖ Bern(r)) = α log(α/r) + (1 − α) log((1 − α)/(1 − r))."""
    a = att.clamp(1e-6, 1 - 1e-6)
    return (a * torch.log(a / r) + (1 - a) * torch.log((1 - a) / (1 - r))).mean()


def sc_loss(
    gin: AttnGIN, explainer: Explainer, x: torch.Tensor, edge_index: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean |α_old − α_new|, α_old)``: the self-consistency gap of the explanation, re-explained."""
    n = x.size(0)
    old = symmetrise(torch.sigmoid(explainer(gin.emb(x, edge_index).detach(), edge_index)), edge_index, n)
    new = symmetrise(torch.sigmoid(explainer(gin.emb(x, edge_index, old).detach(), edge_index)), edge_index, n)
    return (old - new).abs().mean(), old
