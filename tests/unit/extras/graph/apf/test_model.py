"""extras.graph.apf: the Rayleigh quotient, RQ subgraphs, the Chebyshev filters and the gate regulariser by hand."""

import math

import pytest
import torch

PATH = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # 0 – 1 – 2


def test_rayleigh_quotient_of_a_path_by_hand():
    from agentkit.extras.graph.apf.model import rayleigh_quotient

    x = torch.tensor([1.0, 2.0, 4.0])
    assert rayleigh_quotient(x, PATH).item() == pytest.approx(((1 - 2) ** 2 + (2 - 4) ** 2) / (1 + 4 + 16))
    assert rayleigh_quotient(torch.ones(3, 2), PATH).item() == 0.0  # a constant signal does not vary
    two = torch.tensor([[1.0, 0.0], [2.0, 1.0], [4.0, -1.0]])  # tr(XᵀLX)/tr(XᵀX) over both channels
    assert rayleigh_quotient(two, PATH).item() == pytest.approx((1 + 1 + 4 + 4) / (21 + 2))


def test_rq_subgraphs_keep_the_candidate_with_the_largest_quotient():
    from torch_geometric.utils import subgraph

    from agentkit.extras import data
    from agentkit.extras.graph.apf.model import rayleigh_quotient, rq_subgraphs, subgraph_rq, two_hop_sets

    g = data.anomaly_graph(nodes=120, blocks=2, channels=4, anomaly_rate=0.1, seed=3)
    xc = g.x - g.x.mean(0)
    sets = rq_subgraphs(g.x, g.edge_index, candidates=6, walks=3, seed=0)
    hops = two_hop_sets(g.edge_index, g.num_nodes)

    def rq(nodes):
        ei, _ = subgraph(nodes, g.edge_index, relabel_nodes=True, num_nodes=g.num_nodes)
        return rayleigh_quotient(xc[nodes], ei).item() if ei.numel() else 0.0

    # the vectorised quotient of every candidate row (repeats masked) equals the induced subgraph's
    cand = (
        torch.stack(
            [hops[v][torch.randint(len(hops[v]), (5,), generator=torch.Generator().manual_seed(v))] for v in range(120)]
        )
        .sort(1)
        .values
    )
    valid = torch.ones_like(cand, dtype=torch.bool)
    valid[:, 1:] = cand[:, 1:] != cand[:, :-1]
    got = subgraph_rq(xc, g.edge_index, cand, valid)
    assert got.tolist() == pytest.approx([rq(row.unique()) for row in cand], abs=1e-5)
    for v in range(0, 120, 7):
        s = sets[v]
        assert s[0] == v and len(set(s.tolist())) == len(s) <= 7
        assert set(s.tolist()) <= set(hops[v].tolist())  # inside the 2-hop neighbourhood
    mean = lambda idx: sum(rq(sets[v]) for v in idx) / len(idx)  # noqa: E731
    assert mean(torch.nonzero(g.y == 1).flatten().tolist()) > mean(torch.nonzero(g.y == 0).flatten().tolist())
    hop = hops[5]
    assert hop[0] == 5 and set(hop.tolist()) == set(
        (
            torch.eye(120)
            + torch.sparse_coo_tensor(
                g.edge_index, torch.ones(g.edge_index.size(1)), (120, 120), check_invariants=True
            ).to_dense()
        )
        .matrix_power(2)[5]
        .nonzero()
        .flatten()
        .tolist()
    )


def test_chebyshev_basis_and_filter_responses():
    from agentkit.extras.graph.apf.model import ChebFilter, chebyshev_basis

    a = torch.tensor([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=torch.float)
    d = a.sum(1)
    lhat = -a / torch.sqrt(d[:, None] * d[None])  # L_sym − I
    x = torch.tensor([[1.0], [2.0], [4.0]])
    basis = chebyshev_basis(x, PATH, order=3)
    t2 = 2 * lhat @ lhat - torch.eye(3)
    t3 = 2 * lhat @ t2 - lhat
    for got, want in zip(basis, [x, lhat @ x, t2 @ x, t3 @ x]):
        assert torch.allclose(got, want, atol=1e-6)
    # eigenvectors of L_sym: D^½·1 (λ = 0) and the alternating one (λ = 2)
    smooth = torch.sqrt(d)[:, None]
    sharp = torch.tensor([[1.0], [-math.sqrt(2)], [1.0]])
    low, high, band = ChebFilter(3, "low"), ChebFilter(3, "high"), ChebFilter(3, "band", learnable=False)
    for v, lam in ((smooth, 0.0), (sharp, 2.0)):
        b = chebyshev_basis(v, PATH, 3)
        assert torch.allclose(low(b), (1 - lam / 2) * v, atol=1e-5)
        assert torch.allclose(high(b), lam / 2 * v, atol=1e-5)
        assert torch.allclose(band(b), lam * (2 - lam) * v, atol=1e-5)  # zero at both ends of the spectrum
    assert low.w.requires_grad and not band.w.requires_grad


def test_gate_regulariser_by_hand():
    from agentkit.extras.graph.apf.model import gate_regulariser

    gate = torch.tensor([[0.5, 0.5], [0.9, 0.7]])  # node means 0.5 (an anomaly) and 0.8 (a normal node)
    want = (math.log(2) + -(0.8 * math.log(0.8) + 0.2 * math.log(0.2))) / 2
    assert gate_regulariser(gate, torch.tensor([1, 0]), 0.2, 0.8).item() == pytest.approx(want, rel=1e-5)


def test_pretraining_and_fine_tuning_reach_every_part():
    from agentkit.extras.graph.apf.model import APF, chebyshev_basis, membership

    torch.manual_seed(0)
    x = torch.randn(3, 4)
    model = APF(4, 8, order=2)
    basis, shuffled = chebyshev_basis(x, PATH, 2), chebyshev_basis(x[[2, 0, 1]], PATH, 2)
    readout = membership([torch.tensor([0, 1]), torch.tensor([1]), torch.tensor([2, 1])], 3)
    assert torch.allclose(readout.to_dense(), torch.tensor([[0.5, 0.5, 0], [0, 1, 0], [0, 0.5, 0.5]]))
    model.pretrain_loss(basis, shuffled, readout).backward()
    assert model.g_low.w.grad.abs().sum() > 0 and model.g_high.w.grad.abs().sum() > 0
    logits, gate = model(x, basis)
    assert logits.shape == (3,) and gate.shape == (3, 8) and ((gate > 0) & (gate < 1)).all()
    assert torch.equal(model(x, basis, gated=False)[1], torch.full((3, 8), 0.5))
