"""H³GNNs (arXiv 2504.11699): a joint structural node encoder trained teacher–student with hardness-aware masking.

Encoder (per node v, ``[N, d_in] → [N, d]``): four tokens
  t₁ = W₁x_v (linear), t₂ = WGCN₁(X)_v (1 hop), t₃ = WGCN_K(X)_v (K hops), t₄ = W₄((I − βÂ)^P X)_v (high-pass SGC),
plus a learnable CLS token, fused by one Transformer block (FFN 4d); the CLS output is the embedding.
WGCN: GCN layers on A_w with per-edge weights (A_w)_uv = σ(w_uv), w initialised to 1, then BN, ReLU, dropout.

Training (BYOL-style): the student Φ sees X with masked rows replaced by a learnable token and predicts, through
a predictor q, the EMA teacher Ψ's embeddings of the full graph, for **all** nodes:
  L = (1/N) Σ_v 2 − 2 cos(q(Φ(X̃))_v, Ψ(X)_v),    Ψ ← mΨ + (1 − m)Φ.
Hardness masking: d_v = ‖ŝ_v − t̂_v‖² (normalised embeddings, previous step); after warm-up each node is masked
with probability p_v = R(1 − r) + R·r·d_v / max_u d_u (R: mask rate, r: share steered by hardness).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn


class WGCN(nn.Module):
    """GCN layers with learnable edge weights: H ← Dropout(ReLU(BN(D̃^-½(A_w + I)D̃^-½ H W))), (A_w)_uv = σ(w_uv).

    One weight per directed edge of ``edge_index`` (``[2, E]``), shared by the layers; passed to PyG's
    ``GCNConv`` as ``edge_weight`` so it enters the normalisation (with a SparseTensor ``adj_t`` it would not).
    """

    def __init__(self, d_in: int, d_out: int, layers: int, num_edges: int, dropout: float = 0.0):
        from torch_geometric.nn import GCNConv

        super().__init__()
        self.w = nn.Parameter(torch.ones(num_edges))
        self.convs = nn.ModuleList(GCNConv(d_in if i == 0 else d_out, d_out) for i in range(layers))
        self.norms = nn.ModuleList(nn.BatchNorm1d(d_out) for _ in range(layers))
        self.dropout = dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        ew = torch.sigmoid(self.w)
        for conv, bn in zip(self.convs, self.norms):
            x = F.dropout(F.relu(bn(conv(x, edge_index, ew))), self.dropout, self.training)
        return x


def gcn_adjacency(edge_index: torch.Tensor, n: int) -> torch.Tensor:
    """Â = D̃^-½(A + I)D̃^-½ as a sparse ``[N, N]`` matrix, row = target (as ``GCNConv`` aggregates)."""
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    ei, ew = gcn_norm(edge_index, None, n, add_self_loops=True)
    return torch.sparse_coo_tensor(ei.flip(0), ew, (n, n), check_invariants=True)


def high_pass(x: torch.Tensor, edge_index: torch.Tensor, beta: float, power: int) -> torch.Tensor:
    """(I − βÂ)^P X (``[N, d]``): keeps what differs from the neighbourhood."""
    adj = gcn_adjacency(edge_index, x.size(0))
    for _ in range(power):
        x = x - beta * torch.sparse.mm(adj, x)
    return x


class H3Encoder(nn.Module):
    """The four structural tokens fused by self-attention; ``forward(x [N, d_in], edge_index) → [N, d]``."""

    def __init__(
        self,
        d_in: int,
        d: int,
        num_edges: int,
        hops: int = 2,
        beta: float = 1.0,
        power: int = 1,
        heads: int = 4,
        dropout: float = 0.1,
    ):
        super().__init__()
        self.lin = nn.Linear(d_in, d)
        self.one_hop = WGCN(d_in, d, 1, num_edges, dropout)
        self.k_hop = WGCN(d_in, d, hops, num_edges, dropout)
        self.hp = nn.Linear(d_in, d)
        self.beta, self.power = beta, power
        self.tokens = nn.Parameter(torch.zeros(1, 5, d))  # CLS (row 0) plus a type embedding per token
        nn.init.normal_(self.tokens, std=0.02)
        # no dropout inside the fusion block: on CPU its masks cost more than the rest of the step
        self.fuse = nn.TransformerEncoderLayer(d, heads, 4 * d, 0.0, batch_first=True, norm_first=True)

    def token_stack(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """``[N, 4, d]``: linear, 1-hop WGCN, K-hop WGCN and high-pass tokens."""
        hp = self.hp(high_pass(x, edge_index, self.beta, self.power))
        return torch.stack([self.lin(x), self.one_hop(x, edge_index), self.k_hop(x, edge_index), hp], 1)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        t = self.token_stack(x, edge_index)
        t = torch.cat([torch.zeros_like(t[:, :1]), t], 1) + self.tokens
        return self.fuse(t)[:, 0]


def hardness_mask_probs(hardness: torch.Tensor, rate: float, steer: float) -> torch.Tensor:
    """p_v = R(1 − r) + R·r·d_v / max_u d_u: the base rate R(1 − r) for every node, the rest by hardness."""
    return rate * (1 - steer) + rate * steer * hardness / hardness.max().clamp_min(1e-12)


def byol_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over nodes of 2 − 2 cos(pred_v, target_v) (``[N, d]`` each; no gradient into the target)."""
    return (2 - 2 * F.cosine_similarity(pred, target.detach(), dim=-1)).mean()


class TeacherStudent(nn.Module):
    """Student encoder + predictor, EMA teacher, and the learnable mask token; ``step`` returns the loss."""

    def __init__(self, encoder: nn.Module, d_in: int, d: int, momentum: float = 0.99):
        super().__init__()
        self.student = encoder
        self.teacher = copy.deepcopy(encoder).requires_grad_(False)
        self.predictor = nn.Sequential(nn.Linear(d, d), nn.PReLU(), nn.Linear(d, d))
        self.mask_token = nn.Parameter(torch.zeros(1, d_in))
        self.momentum = momentum
        self.hardness: torch.Tensor | None = None  # d_v of the previous step

    def loss(self, x: torch.Tensor, edge_index: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        xm = torch.where(mask[:, None], self.mask_token.expand_as(x), x)
        pred = self.predictor(self.student(xm, edge_index))
        with torch.no_grad():
            target = self.teacher(x, edge_index)
            self.hardness = (F.normalize(pred, dim=-1) - F.normalize(target, dim=-1)).pow(2).sum(-1)
        return byol_loss(pred, target)

    @torch.no_grad()
    def update_teacher(self) -> None:
        for pt, ps in zip(self.teacher.parameters(), self.student.parameters()):
            pt.mul_(self.momentum).add_(ps.detach(), alpha=1 - self.momentum)
        for bt, bs in zip(self.teacher.buffers(), self.student.buffers()):
            bt.copy_(bs)
