"""Config of the extras.vision.relayformer recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras import data
from agentkit.extras.sweep import SweepConfig

Size = Annotated[list[Annotated[int, at.Ge(16)]], at.Len(2, 2)]


@dataclass
class RelayFormerConfig(SweepConfig):
    """RelayFormer (fixed overlapping tiles, relay tokens carrying context across tiles and frames, dual LoRA, 4D
    RoPE, gated mask decoder) with 3, 2, 1 and 0 relay tokens, and the same network on inputs resized to a fixed
    square, on forged crops of the photographs scikit-image and scikit-learn ship, split by source photograph."""

    relay_tokens: Annotated[list[Annotated[int, at.Interval(ge=0, le=8)]], at.MinLen(1)] = option(
        [3, 2, 1, 0], "relay (GLR) tokens per tile, one model each (3 officially: CLS + 2 registers; 0: tiles alone)"
    )
    resize_to: Annotated[int, at.Ge(0)] = option(
        128, "also train the first relay_tokens model on inputs resized to this square, its mask resized back (0: off)"
    )
    train_sources: Annotated[list[str], at.MinLen(1)] = option(
        ["astronaut", "coffee", "rocket", "hubble_deep_field", "retina", "ihc", "motorcycle"],
        f"photographs the training forgeries come from (of {', '.join(data.NATURAL_IMAGES)})",
    )
    val_sources: Annotated[list[str], at.MinLen(1)] = option(["chelsea"], "photographs of the validation forgeries")
    test_sources: Annotated[list[str], at.MinLen(1)] = option(["china", "flower"], "photographs of the test forgeries")
    train_pool: Annotated[int, at.Ge(8)] = option(
        1500, "training forgeries per seed (generated once, shared by every model; each step draws from them)"
    )
    train_size: Size = option([64, 192], "the range each training forgery's height and width are drawn from (px)")
    train_clips: Annotated[float, at.Interval(ge=0, le=1)] = option(
        0.2, "share of the pool that are clips (train_frames frames, sides up to half of train_size's maximum)"
    )
    train_frames: Annotated[int, at.Ge(2)] = option(4, "frames per training clip")
    test_sizes: Annotated[list[Size], at.MinLen(1)] = option(
        [[64, 128], [128, 256], [256, 512]], "test resolution bins: each forgery's sides are drawn from one range"
    )
    test_per_size: Annotated[int, at.Ge(2)] = option(40, "test forgeries per resolution bin (seeded per seed)")
    val_size: Annotated[int, at.Ge(2)] = option(48, "validation forgeries (sides drawn from train_size)")
    video_clips: Annotated[int, at.Ge(0)] = option(
        16, "test clips of video_frames frames (sides 96–160 px), scored jointly and frame by frame (0: none)"
    )
    video_frames: Annotated[int, at.Ge(2)] = option(8, "frames per test clip")
    dim: PosInt = option(64, "ViT width")
    depth: Annotated[int, at.Ge(2)] = option(4, "ViT blocks (block i + 1 also runs the global step after block i)")
    heads: PosInt = option(2, "attention heads (head width ≥ 4·rope_dim)")
    patch: PosInt = option(16, "ViT patch side (px; 16 officially)")
    tile: PosInt = option(64, "tile side (px; 528 officially)")
    overlap: Annotated[int, at.Ge(0)] = option(
        16, "overlap margin per side (px; neighbours share 2·overlap; 16 officially, one patch)"
    )
    highpass: bool = option(
        True,
        "feed the ViT a fixed high-pass residual (8 · (x − its 3 × 3 mean)) beside RGB, for the low-level filters the "
        "paper's MAE-pretrained ViT-B brings (without it 3 relay tokens learn no mask in 500 steps: test F1 ≤ 0.002, "
        "docs/results/extras-vision/relayformer-no-highpass)",
    )
    lora_rank: PosInt = option(8, "rank of the local and the global LoRA")
    lora_alpha: PosFloat = option(16.0, "LoRA's α (scale α / rank)")
    rope_dim: PosInt = option(8, "4D RoPE channels per axis per head (even)")
    queries: PosInt = option(8, "mask-decoder queries")
    decoder_layers: PosInt = option(1, "mask-decoder layers (3 officially)")
    edge_lambda: Annotated[float, at.Ge(0)] = option(20.0, "weight of the edge-band BCE")
    edge_width: Annotated[int, at.Ge(1)] = option(3, "edge band kernel (odd; 7 officially at 1024²)")
    steps: PosInt = option(500, "training steps per model")
    batch: PosInt = option(8, "forgeries per step")
    lr: PosFloat = option(2e-3, "AdamW's peak learning rate (linear warm-up, cosine decay; weight decay 0.05)")
    evals: PosInt = option(3, "validation checks per model (the state with the best validation F1 is kept)")

    def problems(self) -> list[str]:
        out = []
        for key in ("train_sources", "val_sources", "test_sources"):
            out += [f"{key}: unknown photograph {s!r}" for s in getattr(self, key) if s not in data.NATURAL_IMAGES]
        used = [set(self.train_sources), set(self.val_sources), set(self.test_sources)]
        if used[0] & used[1] or used[0] & used[2] or used[1] & used[2]:
            out.append("train_sources, val_sources and test_sources must not share a photograph (split by source)")
        if self.dim % self.heads:
            out.append(f"dim: {self.dim} does not divide by heads ({self.heads})")
        elif self.rope_dim % 2 or 4 * self.rope_dim > self.dim // self.heads:
            out.append(
                f"rope_dim: {self.rope_dim} must be even with 4·rope_dim ≤ the head width {self.dim // self.heads}"
            )
        if self.tile % self.patch or self.overlap % self.patch or self.tile <= 2 * self.overlap:
            out.append(
                f"tile ({self.tile}) and overlap ({self.overlap}) must be multiples of patch ({self.patch}), "
                "with tile > 2·overlap"
            )
        if self.edge_width % 2 == 0:
            out.append(f"edge_width: {self.edge_width} must be odd")
        for name, (lo, hi) in [("train_size", self.train_size)] + [("test_sizes", s) for s in self.test_sizes]:
            if lo > hi:
                out.append(f"{name}: range {[lo, hi]} runs backwards")
        return out
