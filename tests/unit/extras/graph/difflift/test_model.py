"""extras.graph.difflift: liftings of small graphs (a triangle, a house) and the learned lifting's gradients by hand."""

import pytest
import torch


def _undirected(pairs):
    e = torch.tensor(pairs).t()
    return torch.cat([e, e.flip(0)], 1)


def test_lifting_of_a_triangle():
    from agentkit.extras.graph.difflift.model import triangles

    tri = _undirected([[0, 1], [1, 2], [0, 2]])
    w = torch.tensor([1.0, 0.5, 0.8, 1.0, 0.5, 0.8])  # same weight both directions
    cells = triangles(tri, w, 3)
    assert sorted(cells.node.tolist()) == [0, 1, 2] and cells.cell.tolist() == [0, 0, 0]
    assert cells.weight.tolist() == pytest.approx([0.4] * 3)  # 1 · 0.5 · 0.8
    path = _undirected([[0, 1], [1, 2]])  # open: no 2-cell until an edge closes it
    assert len(triangles(path, torch.ones(4), 3).node) == 0
    w = torch.tensor([0.7], requires_grad=True)  # a learned edge 0–2 with an STE weight
    closed = triangles(torch.cat([path, _undirected([[0, 2]])], 1), torch.cat([torch.ones(4), w, w]), 3)
    closed.weight.sum().backward()
    assert closed.weight.tolist() == pytest.approx([0.7] * 3) and w.grad.item() == pytest.approx(3.0)
    square = _undirected([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])  # two triangles sharing the chord 0–2
    assert sorted(triangles(square, torch.ones(10), 4).cell.bincount().tolist()) == [3, 3]


def test_static_liftings_of_a_house():
    from agentkit.extras.graph.difflift.model import closed_neighbourhoods, cycle_cells, static_hyperedges

    house = _undirected([[0, 1], [1, 2], [2, 3], [3, 0], [2, 4], [3, 4]])  # a square 0-1-2-3 and a roof 2-3-4
    cyc = cycle_cells(house, 5, max_len=6)
    sizes = sorted(cyc.cell.bincount().tolist())
    assert sizes == [3, 4]  # the basis: the roof triangle and the square
    assert cycle_cells(house, 5, max_len=3).cell.bincount().tolist() == [3]
    hop = closed_neighbourhoods(house, 5)
    assert sorted(hop.node[hop.cell == 4].tolist()) == [2, 3, 4]
    knn_cells = static_hyperedges(torch.tensor([[1, 2], [0, 2], [0, 1]]))
    assert sorted(knn_cells.node[knn_cells.cell == 1].tolist()) == [0, 1, 2]


def test_knn_stays_inside_each_graph():
    from agentkit.extras.graph.difflift.model import knn

    z = torch.tensor([[0.0], [1.0], [3.0], [0.1], [5.0]])
    assert knn(z, 2).tolist() == [[3, 1], [3, 0], [1, 4], [0, 1], [2, 1]]
    batch = torch.tensor([0, 0, 0, 1, 1])
    assert knn(z, 2, batch).tolist() == [[1, 2], [0, 2], [1, 0], [4, 4], [3, 3]]


def test_cell_to_node_by_hand():
    from agentkit.extras.graph.difflift.model import Cells, cell_to_node

    h = torch.tensor([[1.0], [2.0], [4.0], [8.0], [16.0]])  # node 4 is in no cell
    cells = Cells(torch.tensor([0, 1, 1, 2, 3]), torch.tensor([0, 0, 1, 1, 1]), torch.tensor([1.0, 1.0, 0.5, 0.5, 1.0]))
    c0, c1 = (1 + 2) / 2, (0.5 * 2 + 0.5 * 4 + 8) / 2  # weighted means of the two cells
    dv = [2.0, 2.5, 1.5, 2.0, 1.0]  # 1 + Σ_c w_vc
    d0, d1 = (2.0 + 2.5) / 2, (0.5 * 2.5 + 0.5 * 1.5 + 2.0) / 2  # weighted mean d_v of each cell's nodes
    want = [
        c0 / (2.0 * d0) ** 0.5,
        c0 / (2.5 * d0) ** 0.5 + 0.5 * c1 / (2.5 * d1) ** 0.5,
        0.5 * c1 / (1.5 * d1) ** 0.5,
        c1 / (2.0 * d1) ** 0.5,
        0.0,
    ]
    assert dv[4] == 1.0 and cell_to_node(h, cells, 5)[:, 0].tolist() == pytest.approx(want, rel=1e-5)


def test_learned_hyperedges_size_and_gradients():
    from agentkit.extras.graph.difflift.model import LearnedHyperedges

    torch.manual_seed(0)
    z = torch.randn(6, 4, requires_grad=True)
    lift = LearnedHyperedges(4, k_min=2, k_max=4).eval()
    with torch.no_grad():  # force k = 3 for every node and p = σ(+big): kept
        lift.size[2].weight.zero_()
        lift.size[2].bias.copy_(torch.tensor([0.0, 5.0, 0.0]))
        lift.keep[2].weight.zero_()
        lift.keep[2].bias.fill_(10.0)
    cells = lift(z)
    per_cell = torch.zeros(6).index_add_(0, cells.cell, cells.weight)
    assert per_cell.tolist() == pytest.approx([4.0] * 6, abs=1e-3)  # the node and its 3 nearest neighbours
    lift.train()
    cells = lift(z)
    cells.weight.sum().backward()
    assert lift.size[2].bias.grad.abs().sum() > 0 and lift.keep[2].bias.grad is not None  # STE gradients flow


def test_topo_net_runs_every_lifting():
    from agentkit.extras.graph.difflift.model import TopoNet, closed_neighbourhoods

    torch.manual_seed(0)
    x = torch.randn(5, 3)
    house = _undirected([[0, 1], [1, 2], [2, 3], [3, 0], [2, 4], [3, 4]])
    for lifting in ("none", "one_hop", "hyper", "cell"):
        net = TopoNet(3, 8, 2, lifting=lifting, k_max=4)
        static = closed_neighbourhoods(house, 5) if lifting == "one_hop" else None
        out = net(x, house, static=static)
        out.sum().backward()
        assert out.shape == (5, 2) and net.inp.weight.grad.abs().sum() > 0
        if lifting in ("hyper", "cell"):
            assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in net.lift.parameters())
