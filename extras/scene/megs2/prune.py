r"""MEGS²'s unified pruning: primitives and colour lobes are pruned together under one memory budget,

.. math::
    \min_{o, a}\ L(o, a)\quad \text{s.t.}\quad c_p\,\|o\|_0 + c_l\,\|s\|_0 \le \kappa,

with c_p = 11 floats a primitive and c_l = 7 a lobe (the paper's weights), solved ADMM-style [unverified: no code is
out]: a gradient step on ``L + ρ/2 ‖x − z + u‖²`` (x: the opacities and lobe amplitudes), the projection
``z = Π_κ(x + u)`` onto the budget, and the dual update ``u ← u + x − z``. At the end the support of z is kept: the
other primitives are removed and the other lobes folded into their base colour (``colour.fold``).

The Euclidean projection onto a weighted-L0 set keeps the entries that lose the least ``Σ x²`` per float saved, a
knapsack; here it is solved greedily by ``x² / cost`` (exact when the costs are equal), a lobe counted only with its
primitive: a lobe met before its primitive brings the primitive along at both costs (a lobe of a removed primitive
is dropped with it).

>>> keep_p, keep_l = project_budget(torch.tensor([0.9, 0.1]), torch.tensor([[0.8, 0.05], [0.7, 0.7]]), kappa=24)
>>> keep_p.tolist(), keep_l.tolist()  # primitive 0 (11) with its strong lobe (7): 18 ≤ 24, and nothing else fits
([True, False], [[True, False], [False, False]])
"""

from __future__ import annotations

import torch

C_PRIM, C_LOBE = 11, 7


def budget_cost(keep_prim: torch.Tensor, keep_lobe: torch.Tensor, c_prim: int = C_PRIM, c_lobe: int = C_LOBE) -> int:
    """``c_p ‖o‖₀ + c_l ‖s‖₀`` of the kept primitives and lobes (lobes of removed primitives not counted)."""
    return int(c_prim * keep_prim.sum() + c_lobe * (keep_lobe & keep_prim[:, None]).sum())


def project_budget(
    prim_value: torch.Tensor, lobe_value: torch.Tensor, kappa: float, c_prim: int = C_PRIM, c_lobe: int = C_LOBE
) -> tuple[torch.Tensor, torch.Tensor]:
    """The support of Π_κ: which primitives (``prim_value [G]``, e.g. opacities) and lobes (``lobe_value [G, L]``,
    e.g. amplitude norms) to keep so that the cost stays within ``kappa``, greedily by value² per float."""
    g, n_lobes = lobe_value.shape
    pv, lv = prim_value.detach().float().cpu(), lobe_value.detach().float().cpu()
    density = torch.cat([pv**2 / c_prim, (lv**2 / c_lobe).flatten()])
    order = torch.argsort(density, descending=True).tolist()
    keep_p = torch.zeros(g, dtype=torch.bool)
    keep_l = torch.zeros(g, n_lobes, dtype=torch.bool)
    cost = 0
    for item in order:
        if item < g:
            if not keep_p[item] and cost + c_prim <= kappa:
                keep_p[item] = True
                cost += c_prim
            continue
        i, j = divmod(item - g, n_lobes)
        need = c_lobe + (0 if keep_p[i] else c_prim)  # a lobe met before its primitive brings the primitive along
        if cost + need <= kappa:
            keep_p[i] = keep_l[i, j] = True
            cost += need
    dev = prim_value.device
    return keep_p.to(dev), keep_l.to(dev)


class BudgetADMM:
    """The ADMM state for opacities ``o [G]`` and lobe amplitudes ``a [G, L, 3]``: ``penalty(o, a)`` is added to
    the loss at every step, ``update(o, a)`` projects and moves the duals (every few steps)."""

    def __init__(self, kappa: float, rho: float, c_prim: int = C_PRIM, c_lobe: int = C_LOBE):
        self.kappa, self.rho, self.c_prim, self.c_lobe = kappa, rho, c_prim, c_lobe
        self.z_o = self.z_a = self.u_o = self.u_a = None
        self.keep_prim = self.keep_lobe = None

    @torch.no_grad()
    def update(self, o: torch.Tensor, a: torch.Tensor) -> None:
        if self.u_o is None:
            self.u_o, self.u_a = torch.zeros_like(o), torch.zeros_like(a)
        xo, xa = o + self.u_o, a + self.u_a
        self.keep_prim, self.keep_lobe = project_budget(xo, xa.norm(dim=-1), self.kappa, self.c_prim, self.c_lobe)
        self.z_o = xo * self.keep_prim
        self.z_a = xa * (self.keep_lobe & self.keep_prim[:, None])[..., None]
        self.u_o += o - self.z_o
        self.u_a += a - self.z_a

    def penalty(self, o: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        if self.z_o is None:
            return o.new_zeros(())
        return 0.5 * self.rho * ((o - self.z_o + self.u_o).pow(2).sum() + (a - self.z_a + self.u_a).pow(2).sum())
