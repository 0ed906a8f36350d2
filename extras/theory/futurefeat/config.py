"""Config of the extras.theory.futurefeat recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig

Variant = Literal["standard", "myopic", "untied", "myopic_untied"]


@dataclass
class FutureFeatConfig(SweepConfig):
    """Train the paper's GPT-2 on Majority and Conditioned-Majority in four variants, split every step's gradient
    at one residual into shared, direct and pre-cached parts, and measure each part's influence on the probed
    feature there; then the loss myopic training costs a character language model."""

    tasks: Annotated[list[Literal["majority", "conditioned"]], at.MinLen(1)] = option(
        ["majority", "conditioned"],
        "majority: feature is_majority_k; conditioned (Conditioned-Majority): feature prev_is_k",
    )
    variants: Annotated[list[Variant], at.MinLen(1)] = option(
        ["standard", "myopic", "untied", "myopic_untied"],
        "standard; myopic (stop-grad through cross-position keys and values); untied (separate weights from "
        "position `inputs` on: the last input and the outputs, the official split_index); myopic_untied (both)",
    )
    lm_variants: list[Literal["standard", "myopic"]] = option(
        ["standard", "myopic"], "variants of the character language model (pydoc text); [] skips it"
    )
    vocab: Annotated[int, at.Interval(ge=2, le=10)] = option(3, "task symbols")
    inputs: Annotated[int, at.Interval(ge=3, le=30)] = option(10, "uniform input tokens")
    outputs: Annotated[int, at.Interval(ge=1, le=30)] = option(10, "running-majority output tokens")
    d: PosInt = option(64, "GPT-2 width (the official sweep: 128)")
    layers: Annotated[int, at.Interval(ge=1, le=6)] = option(2, "GPT-2 blocks")
    heads: PosInt = option(4, "attention heads")
    steps: PosInt = option(400, "training steps per task run (the official: 3,000; the outputs are right by ~100)")
    batch_size: PosInt = option(64, "sequences per step")
    lr: PosFloat = option(1e-3, "Adam's learning rate")
    train_size: Annotated[int, at.Ge(64)] = option(20000, "training sequences (seeded)")
    eval_size: Annotated[int, at.Ge(20)] = option(2000, "held-out sequences: task accuracy and probes (70/30)")
    track_layer: Annotated[int, at.Ge(0)] = option(1, "residual layer whose gradient is split (0: embeddings)")
    track_position: PosInt = option(5, "position whose residual is split (an input: its next token is uniform)")
    track_every: PosInt = option(20, "steps per stretch of the influence sum (∇R is taken at each stretch's start)")
    probe_alpha: PosFloat = option(1.0, "ridge penalty of the linear probes (the official's probe_alpha)")
    lm_steps: PosInt = option(500, "training steps of each character language model")
    lm_context: Annotated[int, at.Interval(ge=8, le=256)] = option(64, "characters per language-model sequence")

    def problems(self) -> list[str]:
        out = []
        if self.d % self.heads:
            out.append(f"heads: {self.heads} does not divide d = {self.d}")
        if self.track_layer > self.layers:
            out.append(f"track_layer: {self.track_layer} is past the last block ({self.layers})")
        if self.track_position > self.inputs + self.outputs:
            out.append(f"track_position: {self.track_position} is past the last token ({self.inputs + self.outputs})")
        return out
