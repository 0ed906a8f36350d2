"""Config of the extras.scene.foremamba3d recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig, device_problems

Share = Annotated[float, at.Interval(gt=0, le=1)]


@dataclass
class ForeMambaConfig(SweepConfig):
    """Fore-Mamba3D (top-scored voxels only, regional-to-global windows, semantic and 3D fusion) against
    full-sequence bidirectional Mamba over every non-empty voxel (LION-style) and a naive foreground-only Mamba,
    on seeded LiDAR-like scenes: BEV centre-heatmap AP, encoder FLOPs and wall time."""

    methods: Annotated[list[Literal["foremamba3d", "naive", "lion", "rgsw"]], at.MinLen(1)] = option(
        ["foremamba3d", "naive", "lion", "rgsw"],
        "foremamba3d (top voxels + RGSW + SASF); naive (top voxels, plain bidirectional Mamba); lion (every "
        "non-empty voxel, plain bidirectional Mamba); rgsw (top voxels + RGSW, no SASF: an ablation)",
    )
    train_scenes: Annotated[int, at.Ge(2)] = option(500, "training scenes (seeded per seed)")
    val_scenes: PosInt = option(24, "validation scenes (the checkpoint with the best validation mAP is kept)")
    test_scenes: PosInt = option(48, "test scenes")
    grid: Annotated[int, at.Ge(8)] = option(128, "BEV cells a side (a power of two: the Hilbert curve)")
    voxel: PosFloat = option(0.4, "metres a BEV cell")
    height: Annotated[int, at.Ge(1)] = option(8, "height levels over −2 … 2 m")
    beams: Annotated[int, at.Ge(2)] = option(16, "the sensor's beams (elevations from −25° to 2°)")
    azimuths: Annotated[int, at.Ge(8)] = option(768, "rays per beam")
    cars: Annotated[list[Annotated[int, at.Ge(0)]], at.Len(2, 2)] = option([4, 8], "least and most cars a scene")
    pedestrians: Annotated[list[Annotated[int, at.Ge(0)]], at.Len(2, 2)] = option(
        [6, 10], "least and most pedestrians a scene"
    )
    clutter: Annotated[float, at.Ge(0)] = option(1.0, "scales the walls, poles, bushes and trees a scene")
    keep: Share = option(0.2, "share of voxels the foreground methods encode (the paper's top 20 %)")
    dim: PosInt = option(16, "voxel feature width")
    layers: PosInt = option(3, "bidirectional Mamba layers")
    d_state: PosInt = option(8, "Mamba's state size N")
    rgsw_windows: Annotated[list[Annotated[int, at.Ge(0)]], at.MinLen(1)] = option(
        [32, 32, 0], "RGSW's window per layer (tokens; 0 = the whole sequence; odd layers shift by half a window)"
    )
    steps: PosInt = option(1200, "optimiser steps (one scene each)")
    lr: PosFloat = option(2e-3, "AdamW's peak learning rate (linear warm-up, cosine decay)")
    evals: PosInt = option(4, "validation checks")
    score_weight: Annotated[float, at.Ge(0)] = option(1.0, "weight of the voxel-scoring focal loss")
    semantic_weight: Annotated[float, at.Ge(0)] = option(0.5, "weight of SASF's semantic cross-entropy")
    match_m: Annotated[list[PosFloat], at.MinLen(1)] = option(
        [0.5, 1.0, 2.0, 4.0], "centre-distance thresholds (m) AP is averaged over (nuScenes')"
    )
    device: str = option("cpu", "torch device (cuda runs the same config on a GPU)")

    def problems(self) -> list[str]:
        out = []
        if self.grid & (self.grid - 1):
            out.append(f"grid: {self.grid} is not a power of two (the Hilbert curve needs one)")
        if len(self.rgsw_windows) != self.layers:
            out.append(f"rgsw_windows: {len(self.rgsw_windows)} windows for {self.layers} layers")
        for key in ("cars", "pedestrians"):
            lo, hi = getattr(self, key)
            if lo > hi:
                out.append(f"{key}: {[lo, hi]} must be [least, most]")
        out += device_problems(self.device)
        return out
