"""Config of the extras.physics.atom recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.physics.atom.md import MD17
from agentkit.extras.sweep import SweepConfig, device_problems

Molecule = Literal[tuple(MD17)]  # type: ignore[valid-type]


@dataclass
class AtomConfig(SweepConfig):
    """ATOM (graph-free, quasi-equivariant, 8 frames decoded at once) against EGNO, an autoregressive EGNN and
    constant velocity, on MMFF94 molecular dynamics of the MD17 molecules simulated here: trained on 6 molecules,
    tested on new trajectories of them and zero-shot on the other 2, at several frame spacings Δt."""

    methods: Annotated[list[Literal["atom", "egno", "egnn", "constvel", "static"]], at.MinLen(1)] = option(
        ["atom", "egno", "egnn", "constvel", "static"],
        "atom (the method); egno (equivariant graph neural operator: EGNN + Fourier convolution over frames); "
        "egnn (an EGNN stepped Δt and rolled out); constvel (x + v·t, no training); static (the atoms stay where "
        "they are: what a model that learned nothing about the motion scores)",
    )
    train_molecules: Annotated[list[Molecule], at.MinLen(1)] = option(
        ["aspirin", "benzene", "ethanol", "malonaldehyde", "toluene", "uracil"], "molecules trained on"
    )
    zero_shot_molecules: Annotated[list[Molecule], at.MinLen(1)] = option(
        ["naphthalene", "salicylic_acid"], "molecules only tested on (zero-shot)"
    )
    dt_fs: Annotated[list[PosFloat], at.MinLen(1)] = option(
        [2.0, 4.0, 8.0], "frame spacings Δt (fs): every model is trained on all and tested on each"
    )
    heavy_atoms: bool = option(
        True, "predict the heavy atoms only (the MD17 protocol of EGNO and ATOM; the hydrogens are still simulated)"
    )
    frames: Annotated[int, at.Ge(2)] = option(8, "future frames predicted (t_0 + Δt … t_0 + frames·Δt)")
    temperature: Annotated[list[PosFloat], at.Len(2, 2)] = option(
        [300.0, 500.0], "each trajectory's temperature (K) is drawn uniformly from this range"
    )
    timestep_fs: PosFloat = option(0.5, "the integrator's step (fs)")
    record_every: PosInt = option(2, "integrator steps between recorded frames (Δt must be a multiple of it)")
    equilibrate: Annotated[int, at.Ge(0)] = option(1000, "Langevin steps before recording (friction 0.01/fs)")
    train_frames: Annotated[int, at.Ge(2)] = option(4000, "recorded frames of each training trajectory")
    eval_frames: Annotated[int, at.Ge(2)] = option(600, "recorded frames of each validation and test trajectory")
    eval_windows: PosInt = option(48, "test and validation windows per molecule and Δt")
    dim: PosInt = option(64, "ATOM's width (irreps ⌊d/3⌋×1o + the rest ×0e)")
    blocks: PosInt = option(3, "ATOM blocks (the paper: 6 of width 256)")
    heads: PosInt = option(4, "ATOM's attention heads")
    hidden: PosInt = option(64, "EGNO's and EGNN's width")
    layers: PosInt = option(4, "EGNO's and EGNN's layers")
    modes: PosInt = option(2, "EGNO's Fourier modes over frames (its default)")
    steps: PosInt = option(3000, "optimiser steps of every trained model")
    batch: PosInt = option(16, "windows per step (all from one molecule and one Δt)")
    lr: PosFloat = option(1e-3, "Adam's peak learning rate (linear warm-up, cosine decay)")
    evals: PosInt = option(5, "validation checks (the state with the lowest validation MSE is kept)")
    noise: Annotated[float, at.Ge(0)] = option(
        0.005, "Gaussian noise (Å) on the present positions in training (label noise: the target stays clean)"
    )
    rotate: bool = option(True, "train on randomly rotated windows (ATOM needs it; EGNO and EGNN are unaffected)")
    device: str = option("cpu", "torch device (cuda runs the same config on a GPU)")

    def problems(self) -> list[str]:
        out = []
        both = set(self.train_molecules) & set(self.zero_shot_molecules)
        if both:
            out.append(f"zero_shot_molecules: {sorted(both)} are also trained on")
        step = self.timestep_fs * self.record_every
        for dt in self.dt_fs:
            if abs(dt / step - round(dt / step)) > 1e-9 or round(dt / step) < 1:
                out.append(f"dt_fs: {dt} is not a multiple of timestep_fs · record_every = {step} fs")
        span = round(max(self.dt_fs) / step) * self.frames
        for key in ("train_frames", "eval_frames"):
            if getattr(self, key) <= span:
                out.append(f"{key}: {getattr(self, key)} frames do not hold one window ({span} frames + 1)")
        if self.temperature[0] > self.temperature[1]:
            out.append(f"temperature: {self.temperature} must be [low, high]")
        if self.dim % self.heads or (self.dim // self.heads) % 2:
            out.append(f"heads: dim {self.dim} / heads {self.heads} must be an even whole number (T-RoPE)")
        if self.dim < 6:
            out.append("dim: ATOM needs at least 6 features (one 1o vector and scalars)")
        out += device_problems(self.device)
        return out
