"""Vertex and edge histograms, WL optimal assignment, GraphHopper and the propagation
kernels against GraKeL 0.1.11 (MUTAG, Cuneiform with its attributes, random graphs), each
with and without normalization; k(X, Y) against GraKeL's fit/transform; the definitions
on tiny graphs by hand; estimators, GridSearchCV and the devices."""
import os
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from torch_geometric.data import Batch, Data

import torchkern as tk
from tests._devices import dev, requires_device  # noqa: F401 (fixture)
from torchkern.datasets import read_tu
from torchkern.graphs import (EdgeHistogram, GraphHopper, GraphSet, Propagation,
                              PropagationAttr, VertexHistogram,
                              WeisfeilerLehmanOptimalAssignment)
from torchkern.graphs._labels import initial_labels

import grakel  # noqa: E402  (the test extra installs it: never skipped)
DATA = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")


@pytest.fixture(scope="module")
def mutag():
    return read_tu(os.path.join(DATA, "MUTAG"))


@pytest.fixture(scope="module")
def cuneiform():
    return read_tu(os.path.join(DATA, "Cuneiform"))


def random_graphs(count, seed, n_labels=3, dim=2, n_max=9, connected=False):
    """Erdős–Rényi graphs, both directions, one-hot labels, bond labels, attributes
    (``connected``: plus the path 0 - 1 - ... - n−1)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(2, n_max + 1))
        A = np.triu(rng.random((n, n)) < 0.4, 1)
        A[0, 1] = True  # at least one edge: GraKeL's readers need the edge set
        if connected:
            A[np.arange(n - 1), np.arange(1, n)] = True
        s, t = np.nonzero(A | A.T)
        bond = rng.integers(0, 2, (n, n))
        bond = np.triu(bond, 1) + np.triu(bond, 1).T
        x = torch.nn.functional.one_hot(torch.as_tensor(rng.integers(0, n_labels, n)),
                                        n_labels).float()
        out.append(Data(x=x, edge_index=torch.as_tensor(np.stack([s, t])),
                        edge_attr=torch.as_tensor(bond[s, t])[:, None].float(),
                        node_attributes=torch.as_tensor(rng.normal(size=(n, dim))),
                        num_nodes=n))
    return out


def label_ids(graphs):
    """Each graph's node label ids as GraphSet numbers them (sorted label rows)."""
    G = GraphSet(graphs)
    return torch.split(initial_labels(G)[0], G.num_nodes.tolist())


def gk(graphs, what="labels"):
    """GraKeL graphs: the edges as given, node labels (ids) or attribute vectors, edge
    labels (argmax of edge_attr, or the value of a one-column edge_attr)."""
    ids = label_ids(graphs) if what == "labels" else None
    out = []
    for i, d in enumerate(graphs):
        edges = [tuple(e) for e in d.edge_index.t().tolist()]
        # the adjacency matrix: GraKeL drops the isolated nodes of an edge list
        A = np.zeros((d.num_nodes, d.num_nodes))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        if what == "labels":
            nodes = dict(enumerate(ids[i].tolist()))
        else:
            nodes = dict(enumerate(d.node_attributes.double().numpy()))
        el = {}
        if d.edge_attr is not None:
            vals = d.edge_attr.argmax(1) if d.edge_attr.shape[1] > 1 else d.edge_attr[:, 0]
            el = dict(zip(edges, vals.long().tolist()))
        out.append(grakel.Graph(A, node_labels=nodes, edge_labels=el))
    return out


def ref(kernel, graphs, Y=None, what="labels"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GraKeL's format-change warnings
        if Y is None:
            return kernel.fit_transform(gk(graphs, what))
        kernel.fit(gk(graphs, what))
        return kernel.transform(gk(Y, what))


def dense(K):
    return K.to_dense().numpy()


def assert_equal_or_close(got, want, integer):
    if integer:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13)


# -- histograms and WL optimal assignment: integer kernels, exact ---------------------------

@pytest.mark.parametrize("normalize", [False, True])
def test_histograms_and_wl_oa_equal_grakel_on_mutag(mutag, normalize):
    pairs = [(VertexHistogram(normalize=normalize), grakel.VertexHistogram(normalize=normalize)),
             (EdgeHistogram(normalize=normalize), grakel.EdgeHistogram(normalize=normalize)),
             (WeisfeilerLehmanOptimalAssignment(3, normalize=normalize),
              grakel.WeisfeilerLehmanOptimalAssignment(n_iter=3, normalize=normalize))]
    for ours, theirs in pairs:
        assert_equal_or_close(dense(ours(mutag)), ref(theirs, mutag), not normalize)


def test_histograms_and_wl_oa_equal_grakel_on_random_graphs_and_cross_grams():
    graphs = random_graphs(30, seed=1)
    X, Y = graphs[:18], graphs[18:]
    for h in (1, 4):  # GraKeL needs n_iter ≥ 1
        k = WeisfeilerLehmanOptimalAssignment(h)
        np.testing.assert_array_equal(
            dense(k(graphs)), ref(grakel.WeisfeilerLehmanOptimalAssignment(n_iter=h), graphs))
    # k(Y, X) against GraKeL's fit(X).transform(Y) (labels of Y numbered on X ∪ Y here)
    np.testing.assert_array_equal(
        dense(WeisfeilerLehmanOptimalAssignment(2)(Y, X)),
        ref(grakel.WeisfeilerLehmanOptimalAssignment(n_iter=2), X, Y))
    np.testing.assert_array_equal(dense(VertexHistogram()(Y, X)),
                                  ref(grakel.VertexHistogram(), X, Y))
    np.testing.assert_array_equal(dense(EdgeHistogram()(Y, X)), ref(grakel.EdgeHistogram(), X, Y))


def test_wl_oa_is_the_optimal_assignment_of_the_hierarchy_kernel():
    """Kriege et al.'s definition by brute force: the best bijection (padding the smaller
    graph with dummy nodes of similarity 0) under k(u, v) = number of rounds in which u
    and v share their WL label, over all permutations."""
    import itertools
    graphs = [g for g in random_graphs(12, seed=4, n_max=6)]
    h = 2
    G = GraphSet(graphs)
    from torchkern.graphs._labels import wl_label_sequence
    seq = torch.stack([lab for lab, _ in wl_label_sequence(G, h)], 1)  # (N, h + 1)
    per = torch.split(seq, G.num_nodes.tolist())
    want = np.zeros((len(graphs), len(graphs)))
    for i, a in enumerate(per):
        for j, b in enumerate(per):
            S = (a[:, None, :] == b[None, :, :]).sum(2).numpy()
            n = max(S.shape)
            P = np.zeros((n, n))
            P[:S.shape[0], :S.shape[1]] = S
            want[i, j] = max(P[np.arange(n), list(p)].sum()
                             for p in itertools.permutations(range(n)))
    np.testing.assert_array_equal(dense(WeisfeilerLehmanOptimalAssignment(h)(graphs)), want)


# -- GraphHopper ------------------------------------------------------------------------

@pytest.mark.parametrize("kt, theirs, normalize", [("linear", "linear", False),
                                                   ("gaussian", ("gaussian", 0.25), True)])
def test_graphhopper_equals_grakel_on_cuneiform(cuneiform, kt, theirs, normalize):
    graphs = cuneiform[::12]  # 23 graphs (GraKeL's loops are slow)
    K = dense(GraphHopper(kernel_type=kt, mu=0.25, normalize=normalize)(graphs))
    R = ref(grakel.GraphHopper(kernel_type=theirs, normalize=normalize), graphs,
            what="attributes")
    np.testing.assert_allclose(K, R, rtol=1e-10, atol=1e-13 * np.abs(R).max())


def test_graphhopper_equals_grakel_on_random_graphs_and_transform(monkeypatch):
    import torchkern.graphs.graphhopper as gh
    # connected: GraKeL 0.1.11's GraphHopper fails on a graph with an isolated node
    graphs = random_graphs(24, seed=2, dim=3, connected=True)
    X, Y = graphs[:15], graphs[15:]
    for kt in ("linear", "gaussian"):
        K = dense(GraphHopper(kernel_type=kt)(graphs))
        R = ref(grakel.GraphHopper(kernel_type=kt), graphs, what="attributes")
        np.testing.assert_allclose(K, R, rtol=1e-10, atol=1e-13 * np.abs(R).max())
        if kt == "gaussian":  # blocks of a few rows: the upper triangle, mirrored
            with monkeypatch.context() as m:
                m.setattr(gh, "_BLOCK", 7 * sum(d.num_nodes for d in graphs))
                K = dense(GraphHopper(kernel_type=kt)(graphs))
            np.testing.assert_allclose(K, R, rtol=1e-10, atol=1e-13 * np.abs(R).max())
        # GraKeL's transform pads the weight matrices of Y to the diameter of X ∪ Y
        K = dense(GraphHopper(kernel_type=kt)(Y, X))
        R = ref(grakel.GraphHopper(kernel_type=kt), X, Y, what="attributes")
        np.testing.assert_allclose(K, R, rtol=1e-10, atol=1e-13 * np.abs(R).max())


def test_graphhopper_weights_by_hand():
    """A path a - b - c with attributes 1, 2, 4, one-dimensional: the shortest paths are
    the 3 one-node paths, 4 one-edge paths (both ways), a→b→c and c→b→a. M_b: position 0
    of b→·(1 path of length 0, 2 of length 1), position 1 of the paths a→b, c→b (length
    1) and of a→b→c, c→b→a (length 2): M_b = [[1, 2, 0], [0, 2, 2], [0, 0, 0]]; M_a =
    [[1, 1, 1], [0, 1, 0], [0, 0, 1]] (a→b→c starts, c→b→a ends at a), M_c alike."""
    g = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3,
             node_attributes=torch.tensor([[1.0], [2.0], [4.0]]))
    Ma = np.array([[1, 1, 1], [0, 1, 0], [0, 0, 1]])
    Mb = np.array([[1, 2, 0], [0, 2, 2], [0, 0, 0]])
    M = [Ma, Mb, Ma]
    a = [1.0, 2.0, 4.0]
    # and an isolated node d (attribute 3): M_d = [[1, 0, 0], 0, 0] — its one-node path
    g.num_nodes = 4
    g.node_attributes = torch.tensor([[1.0], [2.0], [4.0], [3.0]])
    M.append(np.diag([1, 0, 0]))
    a.append(3.0)
    lin = sum((M[u] * M[v]).sum() * a[u] * a[v] for u in range(4) for v in range(4))
    gau = sum((M[u] * M[v]).sum() * np.exp(-0.5 * (a[u] - a[v]) ** 2)
              for u in range(4) for v in range(4))
    assert dense(GraphHopper()([g]))[0, 0] == lin
    np.testing.assert_allclose(dense(GraphHopper(kernel_type="gaussian", mu=0.5)([g]))[0, 0],
                               gau, rtol=1e-14)


# -- propagation on attributes: the same hash draws as GraKeL for the same seed ----------
# (Propagation on labels: tests/graphs/test_propagation_labels.py)

@pytest.mark.parametrize("normalize", [False, True])
def test_propagation_attr_equals_grakel_for_the_same_seed(cuneiform, normalize):
    graphs = cuneiform[::3]
    for M in ("L1", "L2"):
        K = dense(PropagationAttr(t_max=4, M=M, random_state=11, normalize=normalize)(graphs))
        R = ref(grakel.PropagationAttr(t_max=4, M=M, random_state=11, normalize=normalize),
                graphs, what="attributes")
        assert_equal_or_close(K, R, not normalize)


def test_propagation_attr_equals_grakel_on_random_graphs():
    graphs = random_graphs(40, seed=3, dim=2)
    np.testing.assert_array_equal(
        dense(PropagationAttr(t_max=3, w=0.5, random_state=2)(graphs)),
        ref(grakel.PropagationAttr(t_max=3, w=0.5, random_state=2), graphs, what="attributes"))


# -- arguments, inputs, estimators --------------------------------------------------------

def test_arguments_are_checked_by_name():
    with pytest.raises(ValueError, match="kernel_type must be"):
        GraphHopper(kernel_type="bridge")
    with pytest.raises(ValueError, match="mu must be a positive"):
        GraphHopper(mu=0)
    with pytest.raises(ValueError, match="t_max must be a positive int"):
        Propagation(t_max=0)
    with pytest.raises(ValueError, match="w must be a positive number"):
        PropagationAttr(w=-1.0)
    with pytest.raises(ValueError, match="M must be 'TV' or 'H'"):
        Propagation(M="L1")
    with pytest.raises(ValueError, match="random_state must be None, a numpy RandomState"):
        Propagation(random_state=-1)
    with pytest.raises(ValueError, match="n_iter must be a non-negative int"):
        WeisfeilerLehmanOptimalAssignment(-1)
    with pytest.raises(ValueError, match="EdgeHistogram needs edge labels"):
        EdgeHistogram()([Data(edge_index=torch.tensor([[0], [1]]), num_nodes=2)])


def test_inputs_batch_dataset_and_graph_set_agree(cuneiform):
    graphs = cuneiform[:20]
    for k in (GraphHopper(), PropagationAttr(t_max=2), VertexHistogram(),
              WeisfeilerLehmanOptimalAssignment(2)):
        want = dense(k(graphs))
        for X in (Batch.from_data_list(graphs), GraphSet(graphs)):
            np.testing.assert_array_equal(dense(k(X)), want)


def test_svc_and_grid_search_over_kernel_arguments(mutag, cuneiform):
    y = np.array([int(d.y) for d in mutag])
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    k = WeisfeilerLehmanOptimalAssignment(1, normalize=True)
    c = clone(tk.SVC(kernel=k)).set_params(kernel__n_iter=3)
    assert (c.kernel.n_iter, k.n_iter) == (3, 1)
    grid = {"kernel__n_iter": [1, 3]}
    gs = GridSearchCV(tk.SVC(kernel=k, C=10.0), grid, cv=cv).fit(mutag, y)
    for h, score in zip(grid["kernel__n_iter"], gs.cv_results_["mean_test_score"]):
        G = dense(WeisfeilerLehmanOptimalAssignment(h, normalize=True)(mutag))
        ref_gs = GridSearchCV(tk.SVC(kernel="precomputed", C=10.0), {"C": [10.0]},
                              cv=cv).fit(G, y)
        assert score == ref_gs.cv_results_["mean_test_score"][0]
    # an attribute kernel in an estimator: the same predictions as on its precomputed Gram
    graphs = GraphSet(cuneiform[::6])
    yc = np.array([int(d.y) for d in cuneiform[::6]])
    kh = GraphHopper(kernel_type="gaussian", mu=0.1, normalize=True)
    svc = tk.SVC(kernel=kh, C=10.0).fit(graphs[:30], yc[:30])
    pre = tk.SVC(kernel="precomputed", C=10.0).fit(dense(kh(graphs[:30])), yc[:30])
    np.testing.assert_array_equal(np.asarray(svc.predict(graphs[30:])),
                                  np.asarray(pre.predict(dense(kh(graphs[30:], graphs[:30])))))


@requires_device
@pytest.mark.parametrize("kernel", [VertexHistogram(), EdgeHistogram(normalize=True),
                                    WeisfeilerLehmanOptimalAssignment(3),
                                    GraphHopper(), GraphHopper(kernel_type="gaussian"),
                                    Propagation(M="TV"), Propagation(M="H"),
                                    PropagationAttr()],
                         ids=["vh", "eh", "wloa", "gh-linear", "gh-gaussian", "prop-tv",
                              "prop-h", "prop-attr"])
def test_part_a_kernels_on_device(dev, kernel):
    graphs = random_graphs(20, seed=6)
    want = dense(kernel(graphs))
    got = kernel(GraphSet(graphs, device=dev)).to_dense()
    assert got.device.type == torch.device(dev).type
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
