"""The two networks of the dequantisation demo, every linear layer a QuantLinear: an MLP classifier and a tiny
character GPT (pre-LayerNorm, causal attention; embeddings, norms and the output head stay full precision)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from agentkit.extras.efficiency.dequant.quant import QuantLinear, QuantSpec


def mlp(d_in: int, hidden: int, classes: int, act: QuantSpec | None, weight: QuantSpec | None) -> nn.Sequential:
    """d_in → hidden → hidden → classes; every layer quantises its input and its weight."""
    return nn.Sequential(
        nn.Flatten(),
        QuantLinear(d_in, hidden, act, weight),
        nn.ReLU(),
        QuantLinear(hidden, hidden, act, weight),
        nn.ReLU(),
        QuantLinear(hidden, classes, act, weight),
    )


class Block(nn.Module):
    def __init__(self, d: int, heads: int, act: QuantSpec | None, weight: QuantSpec | None):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = QuantLinear(d, 3 * d, act, weight), QuantLinear(d, d, act, weight)
        self.fc1, self.fc2 = QuantLinear(d, 4 * d, act, weight), QuantLinear(4 * d, d, act, weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, d]
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CharGPT(nn.Module):
    """tokens ``[B, T]`` → next-character logits ``[B, T, vocab]``."""

    def __init__(
        self,
        vocab: int,
        d: int = 128,
        layers: int = 2,
        heads: int = 4,
        ctx: int = 64,
        act: QuantSpec | None = None,
        weight: QuantSpec | None = None,
    ):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads, act, weight) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))
