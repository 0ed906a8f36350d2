"""Config of the extras.spiking.frernn recipe."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated

import annotated_types as at

from agentkit.config import PosFloat, PosInt
from agentkit.extras.data import split_problems

SETTING = re.compile(r"^(fre|ep|bp)-([1-9][0-9]*)(-res)?$")


@dataclass
class FRERNNConfig:
    """FRE-RNN against unregulated Equilibrium Propagation and backprop, tanh networks on Fashion-MNIST.

    Data: train_size training images (val_size of them held out to pick the epoch), test_size test images.
    settings: "<method>-<hidden layers>[-res]": fre (EP with feedback scaled by feedback, free phase of
    steps_per_layer × layers steps), ep (unregulated EP: feedback 1, free phase of ep_steps), bp (the same network's
    feed-forward pass trained by backprop); "-res" adds identity residuals from layer i − skip to layer i. Hidden
    layers are `width` wide; the nudged phase runs half the free phase at strength beta through fixed random output
    feedback. Adam at lr for every method (5e-4 left EP 5–7 points lower), epochs of batch_size; settling measured
    at tol (the first step after which no unit moves more than tol); seeds.
    """

    settings: Annotated[list[str], at.MinLen(1)] = field(
        default_factory=lambda: ["fre-3", "ep-3", "bp-3", "fre-8-res", "fre-8", "ep-8-res", "bp-8-res", "bp-8"]
    )
    train_size: PosInt = 6000
    val_size: PosInt = 1000
    test_size: PosInt = 5000
    width: PosInt = 128
    skip: PosInt = 2
    feedback: PosFloat = 0.01
    steps_per_layer: PosInt = 10
    ep_steps: PosInt = 100
    beta: PosFloat = 0.1
    tol: PosFloat = 1e-3
    lr: PosFloat = 1e-3
    epochs: PosInt = 3
    batch_size: PosInt = 100
    seeds: PosInt = 3

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
