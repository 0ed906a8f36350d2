"""Config of the extras.efficiency.klas recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.data import split_problems
from agentkit.extras.sweep import SweepConfig


@dataclass
class KLASConfig(SweepConfig):
    """KLAS against SN-Net's stitch rule, CKA-ranked and random stitches between small ViTs on Fashion-MNIST: the
    same number of stitches, least-squares initialised and fine-tuned for the same steps; accuracy–FLOPs
    frontiers."""

    widths: Annotated[list[Annotated[int, at.Ge(16)]], at.MinLen(2)] = option(
        [32, 64, 96], "widths of the anchor ViTs (one depth; heads = width / 16)"
    )
    depth: Annotated[int, at.Interval(ge=2, le=24)] = option(4, "blocks of every anchor")
    methods: Annotated[list[Literal["klas", "snnet", "cka", "random"]], at.MinLen(1)] = option(
        ["klas", "snnet", "cka", "random"],
        "klas (Γ in FLOPs buckets on the min-KL anchor pair); snnet (adjacent anchors, block i → i ± window); "
        "cka (highest linear CKA); random",
    )
    window: PosInt = option(1, "SN-Net's sliding window: stitch block i to blocks j with |i − j| < window")
    buckets: PosInt = option(20, "KLAS's FLOPs buckets")
    slack: Annotated[float, at.Ge(1)] = option(1.05, "KLAS keeps Γ ≤ slack · the bucket's smallest Γ")
    train_size: PosInt = option(10000, "Fashion-MNIST training images (val_size of them held out)")
    val_size: PosInt = option(2000, "held-out training images, where the probes' KL and the CKA are measured")
    test_size: PosInt = option(5000, "Fashion-MNIST test images")
    anchor_epochs: PosInt = option(4, "training epochs of each anchor")
    finetune_steps: PosInt = option(800, "fine-tuning steps of each method's stitched family (SN-Net style)")
    probe_steps: PosInt = option(300, "full-batch Adam steps of each block's probe")
    lr: PosFloat = option(1e-3, "AdamW learning rate (anchors; fine-tuning uses lr / 3)")
    batch_size: PosInt = option(128, "images per step")

    def problems(self) -> list[str]:
        out = split_problems(self.train_size, self.val_size)
        if sorted(set(self.widths)) != list(self.widths):
            out.append(f"widths: {self.widths} must be distinct and increasing")
        out += [f"widths: {w} is not a multiple of 16 (the head size)" for w in self.widths if w % 16]
        return out
