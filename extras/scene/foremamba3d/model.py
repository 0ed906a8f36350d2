r"""Fore-Mamba3D: a voxel encoder that runs Mamba only over the voxels a light head scores as foreground, with
regional-to-global windows and semantic / spatial fusion to undo what a long scan loses, against full-sequence
bidirectional Mamba over every non-empty voxel (LION-style) and a naive foreground-only Mamba.

The official repository (``pami-zwning/ForeMamba3D``) holds a README only, so the pieces below are our reading of
the paper:

* **Scoring**: a voxel MLP plus a small BEV convolution give each voxel a foreground logit (focal loss against the
  voxels inside cars and pedestrians); the top ``keep`` share (20 %) is encoded, the rest dropped.
* **Serialisation**: voxels sorted by the Hilbert index of their BEV cell (height as the minor key), at two
  rotations of the grid (0° and 90°), alternating between layers (LION's and PTv3's trick).
* **Mamba**: ``mambapy``'s pure-PyTorch selective scan (parallel scan; ``mamba-ssm`` needs CUDA), bidirectional
  (a forward and a backward block per layer, summed), residual and pre-normed.
* **RGSW** (regional-to-global sliding windows): the first layers scan windows of ``w`` consecutive voxels, every
  other one shifted by ``w/2``, and later layers wider windows up to the whole sequence, so a scan meets a distant
  object only after each object's own context is formed. A Mamba's response to a token decays with distance as the
  product of its ``exp(Δ·A)`` factors; windows bound that distance.
* **SASF** (semantic-assisted state-space fusion): after each layer (1) a semantic head (background, car,
  pedestrian) regroups the tokens by predicted class, a depthwise 1D convolution runs along that order and the result
  returns to the scan order; (2) a depthwise 3×3×3 convolution over each token's kept voxel neighbours (a
  submanifold convolution, gathered through a voxel index grid) mixes spatial neighbours that the 1D order put far
  apart. We apply the 3D convolution to the layer's output features, as the paper's figure draws it on the SSM
  states after the read-out.
* **Head**: the encoded voxels are max-pooled over height into a BEV map, and a CenterPoint-style head predicts
  per-class centre heatmaps (CenterNet focal loss) and sub-cell offsets (L1 at the true centres) at stride 2.

Shapes: one scene at a time (sequences differ in length); ``coords [V, 3]`` (z, y, x), ``features [V, F]``.

>>> enc = VoxelEncoder(grid=(4, 16, 16), dim=16, layers=2, keep=0.5, windows=[4, 0], sasf=True)
>>> coords = torch.stack(torch.meshgrid(torch.arange(2), torch.arange(6), torch.arange(5), indexing="ij"), -1).view(-1, 3)
>>> out = enc(coords, torch.randn(len(coords), 5))
>>> out["features"].shape, out["kept"].shape, out["heatmap"].shape
(torch.Size([60, 16]), torch.Size([60]), torch.Size([2, 8, 8]))
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

NEIGHBOURS = torch.stack(
    torch.meshgrid(torch.arange(-1, 2), torch.arange(-1, 2), torch.arange(-1, 2), indexing="ij"), -1
).view(-1, 3)


def hilbert_index(x: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
    """The distance along the Hilbert curve that fills an ``n × n`` grid (``n`` a power of two) of each cell
    ``(x, y)`` (the classic xy2d: at each scale, the quadrant's index, then the quadrant rotated into place).

    >>> [int(hilbert_index(torch.tensor(x), torch.tensor(y), 2)) for x, y in [(0, 0), (0, 1), (1, 1), (1, 0)]]
    [0, 1, 2, 3]
    """
    x, y = x.clone().long(), y.clone().long()
    d = torch.zeros_like(x)
    s = n // 2
    while s > 0:
        rx = ((x & s) > 0).long()
        ry = ((y & s) > 0).long()
        d += s * s * ((3 * rx) ^ ry)
        flip = (ry == 0) & (rx == 1)
        x = torch.where(flip, n - 1 - x, x)
        y = torch.where(flip, n - 1 - y, y)
        swap = ry == 0
        x, y = torch.where(swap, y, x), torch.where(swap, x, y)
        s //= 2
    return d


def serial_orders(coords: torch.Tensor, n: int) -> list[torch.Tensor]:
    """The voxels' scan orders (permutations of ``range(V)``): Hilbert on the BEV cell, height minor, on the grid as
    it is and rotated by 90°."""
    z, y, x = coords.unbind(-1)
    out = []
    for hx, hy in ((x, y), (y, n - 1 - x)):
        key = hilbert_index(hx, hy, n) * (int(z.max()) + 1 if len(z) else 1) + z
        out.append(torch.argsort(key, stable=True))
    return out


def windows(length: int, size: int, shift: int) -> list[tuple[int, int]]:
    """``(start, end)`` of consecutive windows of ``size`` covering ``range(length)``, the first ``shift`` shorter
    (a shifted partition); ``size`` 0 or ≥ length: one window, the whole sequence.

    >>> windows(10, 4, 0), windows(10, 4, 2), windows(10, 0, 0)
    ([(0, 4), (4, 8), (8, 10)], [(0, 2), (2, 6), (6, 10)], [(0, 10)])
    """
    if size <= 0 or size >= length:
        return [(0, length)]
    starts = sorted({0, *range(size - shift if shift else size, length, size)})
    return [(a, min(b, length)) for a, b in zip(starts, starts[1:] + [length])]


class BiMamba(nn.Module):
    """One bidirectional Mamba layer: ``x + fwd(norm x) + flip(bwd(flip(norm x)))`` within each window, the
    windows batched (padded at their ends; each direction reads its window's real tokens first)."""

    def __init__(self, dim: int, d_state: int = 16, expand: int = 2):
        from mambapy.mamba import MambaBlock, MambaConfig

        super().__init__()
        cfg = MambaConfig(d_model=dim, n_layers=1, d_state=d_state, expand_factor=expand)
        self.cfg = cfg
        self.norm = nn.LayerNorm(dim)
        self.fwd, self.bwd = MambaBlock(cfg), MambaBlock(cfg)

    def forward(self, x: torch.Tensor, spans: list[tuple[int, int]]) -> torch.Tensor:
        """``x [L, d]`` in scan order; ``spans`` the windows."""
        h = self.norm(x)
        width = max(b - a for a, b in spans)
        pad = h.new_zeros(1, h.shape[1])
        hp = torch.cat([h, pad])  # row L: the padding
        idx_f = torch.full((len(spans), width), len(h), dtype=torch.long, device=x.device)
        idx_b = idx_f.clone()
        for i, (a, b) in enumerate(spans):
            idx_f[i, : b - a] = torch.arange(a, b, device=x.device)
            idx_b[i, : b - a] = torch.arange(b - 1, a - 1, -1, device=x.device)
        yf, yb = self.fwd(hp[idx_f]), self.bwd(hp[idx_b])
        out = torch.zeros_like(torch.cat([x, pad]))
        out.index_add_(0, idx_f.view(-1), yf.reshape(-1, x.shape[1]))
        out.index_add_(0, idx_b.view(-1), yb.reshape(-1, x.shape[1]))
        return x + out[: len(x)]

    def flops(self, length: int) -> float:
        """Analytic multiply-add FLOPs (×2) of both directions over ``length`` tokens (the scan counted as 7 ops
        per inner channel and state: exp(ΔA), ΔB, ΔB·x, the recurrence's multiply and add, and the read-out's)."""
        c = self.cfg
        d, e, n, r, k = c.d_model, c.d_inner, c.d_state, c.dt_rank, c.d_conv
        per = 2 * d * 2 * e + 2 * e * k + 2 * e * (r + 2 * n) + 2 * r * e + 7 * e * n + 4 * e + 2 * e * d
        return 2.0 * length * per


class SASF(nn.Module):
    """Semantic-assisted state-space fusion: a semantic head, a depthwise 1D conv along the tokens regrouped by
    predicted class, and a submanifold depthwise 3×3×3 conv over kept neighbours."""

    def __init__(self, dim: int, classes: int = 3):
        super().__init__()
        self.sem = nn.Linear(dim, classes)
        self.conv1d = nn.Conv1d(dim, dim, 3, padding=1, groups=dim)
        self.conv3d = nn.Parameter(torch.randn(27, dim) / 27)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, order_key: torch.Tensor, neigh: torch.Tensor):
        """``x [L, d]`` in any fixed order; ``order_key [L]`` each token's scan position (the tie-breaker inside a
        class); ``neigh [L, 27]`` each token's kept neighbours' rows (−1: none). Returns (x, semantic logits)."""
        h = self.norm(x)
        logits = self.sem(h)
        cls = logits.argmax(-1)
        perm = torch.argsort(cls * (len(x) + 1) + order_key, stable=True)
        grouped = self.conv1d(h[perm].t().unsqueeze(0)).squeeze(0).t()
        sem = torch.empty_like(h)
        sem[perm] = grouped
        hp = torch.cat([h, h.new_zeros(1, h.shape[1])])
        spatial = (hp[neigh] * self.conv3d).sum(1)  # neigh = −1 reads the zero row
        return x + sem + spatial, logits

    def flops(self, length: int) -> float:
        d = self.conv1d.in_channels
        return float(length) * (2 * d * 3 + 2 * 27 * d + 2 * d * self.sem.out_features)


class VoxelEncoder(nn.Module):
    """Voxel embedding → (scoring, top-``keep``) → Mamba layers (windows per layer from ``windows``: 0 = the whole
    sequence) with optional SASF → BEV head.

    ``grid``: (height, rows, cols) of the voxel grid (rows = cols, a power of two).
    """

    def __init__(
        self,
        grid: tuple[int, int, int],
        dim: int = 32,
        layers: int = 4,
        keep: float = 1.0,
        windows: list[int] | None = None,
        sasf: bool = False,
        in_features: int = 5,
        classes: int = 2,
        d_state: int = 16,
    ):
        super().__init__()
        self.grid, self.keep, self.sasf_on = grid, keep, sasf
        self.spans = list(windows or [0] * layers)
        if len(self.spans) != layers:
            raise ValueError(f"windows: {len(self.spans)} sizes for {layers} layers")
        self.embed = nn.Sequential(nn.Linear(in_features + 1, dim), nn.ReLU(), nn.Linear(dim, dim))
        self.score_voxel = nn.Linear(dim, 1)
        self.score_bev = nn.Sequential(nn.Conv2d(dim, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 3, padding=1))
        self.layers = nn.ModuleList(BiMamba(dim, d_state) for _ in range(layers))
        self.fuse = nn.ModuleList(SASF(dim) for _ in range(layers)) if sasf else None
        self.head = nn.Sequential(
            nn.Conv2d(dim, 48, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(48, 48, 3, padding=1), nn.ReLU()
        )
        self.heat = nn.Conv2d(48, classes, 1)
        self.offset = nn.Conv2d(48, 2, 1)
        nn.init.constant_(self.heat.bias, -2.19)  # CenterNet: initial foreground probability 0.1

    def bev(self, coords: torch.Tensor, feats: torch.Tensor) -> torch.Tensor:
        """Max over height of ``feats [V, d]`` into a ``[d, rows, cols]`` map (empty cells 0)."""
        _, rows, cols = self.grid
        cell = coords[:, 1] * cols + coords[:, 2]
        out = feats.new_full((rows * cols, feats.shape[1]), -1e4)
        out = out.scatter_reduce(0, cell[:, None].expand_as(feats), feats, "amax", include_self=True)
        out = torch.where(out <= -1e4, torch.zeros_like(out), out)
        return out.t().reshape(feats.shape[1], rows, cols)

    def neighbours(self, coords: torch.Tensor) -> torch.Tensor:
        """``[V, 27]``: the row of each voxel's 27 neighbours among ``coords`` (−1 where empty or dropped)."""
        h, rows, cols = self.grid
        index = torch.full((h + 2, rows + 2, cols + 2), -1, dtype=torch.long, device=coords.device)
        index[coords[:, 0] + 1, coords[:, 1] + 1, coords[:, 2] + 1] = torch.arange(len(coords), device=coords.device)
        n = coords[:, None] + 1 + NEIGHBOURS.to(coords.device)[None]
        return index[n[..., 0], n[..., 1], n[..., 2]]

    def embedding(self, coords: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """``[V, dim]``: each voxel's features and height level through the voxel MLP."""
        return self.embed(torch.cat([features, coords[:, :1].float() / self.grid[0]], 1))

    def forward(self, coords: torch.Tensor, features: torch.Tensor) -> dict[str, torch.Tensor]:
        """One scene. Returns the voxel ``score`` logits ``[V]``, the ``kept`` mask ``[V]``, the kept voxels'
        encoded ``features`` (zeros elsewhere), their ``semantic`` logits (SASF only), the ``heatmap`` logits
        ``[classes, rows/2, cols/2]`` and ``offset`` ``[2, rows/2, cols/2]``, and ``tokens`` (the kept count)."""
        x = self.embedding(coords, features)
        score = self.score_voxel(x).squeeze(1)
        bev = self.bev(coords, x)
        score = score + self.score_bev(bev.unsqueeze(0))[0, 0][coords[:, 1], coords[:, 2]]
        if self.keep < 1:
            k = max(1, math.ceil(self.keep * len(x)))
            idx = torch.topk(score.detach(), k).indices
        else:
            idx = torch.arange(len(x), device=x.device)
        kept = torch.zeros(len(x), dtype=torch.bool, device=x.device)
        kept[idx] = True
        c, t = coords[idx], x[idx]
        orders = serial_orders(c, self.grid[1])
        neigh = self.neighbours(c) if self.fuse is not None else None
        sem_logits = []
        for i, layer in enumerate(self.layers):
            order = orders[i % 2]
            size = self.spans[i]
            shift = size // 2 if size and i % 2 else 0
            t = t.clone()
            t[order] = layer(t[order], windows(len(order), size, shift))
            if self.fuse is not None:
                pos = torch.empty_like(order)
                pos[order] = torch.arange(len(order), device=order.device)
                t, logits = self.fuse[i](t, pos, neigh)
                sem_logits.append(logits)
        feats = x.new_zeros(x.shape).index_copy(0, idx, t)
        mapped = self.head(self.bev(coords[idx], t).unsqueeze(0))
        return {
            "score": score,
            "kept": kept,
            "features": feats,
            "semantic": torch.stack(sem_logits).mean(0) if sem_logits else None,
            "semantic_rows": idx,
            "heatmap": self.heat(mapped)[0],
            "offset": self.offset(mapped)[0],
            "tokens": torch.tensor(len(idx)),
        }

    def encoder_flops(self, voxels: int, tokens: int) -> float:
        """Analytic FLOPs of the encoder on a scene of ``voxels`` with ``tokens`` kept: the embedding and scoring of
        every voxel, then the Mamba layers (and SASF) over the kept tokens; the BEV scorer's convolution counted at
        its non-empty cells (at most ``voxels``). The detection head, the same for every method, is left out."""
        d = self.embed[0].out_features
        f = voxels * 2.0 * (self.embed[0].in_features * d + d * d)
        if self.keep < 1:
            f += voxels * 2.0 * (d + 9 * d * 16 + 9 * 16)
        f += sum(layer.flops(tokens) for layer in self.layers)
        if self.fuse is not None:
            f += sum(m.flops(tokens) for m in self.fuse)
        return f


def focal_loss(logits: torch.Tensor, target: torch.Tensor, alpha: float = 0.25, gamma: float = 2.0) -> torch.Tensor:
    """Sigmoid focal loss (Lin et al. 2017) of binary ``target``, summed and divided by the number of positives
    (RetinaNet's normalisation; at least 1)."""
    p = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    pt = p * target + (1 - p) * (1 - target)
    a = alpha * target + (1 - alpha) * (1 - target)
    return (a * (1 - pt) ** gamma * ce).sum() / target.sum().clamp(min=1)


def centernet_focal(logits: torch.Tensor, heat: torch.Tensor) -> torch.Tensor:
    r"""CenterNet's penalty-reduced focal loss on heatmap ``logits`` against Gaussian targets ``heat`` (peaks 1):

    .. math::
        L = -\frac{1}{N}\sum \begin{cases} (1-p)^2 \log p & y = 1\\ (1-y)^4 p^2 \log(1-p) & \text{else}\end{cases}

    with N the number of peaks (at least 1)."""
    p = torch.sigmoid(logits).clamp(1e-4, 1 - 1e-4)
    pos = heat.eq(1).float()
    pos_loss = (torch.log(p) * (1 - p) ** 2 * pos).sum()
    neg_loss = (torch.log(1 - p) * p**2 * (1 - heat) ** 4 * (1 - pos)).sum()
    return -(pos_loss + neg_loss) / pos.sum().clamp(min=1)
