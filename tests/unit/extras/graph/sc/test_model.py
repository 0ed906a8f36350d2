"""extras.graph.sc: the self-consistency loss on a 4-edge explanation, GSAT's pieces and top-k edges by hand."""

import math

import pytest
import torch

EDGES = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # 0 – 1 – 2: four directed edges


def _identity_models():
    """A one-layer, width-1 GIN and explainer whose outputs are easy sums: h_v = ReLU(x_v + Σ_u α_uv x_u)/s and
    a_uv = ReLU(h_u + h_v), with s = √(1 + 1e-5) from batch norm in eval mode."""
    from agentkit.extras.graph.sc.model import AttnGIN, Explainer

    gin, expl = AttnGIN(1, 1, layers=1, classes=2).eval(), Explainer(1, dropout=0.0).eval()
    with torch.no_grad():
        for lin in (gin.node_enc, gin.mlps[0][0], gin.mlps[0][3], expl.mlp[3]):
            lin.weight.fill_(1.0)
            lin.bias.zero_()
        expl.mlp[0].weight.fill_(1.0)
        expl.mlp[0].bias.zero_()
    return gin, expl


def test_sc_loss_on_a_four_edge_explanation_by_hand():
    from agentkit.extras.graph.sc.model import sc_loss

    gin, expl = _identity_models()
    x = torch.tensor([[1.0], [0.0], [2.0]])
    s = math.sqrt(1 + 1e-5)
    sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    # α_old: h = (1, 0 + 1 + 2, 2)/s = (1, 3, 2)/s, so a(0,1) = a(1,0) = 4/s and a(1,2) = a(2,1) = 5/s
    a, b = sig(4 / s), sig(5 / s)
    # α_new: node 1 now gets α(0→1)·1 + α(2→1)·2 = a + 2b; nodes 0 and 2 get α·x₁ = 0
    h1 = (a + 2 * b) / s
    na, nb = sig(1 / s + h1), sig(h1 + 2 / s)
    gap, old = sc_loss(gin, expl, x, EDGES)
    assert old.tolist() == pytest.approx([a, a, b, b], rel=1e-5)
    assert gap.item() == pytest.approx((2 * abs(a - na) + 2 * abs(b - nb)) / 4, rel=1e-4)
    gap.backward()
    assert expl.mlp[0].weight.grad.abs().sum() > 0  # the gap trains the explainer…
    assert gin.mlps[0][0].weight.grad is None  # …and never the GIN (its embeddings are detached)


def test_attention_scales_messages():
    gin, _ = _identity_models()
    x = torch.tensor([[1.0], [0.0], [2.0]])
    s = math.sqrt(1 + 1e-5)
    full = gin.emb(x, EDGES)[:, 0]
    assert full.tolist() == pytest.approx([1 / s, 3 / s, 2 / s], rel=1e-5)
    cut = gin.emb(x, EDGES, torch.tensor([1.0, 1.0, 0.0, 0.0]))[:, 0]  # drop 2 → 1 (and 1 → 2)
    assert cut.tolist() == pytest.approx([1 / s, 1 / s, 2 / s], rel=1e-5)


def test_symmetrise_kl_and_concrete():
    from agentkit.extras.graph.sc.model import bernoulli_kl, concrete, symmetrise

    att = torch.tensor([0.2, 0.6, 0.9, 0.5])
    assert symmetrise(att, EDGES, 3).tolist() == pytest.approx([0.4, 0.4, 0.7, 0.7])
    one_way = torch.tensor([[0, 1], [1, 2]])  # no reverse edges: unchanged
    assert symmetrise(torch.tensor([0.2, 0.6]), one_way, 3).tolist() == pytest.approx([0.2, 0.6])
    kl = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)
    assert bernoulli_kl(torch.tensor([0.9, 0.5]), 0.5).item() == pytest.approx(kl / 2, rel=1e-5)
    torch.manual_seed(0)
    samples = concrete(torch.full((20000,), math.log(3.0)))  # logit ln 3: P(α > ½) = ¾
    assert ((samples > 0.5).float().mean().item()) == pytest.approx(0.75, abs=0.02)


def test_top_edges_per_graph():
    from agentkit.extras.graph.sc.recipe import top_edges

    att = torch.tensor([0.1, 0.9, 0.5, 0.7, 0.2, 0.3, 0.8])
    graph = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    assert top_edges(att, graph, 2).tolist() == [False, True, True, True, False, False, True]
    assert top_edges(att, graph, 5).all()
