"""CRD's rule functions and concept selection where the answer is known: the GP marginal likelihood against a
closed-form RBF GP, the conditional against the Gaussian formula, and Metropolis–Hastings on a 3-concept toy."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest
import torch

from agentkit.extras.vision.crd.model import POSITIONS, RuleGP, RuleSpace, mh_select, set_f1


def _closed_form(y: torch.Tensor, x: torch.Tensor, ell: float, s2: float, noise: float, mean: torch.Tensor) -> float:
    """log N(y; m, s² exp(−‖x − x'‖² / 2ℓ²) + σ²I) written out: −½ rᵀK⁻¹r − ½ log|K| − n/2 log 2π."""
    d2 = ((x[:, None] - x[None]) ** 2).sum(-1)
    k = s2 * torch.exp(-d2 / (2 * ell**2)) + noise * torch.eye(len(x))
    r = (y - mean)[:, None]
    return float(-0.5 * r.T @ torch.linalg.solve(k, r) - 0.5 * torch.logdet(k) - len(x) / 2 * math.log(2 * math.pi))


def test_marginal_likelihood_matches_a_closed_form_rbf_gp():
    """With the raw (row, column) inputs the GP is a plain RBF GP: its log marginal likelihood on 8 and 9 panels
    equals the formula, for set length scale, output scale, noise and means."""
    torch.manual_seed(0)
    gp = RuleGP(deep=False).double()
    with torch.no_grad():
        gp.kernel.base_kernel.lengthscale = torch.tensor(0.7, dtype=torch.float64)
        gp.kernel.outputscale = torch.tensor(1.3, dtype=torch.float64)
        gp.log_noise.fill_(math.log(0.1))
        gp.mean.copy_(torch.linspace(-0.2, 0.2, 9, dtype=torch.float64))
    y = torch.randn(3, 9, dtype=torch.float64)
    for n in (8, 9):
        got = gp.log_ml(y[:, :n])
        x = POSITIONS[:n].double()
        want = [_closed_form(y[b, :n], x, 0.7, 1.3, 0.1, gp.mean[:n].detach()) for b in range(3)]
        assert got.tolist() == pytest.approx(want, rel=1e-9)


def test_predictive_is_the_ratio_of_marginals():
    """log p(y_9 | y_1…8) = log p(y_1…9) − log p(y_1…8): the conditional the answer uses is the GP's own."""
    torch.manual_seed(1)
    gp = RuleGP(hidden=8, features=4).double()
    y = torch.randn(4, 9, dtype=torch.float64)
    cands = torch.randn(4, 3, dtype=torch.float64)
    with torch.no_grad():
        pred = gp.predictive(y[:, :8], cands)
        for m in range(3):
            full = torch.cat([y[:, :8], cands[:, m : m + 1]], 1)
            assert torch.allclose(pred[:, m], gp.log_ml(full) - gp.log_ml(y[:, :8]), atol=1e-9)


def test_rule_space_scores_a_fitted_rule_above_noise():
    """Fit on progressions (rows a, a+d, a+2d with one step d per grid): a progression scores θ > 0 and its true
    last value beats the others; values with no structure score below it."""
    torch.manual_seed(2)
    g = torch.Generator().manual_seed(2)

    def progressions(n):
        a = torch.rand(n, 3, 1, generator=g) - 0.5
        d = (torch.rand(n, 1, 1, generator=g) - 0.5) * 0.3
        return (a + d * torch.arange(3.0)).reshape(n, 9)

    space = RuleSpace(["progression"], hidden=16, features=6)
    space.fit({"progression": progressions(300)}, steps=200, lr=0.03)
    y = progressions(50)
    wrong = y[:, 8:9] + torch.tensor([[0.0, 0.15, -0.15, 0.3]])
    theta, pred = space.score(y[:, :8], wrong)
    noise = torch.rand(50, 8, generator=g) - 0.5
    theta_noise, _ = space.score(noise, wrong)
    assert (pred.argmax(1) == 0).float().mean() > 0.9
    assert theta.median() > 0 and theta.median() > theta_noise.median() + 3


def test_metropolis_hastings_samples_p_of_g_on_three_concepts():
    """K = 1 and K = 2 of 3 concepts, θ = (0.5, −0.3, 1.0), proposer logits that favour the wrong concept: the
    chain's visit frequencies match p(G) ∝ exp Σ_{i∈G} θ_i within 0.02 (the swap's q ratio corrects the logits)."""
    theta, logits = np.array([0.5, -0.3, 1.0]), np.array([0.0, 2.0, -1.0])
    for k in (1, 2):
        sets = [frozenset(s) for s in itertools.combinations(range(3), k)]
        w = np.array([math.exp(sum(theta[i] for i in s)) for s in sets])
        want = dict(zip(sets, w / w.sum()))
        _, visits = mh_select(theta, logits, k, 30_000, np.random.default_rng(k))
        total = sum(visits.values())
        for s in sets:
            assert visits[s] / total == pytest.approx(want[s], abs=0.02), (k, sorted(s))


def test_mh_returns_the_mode_and_f1():
    theta, logits = np.array([3.0, 2.5, -4.0, -4.0]), np.zeros(4)
    best, visits = mh_select(theta, logits, 2, 2000, np.random.default_rng(0))
    assert best == frozenset({0, 1}) and isinstance(visits, Counter)
    assert set_f1(best, np.array([1, 1, 0, 0], bool)) == 1.0
    assert set_f1(frozenset({2, 3}), np.array([1, 1, 0, 0], bool)) == 0.0


def test_engine_proposer_sends_the_drawn_puzzle_and_reads_the_reply():
    """Through a stand-in Engine (a fast unit test; the recipe test runs a real VLM): the prompt carries the
    rendered puzzle as an image, a valid JSON reply becomes a Proposal on the true rule attributes, and a reply with
    no valid concept becomes None."""
    import json

    from agentkit.engines.base import Completion
    from agentkit.extras import data
    from agentkit.extras.vision.crd.proposer import EngineProposer, parse_proposal

    puzzles = data.raven(2, seed=0)
    reply = {
        "concepts": [
            {"name": "Size", "values": puzzles[0].values[:, 3].tolist(), "rule": True},
            {"name": "glow", "values": [0] * 15, "rule": True},  # 15 values: dropped
            {"name": "texture", "values": [1, 2] * 8, "rule": False},
        ]
    }

    class Stub:
        def __init__(self):
            self.prompts = None

        def generate(self, prompts, params):
            self.prompts = prompts
            texts = ["Sure! " + json.dumps(reply), "no idea"]
            return [
                [Completion(text=t, token_ids=[], logprobs=[], finish_reason="stop", prompt_tokens=0)] for t in texts
            ]

    stub = Stub()
    got = EngineProposer(stub)(puzzles)
    image = stub.prompts[0][0]["content"][0]["image"]
    assert image.size == data.raven_render(puzzles[0]).size and image.mode == "RGB"
    assert got[1] is None and got[0].names == ["size", "texture"]
    assert np.array_equal(got[0].values[0], puzzles[0].values[:, 3]) and got[0].is_rule.tolist() == [True, False]
    assert got[0].logits[0] > 0 > got[0].logits[1]
    assert parse_proposal('{"concepts": "none"}', set()) is None and parse_proposal("{not json}", set()) is None
