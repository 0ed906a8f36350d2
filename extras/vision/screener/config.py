"""Config of the extras.vision.screener recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class ScreenerConfig(SweepConfig):
    """Screener (dense VICReg descriptors, a masking-invariant learned condition, a per-voxel conditional Gaussian)
    against the same density with no condition or a sin-cos positional one, and an autoencoder's error."""

    tasks: Annotated[list[Literal["phantom", "fmnist"]], at.MinLen(1)] = option(
        ["phantom", "fmnist"],
        "phantom: seeded CT-like 3D volumes (extras.data.ct_phantom), lesions of abnormal intensity or texture; "
        "fmnist: Fashion-MNIST padded to 32², a pasted square or an intensity disk covering ~5 % of each test image",
    )
    methods: Annotated[list[Literal["screener", "positional", "none", "autoencoder"]], at.MinLen(1)] = option(
        ["screener", "positional", "none", "autoencoder"],
        "screener (learned condition); positional (sin-cos of the voxel's coordinates as the condition); none "
        "(unconditional Gaussian); autoencoder (reconstruction error)",
    )
    volume_size: Annotated[int, at.Interval(ge=16, le=64)] = option(32, "phantom volumes are size³ voxels")
    phantom_train: Annotated[int, at.Ge(4)] = option(160, "normal phantom volumes to train on")
    phantom_val: Annotated[int, at.Ge(2)] = option(16, "normal phantom volumes for model selection")
    phantom_test: Annotated[int, at.Ge(2)] = option(32, "phantom volumes with lesions to score")
    fmnist_train: Annotated[int, at.Ge(8)] = option(3000, "normal Fashion-MNIST images to train on")
    fmnist_val: Annotated[int, at.Ge(4)] = option(300, "normal images for model selection")
    fmnist_test: Annotated[int, at.Ge(4)] = option(300, "images with an anomaly to score")
    crop: Annotated[float, at.Interval(gt=0.5, le=1.0)] = option(
        0.75,
        "side of each SSL crop as a share of the image's, at least 16 voxels (two crops overlap by at least 2·crop − 1 of it)",
    )
    width: PosInt = option(8, "UNet features (w, w, 2w, 4w, 8w, w); the autoencoder's channels w, 2w, 4w")
    y_dim: PosInt = option(16, "descriptor channels D")
    cond_dim: PosInt = option(8, "learned condition channels C")
    freqs: PosInt = option(4, "sin-cos frequencies per axis of the positional condition (2 · axes · freqs channels)")
    ssl_steps: PosInt = option(400, "training steps of each SSL network and of the autoencoder")
    batch_3d: PosInt = option(4, "volumes per SSL / autoencoder step (phantom)")
    batch_2d: PosInt = option(32, "images per SSL / autoencoder step (fmnist)")
    pairs: PosInt = option(256, "shared voxels drawn per sample for dense VICReg")
    noise: Annotated[float, at.Interval(ge=0, le=1)] = option(0.02, "std of the Gaussian noise each view gets")
    mask_ratio: Annotated[float, at.Interval(gt=0, lt=1)] = option(
        0.5, "share of each condition-network view masked out, in blocks"
    )
    mask_block: PosInt = option(4, "side of the masked blocks in voxels")
    head_hidden: PosInt = option(64, "hidden width of the density head q(y | c)")
    head_steps: PosInt = option(600, "training steps of each density head")
    head_batch: PosInt = option(4096, "voxels per density-head step")
    voxels_per_image: PosInt = option(1024, "voxels drawn from each training image to fit the density heads")
    eval_every: PosInt = option(
        50, "density heads and the autoencoder keep the state with the best validation loss, checked this often"
    )
    lr: PosFloat = option(1e-3, "Adam's learning rate for every network")

    def problems(self) -> list[str]:
        if "phantom" in self.tasks and self.volume_size % 8:
            return [f"volume_size: {self.volume_size} must divide by 8 (the autoencoder's three stride-2 steps)"]
        return []
