"""The model family KLAS stitches: small ViTs of one depth and several widths, their per-block probes, and the
stitched network that runs one anchor's first blocks, a linear stitch layer, then another anchor's last blocks.

Shapes: images ``[B, 28, 28]`` → patch tokens ``[B, 16, d]`` (7×7 patches) plus a class token → ``depth``
pre-norm transformer blocks → the class token through a LayerNorm and a linear head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ViT(nn.Module):
    """A small ViT for 28×28 images; ``tokens(x, upto)`` gives the token features after block ``upto`` (0-based;
    −1: the embedding), ``finish(h, start)`` runs blocks ``start…`` and the head on them."""

    def __init__(self, width: int, depth: int = 6, heads: int | None = None, patch: int = 7, classes: int = 10):
        super().__init__()
        self.width, self.depth, self.patch = width, depth, patch
        heads = heads or max(1, width // 16)
        self.embed = nn.Linear(patch * patch, width)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.pos = nn.Parameter(torch.randn(1, (28 // patch) ** 2 + 1, width) * 0.02)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def patches(self, x: torch.Tensor) -> torch.Tensor:
        p = self.patch
        b = x.shape[0]
        x = x.reshape(b, 28 // p, p, 28 // p, p).permute(0, 1, 3, 2, 4).reshape(b, -1, p * p)
        return torch.cat([self.cls.expand(b, -1, -1), self.embed(x)], 1) + self.pos

    def tokens(self, x: torch.Tensor, upto: int) -> torch.Tensor:
        h = self.patches(x)
        for block in self.blocks[: upto + 1]:
            h = block(h)
        return h

    def finish(self, h: torch.Tensor, start: int) -> torch.Tensor:
        for block in self.blocks[start:]:
            h = block(h)
        return self.head(self.norm(h[:, 0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.finish(self.patches(x), 0)

    @torch.no_grad()
    def block_features(self, x: torch.Tensor, batch: int = 1000) -> list[torch.Tensor]:
        """The class token after every block, ``depth`` tensors ``[N, width]`` (what the probes read)."""
        outs: list[list[torch.Tensor]] = [[] for _ in range(self.depth)]
        for xb in x.split(batch):
            h = self.patches(xb)
            for i, block in enumerate(self.blocks):
                h = block(h)
                outs[i].append(h[:, 0])
        return [torch.cat(o) for o in outs]


def fit_probe(z: torch.Tensor, y: torch.Tensor, classes: int = 10, steps: int = 300, lr: float = 0.05) -> nn.Linear:
    """A linear-softmax probe on frozen features ``z [N, d]`` (standardised inside by their batch statistics),
    full-batch Adam on the cross-entropy."""
    mean, std = z.mean(0), z.std(0) + 1e-6
    probe = nn.Linear(z.shape[1], classes)
    opt = torch.optim.Adam(probe.parameters(), lr=lr)
    zs = (z - mean) / std
    for _ in range(steps):
        loss = F.cross_entropy(probe(zs), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    probe.register_buffer("mean", mean)
    probe.register_buffer("std", std)
    return probe.requires_grad_(False)


def probe_probs(probe: nn.Linear, z: torch.Tensor) -> torch.Tensor:
    """The probe's class distribution ``[N, classes]`` on features ``z``."""
    return F.softmax(probe((z - probe.mean) / probe.std), -1)


class Stitched(nn.Module):
    """Anchor f's embedding and blocks 0…i, a linear stitch on every token, anchor g's blocks j+1… and head."""

    def __init__(
        self, f: ViT, g: ViT, i: int, j: int, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None
    ):
        super().__init__()
        self.f, self.g, self.i, self.j = f, g, i, j
        self.stitch = nn.Linear(f.width, g.width)
        if weight is not None:
            with torch.no_grad():
                self.stitch.weight.copy_(weight.T)
                self.stitch.bias.copy_(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.g.finish(self.stitch(self.f.tokens(x, self.i)), self.j + 1)


def flops(model: nn.Module, example: torch.Tensor) -> int:
    """Forward FLOPs of ``model`` on ``example`` per image, counted by ``torch.utils.flop_counter``."""
    from torch.utils.flop_counter import FlopCounterMode

    was = model.training
    model.train()  # eval mode would take PyTorch's fused encoder fast path, whose FLOPs the counter does not see
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(example)
    model.train(was)
    return counter.get_total_flops() // len(example)
