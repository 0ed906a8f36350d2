r"""RelayFormer's pieces: fixed overlapping tiles that are never resized, a shared ViT whose blocks run local
attention inside each tile and global attention over every tile's and frame's relay (GLR) tokens, dual LoRA, 4D
RoPE, and the gated mask decoder (``models/RelayFormer.py`` and ``models/GLoRA_vit.py`` in WenOOI/RelayFormer).

**Tiling.** An ``H × W`` input is zero-padded to ``H' = s + σ·⌈(H − s)⁺/σ⌉`` (likewise ``W'``) and cut into
``s × s`` tiles at stride ``σ = s − 2o`` (the official ``patch_size − 2·overlap``: 528 px tiles and ``o`` = 16 px at 1024²;
64 px tiles and the same ``o`` here), so neighbours share ``2o`` pixels, one 16-px ViT patch on each side. Every
block's local tokens are put back on the whole feature map, overlaps averaged, and cut again (the official
``_reconstruct_multi_frame`` after every block), so overlapping tokens always agree.

**A block** (``forward_features``). Each tile's sequence is ``[g_1 … g_k; p_1 … p_{n}]``: ``k`` relay tokens (CLS
and ``k − 1`` registers; 3 officially) before its patch tokens. Block ``i`` runs on every tile alone with the local
LoRA; then the relay tokens of all tiles and frames of one input attend to each other through block ``i + 1``
with the global LoRA and 4D RoPE (the official code borrows the next block's weights for this; the last block has
no global step). With ``k = 0`` nothing crosses tiles but the overlaps.

**Dual LoRA** (``LoRALayer``, rank 8, α = 16): every linear map of a block is :math:`W x + b + \tfrac{\alpha}{r}
B_m A_m x` with its own :math:`(A_m, B_m)` for :math:`m \in \{\text{local}, \text{global}\}`, :math:`B_m` zero at
initialisation.

**4D RoPE** (``apply_4d_rope``). A relay token at frame :math:`t`, relay index :math:`j`, tile row :math:`r` and
column :math:`c` rotates the first :math:`4d_r` channels of each query and key head, :math:`d_r` per axis, in
pairs :math:`(2l, 2l + 1)` by the angle :math:`p_a\,\omega_l`, :math:`\omega_l = 10000^{-2l/d_r}`
(:math:`d_r` = 8 officially). Each pair is a plane rotation, so

.. math::
    \langle R(p)\,q,\; R(p')\,k \rangle = \langle q,\; R(p' - p)\,k \rangle

depends only on the offsets :math:`p' - p`. The official ``apply_rope`` interleaves its sines and cosines
(``stack([sin, sin]).flatten``) but pairs channels with ``rotate_half`` (:math:`l` with :math:`l + d_r/2`), so a
pair's two channels turn by different angles: not a rotation, and not relative. We pair consistently.

**Gated mask decoder** (``GatedMaskDecoder``): a 3 × 3 conv to the hidden width, 8 learned queries through
cross-attention to the feature map, self-attention and an FFN (post-norm; 3 layers officially), per-query mask
logits :math:`m_q = \langle h_q, x_{hw}\rangle` and gates :math:`\sigma(w^\top h_q)`, summed:
:math:`\text{logit}_{hw} = \sum_q \sigma(w^\top h_q)\, m_{q,hw}`, upsampled bilinearly to the padded input.

**Loss**: :math:`\text{BCE} + 20\cdot\text{mean}(e \odot \text{BCE})` with :math:`e` the mask's edge band (a cross
kernel's dilation minus its erosion: ``EdgeMaskGenerator``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

BRANCHES = ("local", "global")


class LoRALinear(nn.Module):
    """``nn.Linear`` with two LoRA branches, one per ``BRANCHES``: ``forward(x, branch)`` = W x + b + (α/r) B A x
    with that branch's A ``[d_in, r]`` (N(0, 0.01²)) and B ``[r, d_out]`` (zeros)."""

    def __init__(self, d_in: int, d_out: int, rank: int = 8, alpha: float = 16.0, bias: bool = True):
        super().__init__()
        self.base = nn.Linear(d_in, d_out, bias=bias)
        self.scale = alpha / rank
        self.A = nn.ParameterDict({b: nn.Parameter(torch.randn(d_in, rank) * 0.01) for b in BRANCHES})
        self.B = nn.ParameterDict({b: nn.Parameter(torch.zeros(rank, d_out)) for b in BRANCHES})

    def forward(self, x: torch.Tensor, branch: str) -> torch.Tensor:
        return self.base(x) + (x @ self.A[branch] @ self.B[branch]) * self.scale


def apply_4d_rope(x: torch.Tensor, pos: torch.Tensor, axis_dim: int = 8, base: float = 10000.0) -> torch.Tensor:
    """Rotate ``x [B, heads, L, d]`` by the positions ``pos [B, L, 4]`` (frame, relay index, tile row, tile column):
    channels ``[a·axis_dim, (a + 1)·axis_dim)`` by axis ``a``, in consecutive pairs (the module docstring); the
    remaining ``d − 4·axis_dim`` channels pass unchanged.

    >>> q, k = torch.randn(1, 1, 2, 32), torch.randn(1, 1, 2, 32)
    >>> p = torch.tensor([[[0, 1, 2, 3], [1, 0, 4, 1]]])
    >>> s = (apply_4d_rope(q, p) * apply_4d_rope(k, p)).sum(-1)
    >>> s2 = (apply_4d_rope(q, p + 5) * apply_4d_rope(k, p + 5)).sum(-1)
    >>> bool(torch.allclose(s, s2, atol=1e-5))
    True
    """
    if axis_dim % 2 or 4 * axis_dim > x.shape[-1]:
        raise ValueError(f"4D RoPE needs an even axis_dim with 4·axis_dim ≤ head dim {x.shape[-1]}, got {axis_dim}")
    half = axis_dim // 2
    omega = base ** (-torch.arange(half, dtype=torch.float32, device=x.device) * 2 / axis_dim)  # [d_r/2]
    angle = (pos.to(x.dtype)[..., None] * omega).flatten(-2)[:, None]  # [B, 1, L, 4·d_r/2], axis-major
    cos, sin = angle.cos(), angle.sin()
    rot = x[..., : 4 * axis_dim].unflatten(-1, (-1, 2))  # [B, h, L, 4·d_r/2, 2]
    a, b = rot[..., 0], rot[..., 1]
    turned = torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)
    return torch.cat([turned, x[..., 4 * axis_dim :]], -1)


class RelayBlock(nn.Module):
    """A pre-norm ViT block whose four linear maps are ``LoRALinear`` (qkv, proj, fc1, fc2). ``forward(x, branch,
    pos, key_mask)``: with ``pos [B, L, 4]`` the queries and keys get 4D RoPE (the global step); ``key_mask [B, L]``
    (True = a real token) hides padding."""

    def __init__(self, dim: int, heads: int, rank: int = 8, alpha: float = 16.0, mlp_ratio: int = 4, rope_dim: int = 8):
        super().__init__()
        self.heads, self.rope_dim = heads, rope_dim
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = LoRALinear(dim, 3 * dim, rank, alpha)
        self.proj = LoRALinear(dim, dim, rank, alpha)
        self.fc1 = LoRALinear(dim, mlp_ratio * dim, rank, alpha)
        self.fc2 = LoRALinear(mlp_ratio * dim, dim, rank, alpha)

    def forward(
        self, x: torch.Tensor, branch: str, pos: torch.Tensor | None = None, key_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x), branch).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if pos is not None:
            q, k = apply_4d_rope(q, pos, self.rope_dim), apply_4d_rope(k, pos, self.rope_dim)
        mask = None if key_mask is None else key_mask[:, None, None, :]
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).reshape(b, n, d), branch)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x), branch)), branch)


def tile_count(size: int, tile: int, stride: int) -> int:
    """Tiles along a side of ``size`` pixels: 1 + ⌈(size − tile)⁺ / stride⌉."""
    return 1 + max(0, -(-(size - tile) // stride))


def to_tiles(x: torch.Tensor, tile: int, stride: int) -> torch.Tensor:
    """``x [B, C, H', W']`` (already padded to whole tiles) → ``[B, nh·nw, C, tile, tile]``, row-major."""
    t = x.unfold(2, tile, stride).unfold(3, tile, stride)  # [B, C, nh, nw, tile, tile]
    return t.permute(0, 2, 3, 1, 4, 5).flatten(1, 2)


def from_tiles(t: torch.Tensor, nh: int, nw: int, stride: int) -> torch.Tensor:
    """The inverse of ``to_tiles``: ``t [B, nh·nw, C, s, s]`` → ``[B, C, H', W']`` with every pixel the mean of the
    tiles covering it (``F.fold`` sums them; the count divides).

    >>> x = torch.randn(2, 3, 20, 32)
    >>> bool(torch.allclose(from_tiles(to_tiles(x, 8, 6), 3, 5, 6), x))
    True
    """
    b, n, c, s, _ = t.shape
    size = (s + stride * (nh - 1), s + stride * (nw - 1))
    cols = t.permute(0, 2, 3, 4, 1).reshape(b, c * s * s, n)
    total = F.fold(cols, size, s, stride=stride)
    count = F.fold(torch.ones(1, s * s, n, dtype=t.dtype, device=t.device), size, s, stride=stride)
    return total / count


def high_pass(x: torch.Tensor, gain: float = 8.0) -> torch.Tensor:
    """The residual ``gain · (x − mean₃ₓ₃(x))`` of images ``x [B, C, H, W]`` (edges replicated): the fixed noise
    filter the ``highpass`` option feeds the ViT beside RGB, where the paper's ViT-B brings MAE-pretrained low-level
    filters that a small ViT trained from scratch here does not learn in budget.

    >>> bool(high_pass(torch.ones(1, 3, 5, 5)).abs().max() == 0)  # flat images have no residual
    True
    """
    return gain * (x - F.avg_pool2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), 3, stride=1))


class GatedMaskDecoder(nn.Module):
    """The official ``GatedMaskDecoder``: ``forward(x [B, C, h, w])`` → mask logits ``[B, 1, h, w]`` (module
    docstring). Its query self-attention is plain attention: the official one rotates the learned queries by a 1D
    RoPE over their index, which a learned query absorbs."""

    def __init__(self, d_in: int, hidden: int = 64, queries: int = 8, heads: int = 2, layers: int = 1):
        super().__init__()
        self.proj = nn.Conv2d(d_in, hidden, 3, padding=1)
        self.queries = nn.Embedding(queries, hidden)
        self.gate = nn.Linear(hidden, 1)
        self.layers = nn.ModuleList(
            nn.ModuleDict(
                {
                    "cross": nn.MultiheadAttention(hidden, heads, batch_first=True),
                    "norm_cross": nn.LayerNorm(hidden),
                    "self": nn.MultiheadAttention(hidden, heads, batch_first=True),
                    "norm_self": nn.LayerNorm(hidden),
                    "ffn": nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden)),
                    "norm_ffn": nn.LayerNorm(hidden),
                }
            )
            for _ in range(layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(x)
        kv = x.flatten(2).transpose(1, 2)  # [B, hw, hidden]
        q = self.queries.weight.expand(len(x), -1, -1)
        for layer in self.layers:
            q = layer["norm_cross"](q + layer["cross"](q, kv, kv, need_weights=False)[0])
            q = layer["norm_self"](q + layer["self"](q, q, q, need_weights=False)[0])
            q = layer["norm_ffn"](q + layer["ffn"](q))
        logits = torch.einsum("bqd,bdhw->bqhw", q, x)
        return (logits * self.gate(q).sigmoid()[..., None]).sum(1, keepdim=True)


def edge_band(mask: torch.Tensor, width: int = 7) -> torch.Tensor:
    """The official ``EdgeMaskGenerator``: pixels where a cross-shaped ``width × width`` dilation of the binary
    ``mask [B, 1, H, W]`` differs from its erosion (a band about ``width`` pixels wide along the edges)."""
    k = torch.zeros(1, 1, width, width, dtype=mask.dtype, device=mask.device)
    k[0, 0, width // 2, :] = 1
    k[0, 0, :, width // 2] = 1
    m = (mask > 0).to(k.dtype)
    dilated = (F.conv2d(m, k, padding=width // 2) > 0).to(k.dtype)
    eroded = 1 - (F.conv2d(1 - m, k, padding=width // 2) > 0).to(k.dtype)
    return (dilated != eroded).to(k.dtype)


def relay_loss(
    logits: list[torch.Tensor], masks: list[torch.Tensor], edge_lambda: float = 20.0, edge_width: int = 7
) -> torch.Tensor:
    """BCE + ``edge_lambda`` · edge-weighted BCE (the official ``backward_loss``), both averaged over every pixel of
    every input (``logits`` and ``masks``: lists of ``[T, 1, H, W]``, sizes differing between inputs)."""
    bce, edge, n = 0.0, 0.0, 0
    for lg, m in zip(logits, masks):
        per = F.binary_cross_entropy_with_logits(lg, m, reduction="none")
        bce, edge, n = bce + per.sum(), edge + (per * edge_band(m, edge_width)).sum(), n + per.numel()
    return (bce + edge_lambda * edge) / n


class RelayFormer(nn.Module):
    """``forward(clips)``: a list of inputs ``[T, 3, H, W]`` (``T`` = 1 for an image; normalised; any H, W) → their
    mask logits, each ``[T, 1, H, W]``. ``relay`` relay tokens per tile (0: tiles meet only in their overlaps);
    ``highpass``: the patch embedding also reads ``high_pass(x)``."""

    def __init__(
        self,
        relay: int = 3,
        dim: int = 64,
        depth: int = 4,
        heads: int = 2,
        patch: int = 16,
        tile: int = 64,
        overlap: int = 16,
        rank: int = 8,
        alpha: float = 16.0,
        rope_dim: int = 8,
        queries: int = 8,
        decoder_dim: int = 64,
        decoder_layers: int = 1,
        highpass: bool = False,
    ):
        super().__init__()
        if tile % patch or overlap % patch or tile <= 2 * overlap:
            raise ValueError(f"tile {tile} and overlap {overlap} must be multiples of patch {patch}, tile > 2·overlap")
        self.relay, self.patch, self.tile, self.stride = relay, patch, tile, tile - 2 * overlap
        self.grid, self.highpass = tile // patch, highpass
        self.embed = nn.Conv2d(6 if highpass else 3, dim, patch, stride=patch)
        self.pos = nn.Parameter(torch.randn(1, self.grid**2, dim) * 0.02)
        self.relay_tokens = nn.Parameter(torch.randn(1, relay, dim) * 0.02)  # CLS + registers, with their positions
        self.blocks = nn.ModuleList(RelayBlock(dim, heads, rank, alpha, rope_dim=rope_dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.decoder = GatedMaskDecoder(dim, decoder_dim, queries, heads, decoder_layers)

    def layout(self, h: int, w: int) -> tuple[int, int]:
        """Tiles per column and per row for an ``h × w`` input."""
        return tile_count(h, self.tile, self.stride), tile_count(w, self.tile, self.stride)

    def forward(self, clips: list[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for fmap, x in zip(self.features(clips), clips):
            logits = F.interpolate(self.decoder(fmap), scale_factor=self.patch, mode="bilinear", align_corners=False)
            out.append(logits[:, :, : x.shape[-2], : x.shape[-1]])
        return out

    def features(self, clips: list[torch.Tensor]) -> list[torch.Tensor]:
        """The encoder: each input's final feature map ``[T, D, H'/p, W'/p]`` (padded size over the patch side)."""
        k = self.relay
        shapes, tiles = [], []
        for x in clips:
            t, _, h, w = x.shape
            x = torch.cat([x, high_pass(x)], 1) if self.highpass else x
            nh, nw = self.layout(h, w)
            hp, wp = self.tile + self.stride * (nh - 1), self.tile + self.stride * (nw - 1)
            tiles.append(to_tiles(F.pad(x, (0, wp - w, 0, hp - h)), self.tile, self.stride).flatten(0, 1))
            shapes.append((t, nh, nw))
        sizes = [t * nh * nw for t, nh, nw in shapes]
        x = self.embed(torch.cat(tiles)).flatten(2).transpose(1, 2) + self.pos  # [N, g², D]
        x = torch.cat([self.relay_tokens.expand(len(x), -1, -1), x], 1)
        pos, key_mask = self._relay_positions(shapes, x.device)
        for i, block in enumerate(self.blocks):
            x = block(x, "local")
            local = [self._sync(part, *s) for part, s in zip(x[:, k:].split(sizes), shapes)]
            relays = x[:, :k]
            if k and i + 1 < len(self.blocks):
                relays = self._global(relays, sizes, pos, key_mask, self.blocks[i + 1])
            x = torch.cat([relays, torch.cat(local)], 1)
        x = self.norm(x)
        return [self._feature_map(part, *s) for part, s in zip(x[:, k:].split(sizes), shapes)]

    def _feature_map(self, tokens: torch.Tensor, t: int, nh: int, nw: int) -> torch.Tensor:
        """An input's patch tokens ``[T·nh·nw, g², D]`` → its feature map ``[T, D, H'/p, W'/p]``, overlaps averaged."""
        g, d = self.grid, tokens.shape[-1]
        maps = tokens.view(t, nh * nw, g, g, d).permute(0, 1, 4, 2, 3)
        return from_tiles(maps, nh, nw, self.stride // self.patch)

    def _sync(self, tokens: torch.Tensor, t: int, nh: int, nw: int) -> torch.Tensor:
        """Average the tokens that overlapping tiles share and cut the map again (same shape as ``tokens``)."""
        if nh * nw == 1 or self.stride == self.tile:
            return tokens
        fmap = self._feature_map(tokens, t, nh, nw)
        return to_tiles(fmap, self.grid, self.stride // self.patch).flatten(0, 1).flatten(2).transpose(1, 2)

    def _relay_positions(self, shapes: list[tuple], device) -> tuple[torch.Tensor, torch.Tensor]:
        """Every input's relay-token positions (frame, relay index, tile row, tile column), padded to the longest:
        ``pos [B, L, 4]`` and ``key_mask [B, L]``."""
        per = []
        for t, nh, nw in shapes:
            f, r, c, j = torch.meshgrid(
                torch.arange(t), torch.arange(nh), torch.arange(nw), torch.arange(self.relay), indexing="ij"
            )
            per.append(torch.stack([f, j, r, c], -1).reshape(-1, 4))
        longest = max(len(p) for p in per)
        pos = torch.zeros(len(per), longest, 4, dtype=torch.long)
        key_mask = torch.zeros(len(per), longest, dtype=torch.bool)
        for i, p in enumerate(per):
            pos[i, : len(p)], key_mask[i, : len(p)] = p, True
        return pos.to(device), key_mask.to(device)

    def _global(self, relays: torch.Tensor, sizes: list[int], pos, key_mask, block: RelayBlock) -> torch.Tensor:
        """Each input's relay tokens ``[tiles, k, D]`` attend to all of that input's (every tile and frame) through
        ``block`` with the global LoRA and 4D RoPE."""
        k, d = self.relay, relays.shape[-1]
        padded = relays.new_zeros(len(sizes), pos.shape[1], d)
        parts = relays.split(sizes)
        for i, part in enumerate(parts):
            padded[i, : len(part) * k] = part.reshape(-1, d)
        done = block(padded, "global", pos, key_mask)
        return torch.cat([done[i, : len(p) * k].view(len(p), k, d) for i, p in enumerate(parts)])
