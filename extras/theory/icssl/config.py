"""Config of the extras.theory.icssl recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import NonNegFloat, PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig

Manifold = Literal["moons", "circles", "swiss_roll", "cylinder", "spirals", "shells"]
Method = Literal["icssl", "eig_icl", "plain_icl", "label_spreading", "spectral_lr"]
LabelFraction = Annotated[float, at.Interval(gt=0, lt=1)]


@dataclass
class ICSSLConfig(SweepConfig):
    """IC-SSL (in-context power iteration + functional GD) against EIG+ICL, a plain ICL transformer,
    LabelSpreading and SpectralEmbedding+LR: accuracy on the unlabelled points of episodes, by label fraction, on
    the training geometries and out of distribution."""

    train_sets: Annotated[list[Manifold], at.MinLen(1)] = option(
        ["moons", "circles", "swiss_roll", "cylinder"], "geometries the in-context learners are trained on"
    )
    ood_sets: list[Manifold] = option(
        ["spirals", "shells"], "geometries held out of training, tested out of distribution"
    )
    fashion_pairs: bool = option(
        True, "also test out of distribution on Fashion-MNIST class pairs (PCA features; Debian dataset-fashion-mnist)"
    )
    pca_dim: PosInt = option(32, "principal components of the Fashion-MNIST features")
    label_fracs: Annotated[list[LabelFraction], at.MinLen(1)] = option(
        [0.03, 0.05, 0.1, 0.25], "labelled share of each episode (at least one label per class)"
    )
    methods: Annotated[list[Method], at.MinLen(1)] = option(
        ["icssl", "eig_icl", "plain_icl", "label_spreading", "spectral_lr"],
        "icssl; eig_icl (exact offline eigenmaps, same GD stage); plain_icl (transformer on raw x); "
        "label_spreading and spectral_lr (scikit-learn, hyperparameters picked on validation episodes)",
    )
    n: Annotated[int, at.Interval(ge=10, le=1000)] = option(100, "points per episode")
    d: Annotated[int, at.Interval(ge=3, le=256)] = option(10, "ambient dimension the geometries are rotated into")
    noise: NonNegFloat = option(0.05, "Gaussian noise std per ambient coordinate (data scaled to total variance 1)")
    k: PosInt = option(8, "eigenvectors of the spectral representation (icssl, eig_icl)")
    power_layers: PosInt = option(20, "icssl's linear-attention power-iteration layers")
    gd_steps: PosInt = option(8, "GD-ICL steps of icssl and eig_icl")
    scale: PosFloat = option(
        0.1, "RBF bandwidth h as a multiple of the episode's median squared distance (icssl's start; eig_icl's value)"
    )
    width: PosInt = option(64, "plain_icl's model width")
    layers: PosInt = option(3, "plain_icl's transformer layers")
    heads: PosInt = option(4, "plain_icl's attention heads")
    steps: PosInt = option(1500, "training steps of each in-context learner")
    batch_size: PosInt = option(16, "episodes per training step")
    lr: PosFloat = option(0.01, "Adam's learning rate for icssl and eig_icl")
    icl_lr: PosFloat = option(1e-3, "Adam's learning rate for plain_icl")
    eval_every: PosInt = option(100, "steps between validations (the best validation step is kept)")
    val_episodes: PosInt = option(64, "validation episodes (training geometries, every label fraction)")
    test_episodes: PosInt = option(50, "test episodes per geometry and label fraction")

    def problems(self) -> list[str]:
        out = [f"label_fracs: {f} labels all {self.n} points" for f in self.label_fracs if round(f * self.n) >= self.n]
        if self.width % self.heads:
            out.append(f"heads: {self.heads} does not divide width = {self.width}")
        if self.k >= self.n:
            out.append(f"k: {self.k} eigenvectors need more than n = {self.n} points")
        return out
