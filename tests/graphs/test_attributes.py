"""Continuous attributes kept apart from labels: read_tu against GraKeL's own reader on
Cuneiform (node and edge attributes), torch-geometric's TUDataset(use_node_attr=True) on the
same files, the refusal of non-integral floats as labels, and GraphSet carrying the
attributes through every way of building and slicing a set."""
import os
import shutil

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data

from torchkern.datasets import read_tu
from torchkern.graphs import (GraphHopper, GraphSet, PropagationAttr, ShortestPath,
                              VertexHistogram, WeisfeilerLehman)

import grakel  # noqa: E402  (the test extra installs it: never skipped)
DATA = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")


@pytest.fixture(scope="module")
def cuneiform():
    return read_tu(os.path.join(DATA, "Cuneiform"))


def _grakel_read(monkeypatch, **kw):
    from grakel.datasets.base import read_data
    monkeypatch.chdir(DATA)  # GraKeL's reader reads <name>/<name>_*.txt from the cwd
    return read_data("Cuneiform", **kw)


def test_cuneiform_node_attributes_equal_grakels(cuneiform, monkeypatch):
    ref = _grakel_read(monkeypatch, prefer_attr_nodes=True)
    assert len(ref.data) == len(cuneiform) == 267
    np.testing.assert_array_equal(ref.target, [int(d.y) for d in cuneiform])
    for d, (_, nodes, _) in zip(cuneiform, ref.data):
        want = np.array([nodes[k] for k in sorted(nodes)])  # GraKeL: global 1-based ids
        assert d.node_attributes.shape == (d.num_nodes, 3)
        # float32 here, float64 in GraKeL: the file's digits rounded once
        np.testing.assert_array_equal(d.node_attributes.numpy(), want.astype(np.float32))


def test_cuneiform_edge_attributes_equal_grakels(cuneiform, monkeypatch):
    # (GraKeL's reader fails on Cuneiform's two-column node labels: attributes both ways)
    ref = _grakel_read(monkeypatch, prefer_attr_nodes=True, prefer_attr_edges=True)
    for d, (edges, nodes, eattr) in zip(cuneiform, ref.data):
        first = min(nodes)
        got = {(int(s) + first, int(t) + first): tuple(a)
               for (s, t), a in zip(d.edge_index.t().tolist(), d.edge_attributes.numpy())}
        assert set(got) == set(edges)
        want = {e: tuple(np.float32(eattr[e])) for e in edges}
        assert got == want


def test_tudataset_use_node_attr_puts_attributes_in_front_of_the_labels(cuneiform, tmp_path):
    """torch-geometric's TUDataset (here from the local files, nothing downloaded):
    x = [attributes | one-hot labels]; the convention here keeps them apart, and a
    label kernel given that x refuses it by name."""
    from torch_geometric.datasets import TUDataset
    raw = tmp_path / "Cuneiform" / "raw"
    raw.mkdir(parents=True)
    for f in os.listdir(os.path.join(DATA, "Cuneiform")):
        if f.endswith(".txt") and f != "README.txt":
            shutil.copy(os.path.join(DATA, "Cuneiform", f), raw / f)
    ds = TUDataset(str(tmp_path), "Cuneiform", use_node_attr=True)
    k = ds.num_node_attributes
    assert k == 3
    for i in (0, 100, 266):
        torch.testing.assert_close(ds[i].x[:, :k], cuneiform[i].node_attributes)
        torch.testing.assert_close(ds[i].x[:, k:], cuneiform[i].x)
    with pytest.raises(ValueError, match=r"x holds floats that are not integers .*"
                                         r"'node_attributes'"):
        WeisfeilerLehman(2)(ds)
    # split as the docs say: a transform moving the attribute columns out of x
    split = [Data(x=d.x[:, k:], node_attributes=d.x[:, :k], edge_index=d.edge_index)
             for d in ds[:30]]
    torch.testing.assert_close(GraphHopper()(split).to_dense(),
                               GraphHopper()(cuneiform[:30]).to_dense())
    torch.testing.assert_close(WeisfeilerLehman(2)(split).to_dense(),
                               WeisfeilerLehman(2)(cuneiform[:30]).to_dense())


def _graphs(x):
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    return [Data(x=x, edge_index=ei), Data(x=x.flip(0), edge_index=ei)]


@pytest.mark.parametrize("kernel", [WeisfeilerLehman(1), ShortestPath(), VertexHistogram()])
def test_label_kernels_refuse_non_integral_x_by_name(kernel):
    x = torch.tensor([[0.25], [1.0], [2.0]])
    with pytest.raises(ValueError, match=r"X: x holds floats that are not integers "
                                         r"\(x\[0, 0\] = 0.25\).*node_attributes"):
        kernel(_graphs(x))
    # integral floats (one-hot rows, integer columns) are labels
    ok = kernel(_graphs(torch.tensor([[0.0], [1.0], [0.0]]))).to_dense()
    ref = kernel(_graphs(torch.tensor([[0], [1], [0]]))).to_dense()
    torch.testing.assert_close(ok, ref)


def test_label_kernels_refuse_non_integral_edge_attr_where_they_read_edge_labels():
    from torchkern.graphs import (CoreFramework, EdgeHistogram,
                                  NeighborhoodSubgraphPairwiseDistance, RandomWalk)
    x = torch.tensor([[0], [1], [0]])
    g = _graphs(x)
    for d in g:
        d.edge_attr = torch.tensor([[0.5], [0.5], [2.0], [2.0]])
    for kernel in (EdgeHistogram(), WeisfeilerLehman(1, edge_labels=True),
                   RandomWalk(0.1, edge_labels=True), NeighborhoodSubgraphPairwiseDistance()):
        with pytest.raises(ValueError, match=r"edge_attr holds floats that are not integers "
                                             r"\(edge_attr\[0, 0\] = 0.5.*'edge_attributes'"):
            kernel(g).to_dense()
    # kernels that do not read edge labels ignore edge_attr, continuous or not
    plain = _graphs(x)
    for kernel in (VertexHistogram(), ShortestPath(), CoreFramework(ShortestPath())):
        torch.testing.assert_close(kernel(g).to_dense(), kernel(plain).to_dense(),
                                   rtol=0, atol=0)
    G = GraphSet(g)  # slicing and joining a set does not read them either
    GraphSet.concat([G.take(torch.tensor([1])), G.take(torch.tensor([0]))])
    # integral floats are labels: as the integers (EH = 2·2 + 2·2 between any two graphs)
    ints = _graphs(x)
    for d, e in zip(g, ints):
        d.edge_attr = torch.tensor([[1.0], [1.0], [2.0], [2.0]])
        e.edge_attr = torch.tensor([[1], [1], [2], [2]])
    torch.testing.assert_close(EdgeHistogram()(g).to_dense(), torch.full((2, 2), 8.0).double())
    torch.testing.assert_close(EdgeHistogram()(ints).to_dense(), torch.full((2, 2), 8.0).double())


def test_node_attr_x_reads_x_as_attributes(cuneiform):
    moved = [Data(x=d.node_attributes, edge_index=d.edge_index) for d in cuneiform[:25]]
    ref = GraphHopper(kernel_type="gaussian", mu=0.3)(cuneiform[:25]).to_dense()
    got = GraphHopper(kernel_type="gaussian", mu=0.3, node_attr="x")(moved).to_dense()
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=0)
    ref = PropagationAttr(t_max=3, random_state=2)(cuneiform[:25]).to_dense()
    got = PropagationAttr(t_max=3, random_state=2, node_attr="x")(moved).to_dense()
    torch.testing.assert_close(got, ref, rtol=0, atol=0)


def test_attribute_kernels_need_the_attributes_by_name():
    g = _graphs(torch.tensor([[0], [1], [0]]))
    with pytest.raises(ValueError, match=r"X: GraphHopper reads continuous node attributes.*"
                                         r"'node_attributes'"):
        GraphHopper()(g)
    with pytest.raises(ValueError, match=r"X: PropagationAttr .* no field 'feat'"):
        PropagationAttr(node_attr="feat")(g)
    with pytest.raises(TypeError, match="node_attr must be the name of a Data field"):
        GraphHopper(node_attr=3)
    bad = [Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=2,
                node_attributes=torch.tensor([[0.0], [float("nan")]]))]
    with pytest.raises(ValueError, match="node_attributes contains NaN"):
        GraphHopper()(bad)
    mixed = [Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=1,
                  node_attributes=torch.ones(1, 2)),
             Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=1)]
    with pytest.raises(ValueError, match="graph 1 has no node_attributes while others do"):
        GraphHopper()(mixed)


def test_graph_set_carries_attributes_through_batch_take_and_concat(cuneiform):
    graphs = cuneiform[:12]
    G = GraphSet(graphs)
    na = torch.cat([d.node_attributes for d in graphs]).double()
    torch.testing.assert_close(G.node_attributes, na, rtol=0, atol=0)
    # edges are sorted by (source, target) in the set: the attributes follow them
    ea = {}
    off = 0
    for d in graphs:
        for (s, t), a in zip(d.edge_index.t().tolist(), d.edge_attributes.double()):
            ea[(s + off, t + off)] = a
        off += d.num_nodes
    want = torch.stack([ea[(s, t)] for s, t in G.edge_index.t().tolist()])
    torch.testing.assert_close(G.edge_attributes, want, rtol=0, atol=0)
    B = GraphSet(Batch.from_data_list(graphs))
    torch.testing.assert_close(B.node_attributes, G.node_attributes, rtol=0, atol=0)
    torch.testing.assert_close(B.edge_attributes, G.edge_attributes, rtol=0, atol=0)
    part = G.take(torch.tensor([3, 7]))
    torch.testing.assert_close(part.node_attributes,
                               torch.cat([graphs[3].node_attributes,
                                          graphs[7].node_attributes]).double(), rtol=0, atol=0)
    both = GraphSet.concat([G.take(torch.arange(6)), G.take(torch.arange(6, 12))])
    torch.testing.assert_close(both.node_attributes, G.node_attributes, rtol=0, atol=0)
    torch.testing.assert_close(both.edge_attributes, G.edge_attributes, rtol=0, atol=0)


def test_grid_search_on_a_graph_set_equals_the_precomputed_gram():
    """scikit-learn indexes X as ``X[idx, ...]`` (``_safe_indexing``): a GraphSet splits
    like a tensor, and the search equals the one on the precomputed Gram."""
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    import torchkern as tk
    gen = torch.Generator().manual_seed(0)
    graphs = []
    for i in range(24):
        n = 4 + i % 4
        graphs.append(Data(x=torch.randint(0, 3, (n, 1), generator=gen),
                           edge_index=torch.randint(0, n, (2, 2 * n), generator=gen)))
    y = np.array([int(g.x.sum()) % 2 for g in graphs])
    G = GraphSet(graphs)
    np.testing.assert_array_equal(G[np.arange(3, 6), ...].ptr, G.take(torch.arange(3, 6)).ptr)
    with pytest.raises(IndexError, match="indexed along its samples only"):
        G[np.arange(3), 0]
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"kernel__n_iter": [1, 2]}
    gs = GridSearchCV(tk.SVC(kernel=WeisfeilerLehman(), C=1.0), grid, cv=cv).fit(G, y)
    for h, score in zip(grid["kernel__n_iter"], gs.cv_results_["mean_test_score"]):
        K = WeisfeilerLehman(h)(graphs).to_dense().numpy()
        ref = GridSearchCV(tk.SVC(kernel="precomputed", C=1.0), {"C": [1.0]}, cv=cv).fit(K, y)
        assert score == ref.cv_results_["mean_test_score"][0]


@pytest.mark.parametrize("kernel", [WeisfeilerLehman(n_iter=2), ShortestPath(),
                                    VertexHistogram()], ids=lambda k: type(k).__name__)
def test_kernels_reading_no_attributes_ignore_them_in_the_cross_gram(kernel):
    """A kernel that reads no continuous attributes neither reads nor compares them: the
    cross Gram of graphs whose node attributes differ in width equals the Gram of the
    same graphs without attributes (built apart: no attribute field at all)."""
    g = torch.Generator().manual_seed(3)
    bare, attributed = [], []
    for i, n in enumerate([3, 5, 4, 6]):
        src = torch.randint(0, n, (2 * n,), generator=g)
        dst = torch.randint(0, n, (2 * n,), generator=g)
        ei = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
        x = torch.randint(0, 3, (n,), generator=g)
        bare.append(Data(x=x, edge_index=ei, num_nodes=n))
        attributed.append(Data(x=x, edge_index=ei, num_nodes=n,
                               node_attributes=torch.rand(n, 2 + i % 2, generator=g)))
    want = kernel(bare).to_dense()
    np.testing.assert_array_equal(kernel(attributed[:2], attributed[2:]).to_dense(),
                                  want[:2, 2:])
    np.testing.assert_array_equal(kernel(attributed[1:], attributed[:2]).to_dense(),
                                  want[1:, :2])
    with pytest.raises(ValueError, match="node_attributes of different widths"):
        GraphHopper()(attributed[:2], attributed[2:])  # one that reads them refuses them
