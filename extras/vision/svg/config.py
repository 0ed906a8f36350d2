"""Config of the extras.vision.svg recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import annotated_types as at

from agentkit.config import PosFloat, PosInt, option
from agentkit.extras.sweep import SweepConfig


@dataclass
class SVGConfig(SweepConfig):
    """SVG (flow matching on frozen self-supervised features plus an aligned residual, decoded by a conv decoder)
    against the same SiT on a same-size KL-VAE latent, with the residual removed or left unaligned, on
    Fashion-MNIST padded to 32². Every latent is an 8 × 8 grid (4-pixel ViT patches; the decoder upsamples 4×)."""

    latents: Annotated[list[Literal["svg", "unaligned", "ssl_only", "vae"]], at.MinLen(1)] = option(
        ["svg", "unaligned", "ssl_only", "vae"],
        "svg (SSL features + aligned residual, 10 % mask tokens); unaligned (the residual without the alignment); "
        "ssl_only (no residual); vae (a KL-VAE latent with as many channels as svg's)",
    )
    train_size: Annotated[int, at.Ge(64)] = option(10000, "Fashion-MNIST training images (class-balanced)")
    val_size: Annotated[int, at.Ge(16)] = option(1000, "of them held out for model selection")
    test_size: Annotated[int, at.Ge(16)] = option(2000, "test images: FID's reference set and the probes' test set")
    probe_size: Annotated[int, at.Ge(16)] = option(
        3000, "training images each linear probe fits on (at most train_size − val_size; C is picked on validation)"
    )
    probe_iters: PosInt = option(100, "L-BFGS iterations per probe fit (2,560 features converge slowly)")
    ssl_dim: PosInt = option(32, "SSL ViT width = the SSL features' channels D")
    ssl_depth: PosInt = option(4, "SSL ViT blocks")
    ssl_steps: PosInt = option(450, "VICReg steps of the SSL ViT")
    ssl_batch: PosInt = option(96, "images per VICReg step (two views each)")
    residual_channels: PosInt = option(8, "the residual's channels (SVG: 8)")
    residual_dim: PosInt = option(32, "residual ViT width")
    residual_depth: PosInt = option(2, "residual ViT blocks")
    mask_ratio: Annotated[float, at.Interval(ge=0, lt=1)] = option(
        0.1, "share of training samples whose residual is replaced by the mask token"
    )
    heads: PosInt = option(4, "attention heads of every ViT and of the SiT")
    decoder_width: PosInt = option(16, "conv decoder (and KL-VAE encoder) channels")
    ae_steps: PosInt = option(200, "training steps of each decoder (with its residual encoder) and of the KL-VAE")
    ae_batch: PosInt = option(64, "images per decoder step")
    kl_weight: Annotated[float, at.Ge(0)] = option(1e-4, "the KL-VAE's KL weight per latent element")
    sit_dim: PosInt = option(48, "SiT width")
    sit_depth: PosInt = option(4, "SiT blocks")
    sit_steps: PosInt = option(350, "SiT training steps")
    sit_batch: PosInt = option(64, "latents per SiT step")
    euler_steps: Annotated[list[Annotated[int, at.Ge(1)]], at.MinLen(1)] = option(
        [5, 10, 25], "Euler step counts FID is measured at"
    )
    fid_samples: Annotated[int, at.Ge(16)] = option(1000, "samples per FID (against as many test images at most)")
    fid_every: PosInt = option(
        175, "FID-against-training-steps checkpoints (at the largest step count, fid_samples / 2)"
    )
    lr: PosFloat = option(1e-3, "AdamW's peak learning rate (linear warm-up, cosine decay) for every network")

    def problems(self) -> list[str]:
        out = []
        for name, dim in (("ssl_dim", self.ssl_dim), ("residual_dim", self.residual_dim), ("sit_dim", self.sit_dim)):
            if dim % self.heads:
                out.append(f"{name}: {dim} does not divide by heads ({self.heads})")
        if self.decoder_width % 8:
            out.append(f"decoder_width: {self.decoder_width} must divide by 8 (GroupNorm's groups)")
        if self.val_size >= self.train_size:
            out.append(f"val_size: {self.val_size} must be below train_size {self.train_size}")
        return out
