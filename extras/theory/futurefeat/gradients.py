"""Where a feature at position i comes from: the next-token gradient split in three, each part pushed through Adam,
and each part's influence on a probed feature [code: ``src/grad_tracking.py``].

**The split.** Let L = (1/(T−1)) Σ_j L_j be the per-position cross-entropy and L^sg the same loss computed with the
residual r_i^ℓ entering later computation as stop-grad (``LM.detached``). Then

.. math::

    g_{shared} = \\nabla_\\theta L^{sg}, \\qquad
    g_{direct} = \\tfrac{1}{T-1}\\big(\\nabla_\\theta L_i - \\nabla_\\theta L_i^{sg}\\big), \\qquad
    g_{pre\\text{-}cached} = \\nabla_\\theta L - g_{shared} - g_{direct} :

*shared* is everything that does not pass through r_i^ℓ; *direct* is position i's own loss through r_i^ℓ; *pre-cached*
is the later positions' loss through r_i^ℓ (what position i computes for the future).

**Through Adam.** Adam is linear in its first moment, so each part keeps its own m^(p) (same β₁, started at 0 with
the optimizer) and shares the second moment v of the full gradient:

.. math::

    m^{(p)}_t = \\beta_1 m^{(p)}_{t-1} + (1-\\beta_1) g^{(p)}_t, \\qquad
    \\Delta\\theta^{(p)}_t = -\\eta\\, \\frac{m^{(p)}_t / (1-\\beta_1^t)}{\\sqrt{v_t/(1-\\beta_2^t)} + \\epsilon},

and Σ_p Δθ^(p)_t is the optimizer's real step (``AdamParts.deltas``; the test checks it against ``torch.optim.Adam``).

**Influence.** With a probe w (features × d) fitted on the final model and r̄ that model's residual, the risk
R(θ) = ½ mean_b ‖w r_i^ℓ(θ) − w r̄_i^ℓ‖² measures how far the feature is from where training ends. A part's
influence over a stretch of training is the first-order decrease of R it causes, −⟨Σ_t Δθ^(p)_t, ∇_θ R(θ_s)⟩ (θ_s
the stretch's start): positive when that part builds the final feature. The official code evaluates ∇R at every
step by training twice; here R's gradient is taken at the start of each ``track_every``-step stretch from a saved
θ_s, so one training run suffices (first order in the stretch's length).
"""

from __future__ import annotations

import torch

from agentkit.extras.theory.futurefeat.model import LM

PARTS = ("shared", "direct", "pre_cached")


def flat_grad(loss: torch.Tensor, params: list[torch.Tensor], retain: bool = True) -> torch.Tensor:
    """∇ of ``loss`` w.r.t. ``params``, flattened and concatenated (0 where a parameter does not enter)."""
    grads = torch.autograd.grad(loss, params, retain_graph=retain, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).flatten() for p, g in zip(params, grads)])


def split_gradient(lm: LM, tokens: torch.Tensor, layer: int, position: int) -> dict[str, torch.Tensor]:
    """``{"full", "shared", "direct", "pre_cached"}``: flat gradients of the mean next-token loss on ``tokens``
    (``full`` is the training gradient; the parts sum to it) for the residual at (``layer``, ``position``)."""
    params = list(lm.parameters())
    loss = lm.loss(tokens)
    scale = 1.0 / len(loss)
    full = flat_grad(loss.mean(), params)
    own = flat_grad(loss[position] * scale, params, retain=False)
    with lm.detached(layer, position):
        loss_sg = lm.loss(tokens)
    shared = flat_grad(loss_sg.mean(), params)
    own_sg = flat_grad(loss_sg[position] * scale, params, retain=False)
    direct = own - own_sg
    return {"full": full, "shared": shared, "direct": direct, "pre_cached": full - shared - direct}


def set_grads(params: list[torch.Tensor], flat: torch.Tensor) -> None:
    """Write a flat gradient into ``params``' ``.grad``."""
    offset = 0
    for p in params:
        p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
        offset += p.numel()


class AdamParts:
    """Each part's own first moment beside a ``torch.optim.Adam`` (one parameter group, no weight decay).

    Call ``deltas(parts, full)`` with this step's gradients **before** ``optimizer.step()``: it returns each part's
    share of the step the optimizer is about to take.
    """

    def __init__(self, optimizer: torch.optim.Adam, names: tuple[str, ...] = PARTS):
        if len(optimizer.param_groups) != 1 or optimizer.param_groups[0]["weight_decay"]:
            raise ValueError("AdamParts supports one parameter group without weight decay")
        self.opt, self.group = optimizer, optimizer.param_groups[0]
        self.params = list(self.group["params"])
        size = sum(p.numel() for p in self.params)
        self.moments = {n: torch.zeros(size) for n in names}

    def deltas(self, parts: dict[str, torch.Tensor], full: torch.Tensor) -> dict[str, torch.Tensor]:
        beta1, beta2 = self.group["betas"]
        lr, eps = self.group["lr"], self.group["eps"]
        state = [self.opt.state.get(p, {}) for p in self.params]
        step = int(state[0]["step"]) + 1 if state[0] else 1
        v = torch.cat([(s["exp_avg_sq"] if s else torch.zeros_like(p)).flatten() for s, p in zip(state, self.params)])
        v = beta2 * v + (1 - beta2) * full * full
        denom = (v / (1 - beta2**step)).sqrt() + eps
        out = {}
        for name, m in self.moments.items():
            m.mul_(beta1).add_(parts[name], alpha=1 - beta1)
            out[name] = -lr * (m / (1 - beta1**step)) / denom
        return out


def probe_risk(lm: LM, tokens: torch.Tensor, layer: int, position: int, w: torch.Tensor, target: torch.Tensor):
    """R = ½ mean_b ‖w r − target‖² for the residual r = r_position^layer of ``tokens`` (non-myopic attention,
    as the official code measures it), ``w [features, d]``, ``target [b, features]``."""
    with lm.attention("eager"):
        r = lm(tokens)[1][layer, :, position]
    return 0.5 * (r @ w.T - target).pow(2).sum(-1).mean()
