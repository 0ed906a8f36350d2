r"""CRD, concept–rule decomposition (ICLR 2026): a proposer names concepts and reads their values on every panel; a
Gaussian-process rule function scores how well each concept's values follow a rule over the 3 × 3 grid; a
Metropolis–Hastings chain picks a concise set of concepts; the answer is the candidate the chosen rules find most
likely.

**Rule function.** A concept's values y ∈ R^n on the grid positions x_1 … x_n (row, column) are a GP draw,

.. math::
    y \sim \mathcal N\big(m\mathbf 1,\; s^2\,k_{\mathrm{RBF}}(\phi(x_p), \phi(x_q)) + \sigma^2 I\big),

with a deep kernel (Wilson et al. 2016): φ is an MLP of the position's one-hot row and column, trained once on
the rule-governed concepts of training puzzles (type-II maximum likelihood over all of them, then frozen), so the
covariance learns which positions co-vary under RAVEN's row rules. Constant, progression, arithmetic and
distribute-three rows are all linear-Gaussian in the row's free values, so one learned covariance can hold them.
The rule score is a Bayes factor against values that follow no rule,

.. math::
    \theta_i = \log p_{\mathrm{GP}}(y_i) - \log \mathcal N\big(y_i;\, m\mathbf 1,\, \mathrm{diag}(K + \sigma^2 I)\big),

so a concept scores by the structure of its values, not by their spread. Values are scaled to [−½, ½] by their
concept's number of levels.

**Selection.** p(G) ∝ Π_{i∈G} e^{θ_i} over sets of K concepts. A move swaps i ∈ G (uniform) for j ∉ G drawn with
probability softmax(ℓ)_j over the concepts outside G (ℓ: the proposer's logits), accepted with
min(1, p(G′) q(G | G′) / (p(G) q(G′ | G))).

**Answer.** Σ_{i∈G} log p_GP(y_{i,9} = candidate's value | the 8 context values), maximised over the 8 candidates.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import torch
from torch import nn

from agentkit.extras.nets import mlp

FAMILIES = ("constant", "progression", "arithmetic+", "arithmetic-", "distribute_three/1", "distribute_three/2")
POSITIONS = torch.tensor([[r, c] for r in range(3) for c in range(3)])  # the 9 grid positions, row-major


def family(rule: str, param: int) -> str:
    """The rule family (one covariance each) of a generator rule and its parameter: progression's steps share one
    (its covariance holds the step as a shared slope), arithmetic's signs and distribute-three's shifts do not.

    >>> family("arithmetic", -1), family("distribute_three", 2), family("progression", -2)
    ('arithmetic-', 'distribute_three/2', 'progression')
    """
    if rule == "arithmetic":
        return "arithmetic+" if param > 0 else "arithmetic-"
    if rule == "distribute_three":
        return f"distribute_three/{param}"
    return rule


def position_features(pos: torch.Tensor) -> torch.Tensor:
    """One-hot row and column: ``[n, 2]`` → ``[n, 6]``."""
    return torch.cat([nn.functional.one_hot(pos[:, 0], 3), nn.functional.one_hot(pos[:, 1], 3)], 1).float()


class RuleGP(nn.Module):
    """The GP rule function over grid positions. ``deep=False`` puts the RBF kernel on the raw (row, column)
    coordinates instead of φ's features (the closed-form check). Values ``[B, n]`` at ``POSITIONS[:n]``."""

    def __init__(self, hidden: int = 32, features: int = 8, deep: bool = True):
        from gpytorch.kernels import RBFKernel, ScaleKernel

        super().__init__()
        self.phi = mlp(6, hidden, features, layers=2, act=nn.Tanh) if deep else None
        self.kernel = ScaleKernel(RBFKernel())
        self.log_noise = nn.Parameter(torch.tensor(math.log(0.05)))
        self.mean = nn.Parameter(torch.zeros(9))  # one per grid position (arithmetic offsets rows)

    def inputs(self, n: int) -> torch.Tensor:
        pos = POSITIONS[:n]
        dtype = self.mean.dtype
        return self.phi(position_features(pos).to(dtype)) if self.phi is not None else pos.to(dtype)

    def covariance(self, n: int) -> torch.Tensor:
        """K + σ²I over the first ``n`` grid positions, ``[n, n]`` (the kernel's dense ``forward``: none of
        GPyTorch's lazy tensors for a 9 × 9 matrix)."""
        x = self.inputs(n)
        return self.kernel.forward(x, x) + self.log_noise.exp() * torch.eye(n, dtype=x.dtype)

    def log_ml(self, y: torch.Tensor, cov: torch.Tensor | None = None) -> torch.Tensor:
        """log N(y; m, K + σ²I) per row of ``y [B, n]`` → ``[B]``: −½ rᵀK⁻¹r − Σ log diag L − n/2 log 2π with
        r = y − m and K = LLᵀ (``cov``: K + σ²I if already computed)."""
        n = y.shape[1]
        chol = torch.linalg.cholesky(self.covariance(n) if cov is None else cov)
        r = (y - self.mean[:n]).T  # [n, B]
        z = torch.linalg.solve_triangular(chol, r, upper=False)
        return -0.5 * (z**2).sum(0) - chol.diagonal().log().sum() - 0.5 * n * math.log(2 * math.pi)

    def log_iid(self, y: torch.Tensor, cov: torch.Tensor | None = None) -> torch.Tensor:
        """log p(y | the GP's marginals, no correlation): Σ_p log N(y_p; m_p, K_pp + σ²), per row of ``y [B, n]``."""
        n = y.shape[1]
        var = (self.covariance(n) if cov is None else cov).diagonal()
        return (-0.5 * (y - self.mean[:n]) ** 2 / var - 0.5 * (var * 2 * math.pi).log()).sum(1)

    def theta(self, y: torch.Tensor, cov: torch.Tensor | None = None) -> torch.Tensor:
        """The rule score: log p_GP(y) − log p(y | the same marginals, no correlation), per row of ``y [B, n]``."""
        cov = self.covariance(y.shape[1]) if cov is None else cov
        return self.log_ml(y, cov) - self.log_iid(y, cov)

    def predictive(self, context: torch.Tensor, last: torch.Tensor, cov: torch.Tensor | None = None) -> torch.Tensor:
        """log p(y_n = last | y_1 … y_{n−1} = context): ``context [B, n−1]``, ``last [B, M]`` (M values to try per
        row) → ``[B, M]``. The GP's conditional: a Gaussian with mean m + k*ᵀK⁻¹(y − m), variance k** − k*ᵀK⁻¹k*."""
        n = context.shape[1] + 1
        cov = self.covariance(n) if cov is None else cov
        k, ks, kss = cov[:-1, :-1], cov[:-1, -1], cov[-1, -1]
        w = torch.linalg.solve(k, ks)
        mu = self.mean[n - 1] + (context - self.mean[: n - 1]) @ w
        var = kss - ks @ w
        return -0.5 * (last - mu[:, None]) ** 2 / var - 0.5 * torch.log(2 * math.pi * var)


def scale(values: np.ndarray, levels: np.ndarray) -> torch.Tensor:
    """Concept values ``[..., C, P]`` (level indices) to [−½, ½] by each concept's number of levels ``[C]``."""
    lv = np.maximum(levels - 1, 1).reshape((-1, 1))
    return torch.tensor(values / lv - 0.5, dtype=torch.float32)


def fit_rule_gp(gp: RuleGP, y: torch.Tensor, steps: int, lr: float = 0.01, progress=None) -> list[float]:
    """Type-II maximum likelihood: Adam on the mean −log p_GP of the full-grid value vectors ``y [B, 9]`` of
    rule-governed training concepts. Returns the losses."""
    opt = torch.optim.Adam(gp.parameters(), lr=lr)
    losses = []
    for _ in progress(range(steps)) if progress else range(steps):
        loss = -gp.log_ml(y).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


class RuleSpace(nn.Module):
    r"""The space of rule functions: one ``RuleGP`` per rule family (constant, progression, arithmetic + and −,
    distribute-three by shift 1 and 2: each a different covariance), mixed with prior weights π_r (the families'
    shares among the training concepts). A concept's rule score is the mixture's Bayes factor against no rule,

    .. math::
        \theta = \log \sum_r \pi_r\, p_r(y) - \log p_{\mathrm{iid}}(y),

    (p_iid: the families' own marginals without correlation, averaged in log space) and its prediction of the
    missing panel is the mixture of the families' conditionals, weighted by their posteriors given the context."""

    def __init__(self, families: list[str], hidden: int = 32, features: int = 8):
        super().__init__()
        self.families = list(families)
        self.gps = nn.ModuleList(RuleGP(hidden, features) for _ in families)
        self.register_buffer("log_prior", torch.full((len(families),), -math.log(len(families))))

    def fit(self, data: dict[str, torch.Tensor], steps: int, lr: float, progress=None) -> dict[str, float]:
        """Fit each family's GP on its training concepts (``data[family]``: ``[B, 9]`` scaled values) and set π
        from their counts; returns each family's final mean −log p."""
        counts = torch.tensor([float(len(data.get(f, []))) for f in self.families])
        self.log_prior.copy_((counts.clamp(min=1) / counts.clamp(min=1).sum()).log())
        out = {}
        for f, gp in zip(self.families, self.gps):
            if f in data and len(data[f]):
                out[f] = fit_rule_gp(gp, data[f], steps, lr, progress)[-1]
        return out

    @torch.no_grad()
    def score(self, context: torch.Tensor, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``context [C, 8]`` and ``candidates [C, M]`` scaled values → (θ ``[C]``, log p(candidate | context)
        ``[C, M]``)."""
        n = context.shape[1]
        covs = [gp.covariance(n + 1) for gp in self.gps]  # one 9 × 9 per family, shared by the three terms
        ml = torch.stack([gp.log_ml(context, k[:n, :n]) for gp, k in zip(self.gps, covs)]) + self.log_prior[:, None]
        iid = torch.stack([gp.log_iid(context, k[:n, :n]) for gp, k in zip(self.gps, covs)]).mean(0)
        post = ml.log_softmax(0)  # log posterior of each family given the context
        pred = torch.stack([gp.predictive(context, candidates, k) for gp, k in zip(self.gps, covs)])  # [R, C, M]
        return torch.logsumexp(ml, 0) - iid, torch.logsumexp(pred + post[..., None], 0)


def _log_softmax_at(logits: np.ndarray, among: np.ndarray, j: int) -> float:
    """log softmax(logits over ``among``) at concept ``j``."""
    lo = logits[among]
    top = lo.max()
    return float(logits[j] - top - np.log(np.exp(lo - top).sum()))


def mh_select(
    theta: np.ndarray, logits: np.ndarray, k: int, steps: int, rng: np.random.Generator, start: frozenset | None = None
) -> tuple[frozenset[int], Counter]:
    """Metropolis–Hastings over K-concept sets, p(G) ∝ Π e^{θ_i}, with the proposer's logits steering the swaps.
    Starts from the K top logits (or ``start``). Returns the most visited set and every set's visit count.

    A move takes one member i out (probability 1/K) and brings j in with probability softmax(ℓ)_j over the
    concepts outside G; the reverse move brings i back from outside G′. The 1/K terms cancel, so
    log α = θ_j − θ_i + log softmax_{out(G′)}(ℓ)_i − log softmax_{out(G)}(ℓ)_j.
    """
    c = len(theta)
    if not 0 < k < c:
        whole = frozenset(range(c)) if k >= c else frozenset()
        return whole, Counter({whole: steps})
    inside = np.zeros(c, bool)
    inside[sorted(start) if start is not None else np.argsort(-logits)[:k]] = True
    visits: Counter = Counter()
    members, outs = rng.random((steps, 2)), rng.random(steps)
    for t in range(steps):
        ins, outside = np.flatnonzero(inside), np.flatnonzero(~inside)
        i = int(ins[int(members[t, 0] * k)])
        lo = logits[outside]
        p = np.exp(lo - lo.max())
        j = int(outside[min(int(np.searchsorted(np.cumsum(p), members[t, 1] * p.sum())), len(outside) - 1)])
        back = np.append(outside[outside != j], i)
        log_a = theta[j] - theta[i] + _log_softmax_at(logits, back, i) - _log_softmax_at(logits, outside, j)
        if math.log(outs[t] + 1e-300) < log_a:
            inside[i], inside[j] = False, True
        visits[frozenset(np.flatnonzero(inside).tolist())] += 1
    return max(visits, key=visits.get), visits


def set_f1(chosen: frozenset[int], truth: np.ndarray) -> float:
    """F1 of the chosen concepts against the rule-governed ones (``truth [C]`` bool).

    >>> set_f1(frozenset({0, 1, 5}), np.array([1, 1, 1, 0, 0, 0], bool))
    0.6666666666666666
    """
    hit = sum(bool(truth[i]) for i in chosen)
    if hit == 0:
        return 0.0
    p, r = hit / len(chosen), hit / int(truth.sum())
    return 2 * p * r / (p + r)
