"""Config of the extras.scene.upnet recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.data import SDF_CATEGORIES
from agentkit.extras.sweep import SweepConfig

Category = Literal["mug", "teapot", "chair", "table", "lamp", "bottle", "airplane", "car"]


@dataclass
class UPNetConfig(SweepConfig):
    """UPNet (a ViT maps one image to the visual hull's IoU gain over 48 view-relative HEALPix directions; the maps
    of the views taken so far are rotated into the object frame, interpolated, filtered and multiplied) against
    random, farthest-view and reconstruction-based next-view selection, with greedy oracle selection as the upper
    bound, on seeded SDF objects with categories held out."""

    methods: Annotated[
        list[Literal["upnet", "mean_map", "random", "farthest", "reconstruction", "oracle"]], at.MinLen(1)
    ] = option(
        ["upnet", "mean_map", "random", "farthest", "reconstruction", "oracle"],
        "upnet (predicted maps); mean_map (the same aggregation of the training targets' mean map: what the image "
        "adds); random; farthest (the candidate whose view axis is farthest from every taken one); reconstruction "
        "(renders the current hull's one-voxel erosion from every candidate and scores the hull voxels its "
        "silhouette would carve); oracle (greedy on the true IoU: needs every candidate's image, the upper bound)",
    )
    held_out: Annotated[list[Category], at.MinLen(1)] = option(
        ["teapot", "chair"], "categories never trained on (tested as novel categories)"
    )
    meshes: list[Literal["bunny", "duck", "teddy", "mug", "lego", "random_000", "random_001", "random_002"]] = option(
        [],
        "real meshes from pybullet's data files (extras.data.pybullet_mesh; needs the [pybullet] extra), tested as "
        "a novel split; default.yaml names five",
    )
    mesh_starts: PosInt = option(4, "episodes per mesh, each from its own random start view")
    train_objects: Annotated[int, at.Ge(1)] = option(24, "training objects per seen category")
    views_per_object: PosInt = option(4, "random input views per training object (each one image and its target map)")
    val_objects: PosInt = option(4, "validation objects per seen category (model selection)")
    test_objects: PosInt = option(6, "test objects per category (seen categories: new instances)")
    image_size: Annotated[int, at.Interval(ge=16, le=128)] = option(64, "rendered images are size² pixels")
    voxels: Annotated[int, at.Interval(ge=8, le=64)] = option(32, "the visual hull's grid is voxels³ over [−1, 1]³")
    max_views: Annotated[int, at.Interval(ge=2, le=48)] = option(10, "views each selection episode acquires")
    radius_deg: Annotated[float, at.Interval(gt=0, le=90)] = option(
        30.0, "maps are interpolated to a candidate from the map directions within this angle"
    )
    threshold: Annotated[float, at.Interval(ge=0, lt=1)] = option(
        0.1, "candidates any min-max-normalised map ever scored at or below this are dropped"
    )
    patch: PosInt = option(8, "ViT patch size (image_size must divide by it)")
    dim: PosInt = option(96, "ViT width")
    depth: PosInt = option(4, "ViT blocks")
    heads: PosInt = option(4, "ViT attention heads")
    steps: PosInt = option(1000, "ViT training steps")
    batch: PosInt = option(64, "images per ViT step")
    lr: PosFloat = option(5e-4, "AdamW's peak learning rate (linear warm-up, cosine decay)")
    eval_every: PosInt = option(100, "the ViT keeps the state with the best validation MSE, checked this often")

    def problems(self) -> list[str]:
        out = []
        if self.image_size % self.patch:
            out.append(f"image_size: {self.image_size} must divide by patch ({self.patch})")
        if self.dim % self.heads:
            out.append(f"dim: {self.dim} must divide by heads ({self.heads})")
        if len(set(self.held_out)) == len(SDF_CATEGORIES):
            out.append("held_out: holds out every category; leave at least one to train on")
        return out
