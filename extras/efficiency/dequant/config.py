"""Config of the extras.efficiency.dequant recipe."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DequantConfig:
    """Ridge dequantisation against the straight-through estimator, on an MLP and a tiny character GPT.

    settings: "fp" (full precision) or "A<a>W<w>" (a-bit activations, w-bit weights), optionally with
    ":<n>of<m>" weight sparsity (e.g. "A4W4:2of4"); every setting except fp runs with each dequantiser in
    dequants (ridge, ste). block: quantisation block; lam: ridge λ.
    MLP: Fashion-MNIST, train_size images (val_size held out to pick the epoch), test_size test images,
    hidden units, Adam (mlp_lr) for mlp_epochs, mlp_seeds seeds. GPT: character LM on CPython's pydoc topics (90 % / 10 %
    split), gpt_layers × gpt_d with gpt_heads, context gpt_ctx, AdamW (gpt_lr) for gpt_steps of gpt_batch
    windows; validation bits per character on gpt_eval_windows windows. gpt: false skips the GPT part.
    A run diverges when its loss becomes non-finite or its last 10 % of training losses average no lower
    than its first 10 %. seeds: repetitions of every GPT run.
    """

    settings: list[str] = field(default_factory=lambda: ["fp", "A4W4", "A1W1", "A4W4:2of4"])
    dequants: list[str] = field(default_factory=lambda: ["ste", "ridge"])
    block: int = 128
    lam: float = 0.01
    train_size: int = 20000
    val_size: int = 2000
    test_size: int = 10000
    hidden: int = 256
    mlp_lr: float = 1e-3
    mlp_epochs: int = 5
    mlp_seeds: int = 5
    batch_size: int = 128
    gpt: bool = True
    gpt_settings: list[str] = field(default_factory=lambda: ["fp", "A4W4", "A1W1"])
    gpt_d: int = 64
    gpt_layers: int = 2
    gpt_heads: int = 4
    gpt_ctx: int = 64
    gpt_lr: float = 3e-3
    gpt_steps: int = 800
    gpt_batch: int = 32
    gpt_eval_windows: int = 256
    seeds: int = 3
