"""Config of the extras.spiking.frernn recipe."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.data import split_problems
from agentkit.extras.sweep import SweepConfig

SETTING = re.compile(r"^(fre|ep|bp)-([1-9][0-9]*)(-res)?$")


@dataclass
class FRERNNConfig(SweepConfig):
    """FRE-RNN against unregulated Equilibrium Propagation and backprop, tanh networks on Fashion-MNIST."""

    settings: Annotated[list[str], at.MinLen(1)] = option(
        ["fre-3", "ep-3", "bp-3", "fre-8-res", "fre-8", "ep-8-res", "bp-8-res", "bp-8"],
        "<method>-<hidden layers>[-res]: fre (EP, scaled feedback), ep (unregulated EP), bp (backprop); -res adds identity residuals from layer i − skip",
    )
    train_size: PosInt = option(6000, "Fashion-MNIST training images (val_size of them pick the epoch)")
    val_size: PosInt = option(1000, "held-out training images")
    test_size: PosInt = option(5000, "test images")
    width: PosInt = option(128, "hidden layer width")
    skip: PosInt = option(2, "-res settings: residuals from layer i − skip to layer i")
    feedback: PosFloat = option(0.01, "fre: the feedback scale")
    steps_per_layer: PosInt = option(10, "fre: free-phase steps per layer")
    ep_steps: PosInt = option(100, "ep: free-phase steps")
    beta: PosFloat = option(
        0.1, "nudging strength of the nudged phase (half the free phase, fixed random output feedback)"
    )
    tol: PosFloat = option(1e-3, "settling: the first step after which no unit moves more than this")
    lr: PosFloat = option(1e-3, "Adam's learning rate for every method (5e-4 left EP 5–7 points lower)")
    epochs: PosInt = option(3, "training epochs")
    batch_size: PosInt = option(100, "images per step")

    def problems(self) -> list[str]:
        out = [f"settings: {s!r} is not <fre|ep|bp>-<layers>[-res]" for s in self.settings if not SETTING.match(s)]
        if len(set(self.settings)) < len(self.settings):
            out.append("settings: a setting is listed twice")
        return out + split_problems(self.train_size, self.val_size)


def parse(setting: str) -> tuple[str, int, bool]:
    """ "fre-8-res" → ("fre", 8, True)."""
    m = SETTING.match(setting)
    assert m, setting
    return m[1], int(m[2]), bool(m[3])
