"""GDPD's diffusion prior and objectives against closed forms and hand-computed values."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from agentkit.extras import data
from agentkit.extras.timeseries.gdpd.diffusion import Schedule, fit_prior, sample_from
from agentkit.extras.timeseries.gdpd.model import Distiller, LSTMClassifier
from agentkit.extras.timeseries.gdpd.recipe import auc_pr


def test_q_sample_is_the_closed_form_of_the_one_step_chain():
    """Iterating z_t = √α_t z_{t−1} + √β_t ε gives mean √ᾱ_t z₀ and variance 1 − ᾱ_t; q_sample draws from that."""
    s = Schedule(50)
    mean, var = 1.0, 0.0
    for t in range(50):
        mean, var = s.alphas[t].sqrt() * mean, s.alphas[t] * var + s.betas[t]
        assert mean == pytest.approx(s.alpha_bar[t].sqrt().item(), rel=1e-5)
        assert var == pytest.approx(1 - s.alpha_bar[t].item(), abs=1e-6)
    torch.manual_seed(0)
    z0, t = torch.full((200000, 1), 2.0), torch.full((200000,), 9)
    draws = s.q_sample(z0, t, torch.randn_like(z0))
    ab = s.alpha_bar[9].item()
    assert draws.mean().item() == pytest.approx(2 * np.sqrt(ab), abs=0.01)
    assert draws.var().item() == pytest.approx(1 - ab, abs=0.01)
    assert s.posterior_var[0] == 0  # the last reverse step adds no noise


class DiracDenoiser(nn.Module):
    """The exact ε of a prior concentrated on one point z*: ε(z_t, t) = (z_t − √ᾱ_t z*) / √(1 − ᾱ_t)."""

    def __init__(self, target: torch.Tensor, schedule: Schedule):
        super().__init__()
        self.target, self.schedule = target, schedule

    def forward(self, z, t):
        ab = self.schedule.alpha_bar[t].unsqueeze(-1)
        return (z - ab.sqrt() * self.target) / (1 - ab).sqrt()


def test_reverse_chain_with_the_exact_score_lands_on_the_prior():
    """With the exact ε of a Dirac prior, every start z_T ends at z* (the last step inverts q(z₁|z₀) exactly), and
    the chain is differentiable in z_T."""
    s = Schedule(20)
    target = torch.tensor([1.5, -0.5, 3.0])
    z_T = torch.randn(4, 3, requires_grad=True)
    out = sample_from(DiracDenoiser(target, s), s, z_T)
    assert torch.allclose(out, target.expand(4, 3), atol=1e-4)
    torch.manual_seed(0)
    prior = fit_prior(torch.randn(32, 3), s, steps=5, hidden=16)
    sample_from(prior, s, z_T).sum().backward()
    assert z_T.grad is not None and z_T.grad.abs().sum() > 0


def _train(method: str, weight: float, steps: int = 5) -> list[torch.Tensor]:
    torch.manual_seed(0)
    x, y = torch.randn(8, 2, 12), torch.randint(0, 3, (8,))
    teacher = LSTMClassifier(2, 3, 6)
    with torch.no_grad():
        feats, logits = teacher.features(x), teacher(x)
    schedule = Schedule(5)
    prior = fit_prior(feats, schedule, steps=3, hidden=8)
    torch.manual_seed(1)
    student = LSTMClassifier(2, 3, 6)
    dist = Distiller(student, method, weight, teacher.head, prior, schedule, (feats.mean(0), feats.std(0)))
    opt = torch.optim.Adam(dist.parameters(), lr=0.01)
    for _ in range(steps):
        loss = dist.loss(x[:, :, :6], y, feats, logits)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in student.parameters()]


@pytest.mark.parametrize("method", ["kd", "fitnets", "gdpd"])
def test_weight_zero_is_the_student_alone(method):
    """λ = 0: the same student parameters after training as the student alone, step for step."""
    alone = _train("student", 0.0)
    assert all(torch.equal(a, b) for a, b in zip(alone, _train(method, 0.0)))
    assert not all(torch.equal(a, b) for a, b in zip(alone, _train(method, 1.0)))


def test_kd_and_fitnets_terms_by_hand():
    torch.manual_seed(0)
    student = LSTMClassifier(1, 2, 4)
    x, y = torch.randn(3, 1, 5), torch.tensor([0, 1, 1])
    z = student.features(x)
    ce = F.cross_entropy(student.head(z), y)
    t_logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    tau = 2.0
    p, q = F.softmax(t_logits / tau, -1), F.softmax(student.head(z) / tau, -1)
    kl = (p * (p.log() - q.log())).sum(-1).mean()
    kd = Distiller(student, "kd", 0.5, tau=tau)
    assert kd.loss(x, y, None, t_logits).item() == pytest.approx((ce + 0.5 * tau**2 * kl).item(), rel=1e-5)
    t_feats = torch.randn(3, 4)
    fit = Distiller(student, "fitnets", 0.3, student.head)
    want = ce + 0.3 * ((fit.regressor(z) - t_feats) ** 2).sum(-1).mean()
    assert fit.loss(x, y, t_feats, None).item() == pytest.approx(want.item(), rel=1e-5)


def test_auc_pr_binary_and_macro():
    y = np.array([0, 1, 1, 0])  # class-1 scores ranked 0.8 (+), 0.7 (−), 0.6 (+), 0.1 (−): AP = (1/1 + 2/3) / 2
    assert auc_pr(y, np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.3, 0.7]])) == pytest.approx((1 + 2 / 3) / 2)
    y3 = np.array([0, 1, 2])
    assert auc_pr(y3, np.eye(3)) == 1.0


def test_weak_prefix_cue_is_weak_early_and_strong_late():
    x, y = data.weak_prefix_series(400, 100, seed=0)
    early, late = x[:, 0, :30].mean(1), x[:, 0, 60:].max(1) - x[:, 0, 60:].min(1)
    sign = 2 * y - 1
    gap_early = abs(np.mean(early[sign > 0]) - np.mean(early[sign < 0]))
    gap_late = abs(np.mean(x[sign > 0, 0, 60:].mean(1)) - np.mean(x[sign < 0, 0, 60:].mean(1)))
    assert gap_early < gap_late and late.shape == (400,)
