"""NAT: adversarial training with the nasty-teacher regulariser, and the PGD attacks that train and test it.

PGD (Madry et al.): x′₀ = x + U(−ε, ε); x′_{k+1} = Π_{‖x′−x‖∞≤ε, [0,1]} (x′_k + α·sign ∇ L(f(x′_k), y)).

NAT's outer loss on the adversarial example x′ (the trained model t, a frozen naturally trained copy a):

    L = CE(f_t(x′), y) − λ τ² · KL(p_a^τ(x′) ‖ p_t^τ(x′)),    p^τ = softmax(logits / τ)

The KL is averaged over the batch and the K classes, as ``nn.KLDivLoss()`` in the Nasty-Teacher code
(``train_nasty.py``, whose ω = 0.04 multiplies that mean): pushing t's tempered distribution away from the
natural model's makes its non-true probabilities sparse, which is the regulariser. λ ≈ 0.06, τ = 4.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def nat_loss(
    logits: torch.Tensor, natural_logits: torch.Tensor, y: torch.Tensor, lam: float = 0.06, tau: float = 4.0
) -> torch.Tensor:
    """CE(logits, y) − λτ² · mean_{b,k} p_a^τ (log p_a^τ − log p_t^τ); logits, natural_logits ``[B, K]``."""
    pa = F.softmax(natural_logits.detach() / tau, 1)
    kl = (torch.special.xlogy(pa, pa) - pa * F.log_softmax(logits / tau, 1)).mean()  # over B and K
    return F.cross_entropy(logits, y) - lam * tau**2 * kl


def margin_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Carlini–Wagner margin, summed: max_{k≠y} z_k − z_y (an attack loss that a flat softmax cannot mask)."""
    true = logits.gather(1, y[:, None]).squeeze(1)
    other = logits.masked_fill(F.one_hot(y, logits.shape[1]).bool(), float("-inf")).amax(1)
    return (other - true).sum()


def pgd(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    eps: float,
    alpha: float,
    steps: int,
    loss: str = "ce",
    random_start: bool = True,
) -> torch.Tensor:
    """An ℓ∞ PGD adversarial example ``[B, …]`` (pixels in [0, 1]); loss "ce" or "margin". Model parameters get
    no gradient; the caller's train/eval mode is kept."""
    delta = torch.empty_like(x).uniform_(-eps, eps) if random_start else torch.zeros_like(x)
    delta = ((x + delta).clamp(0, 1) - x).requires_grad_(True)
    for _ in range(steps):
        out = model(x + delta)
        obj = F.cross_entropy(out, y, reduction="sum") if loss == "ce" else margin_loss(out, y)
        (grad,) = torch.autograd.grad(obj, delta)
        delta = (delta.detach() + alpha * grad.sign()).clamp(-eps, eps)
        delta = ((x + delta).clamp(0, 1) - x).requires_grad_(True)
    return (x + delta).detach()


def non_true_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of the predicted distribution renormalised over the K−1 wrong classes, per sample ``[B]``:
    low = sparse (the nasty property), log(K−1) = uniform.

    >>> round(non_true_entropy(torch.tensor([[5.0, 0.0, 0.0]]), torch.tensor([0])).item(), 4)  # ln 2
    0.6931
    """
    logp = F.log_softmax(logits.masked_fill(F.one_hot(y, logits.shape[1]).bool(), float("-inf")), 1)
    p = logp.exp()
    return -(p * logp.nan_to_num(neginf=0.0)).sum(1)
