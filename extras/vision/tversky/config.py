"""Config of the extras.vision.tversky recipe."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TverskyConfig:
    """Tversky projection layer against nn.Linear, three demonstrations.

    XOR: one layer (2 → 2 classes) trained on the four points of XOR for xor_steps Adam steps at xor_lr,
    xor_seeds seeds per feature-bank size in xor_banks; a run converges when all four points are strictly
    classified. nn.Linear cannot exceed 75 %.
    Frozen features: a small CNN trained for cnn_epochs on train_size Fashion-MNIST images (dataset:
    fashion_mnist, or digits for scikit-learn's 8×8 digits) is frozen; a linear head and a Tversky head
    (head_bank features) are trained on its standardised features for head_epochs; the learning rate (from
    head_lrs), the Tversky head's normalisation and the epoch are picked on val_size held-out training images;
    test accuracy on test_size test images; seeds seeds (each with its own CNN).
    Prototypes: a Tversky layer on raw pixels (proto_bank features, proto_epochs); its prototypes and first
    features are plotted as images.
    """

    xor_banks: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16, 32])
    xor_seeds: int = 20
    xor_steps: int = 500
    xor_lr: float = 0.05
    dataset: str = "fashion_mnist"
    train_size: int = 10000
    val_size: int = 2000
    test_size: int = 5000
    seeds: int = 3
    cnn_epochs: int = 3
    feature_dim: int = 64
    head_epochs: int = 15
    head_lrs: list[float] = field(default_factory=lambda: [1e-3, 3e-3, 1e-2])
    head_bank: int = 64
    proto_bank: int = 64
    proto_epochs: int = 5
    batch_size: int = 128
