"""The multiscale Laplacian kernel against GraKeL 0.1.11 (MUTAG with one-hot labels,
Cuneiform with its attributes, random attributed graphs; fit_transform and transform,
normalize on and off) and against a dense computation written from Kondor and Pan's
definition (networkx neighbourhoods, exact feature spaces instead of landmarks)."""
import os
import warnings

import networkx as nx
import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from torch_geometric.data import Batch, Data

import torchkern as tk
from tests._devices import dev, requires_device  # noqa: F401 (fixture)
from torchkern.graphs import GraphSet
from torchkern.graphs._labels import initial_labels
from torchkern.graphs.multiscale_laplacian import MultiscaleLaplacian

import grakel  # noqa: E402  (the test extra installs it: never skipped)
from grakel import kernels as gk  # noqa: E402

DATA = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")
# The values go through an eigendecomposition per level, truncated to the top P: rounding
# differences (GraKeL's numpy eig, torch's eigh here, both near 1e-14) grow by the inverse
# of the relative gap between the P-th and (P+1)-th eigenvalues. The settings below have
# gaps of a few percent of the spectrum or more (P = 5 on Cuneiform[:8] with seed 1 has a
# gap of 3e-3 at level 2, and agrees to 5e-10 only).
RTOL = 1e-10


@pytest.fixture(scope="module")
def mutag():
    return tk.datasets.read_tu(os.path.join(DATA, "MUTAG"))


@pytest.fixture(scope="module")
def cuneiform():
    return tk.datasets.read_tu(os.path.join(DATA, "Cuneiform"))


def attributed_graphs(n_graphs, n_min, n_max, p, d, seed):
    """Undirected Erdős–Rényi graphs (isolated nodes possible) with standard normal
    ``node_attributes`` of width d."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_graphs):
        n = int(rng.integers(n_min, n_max + 1))
        A = np.triu(rng.random((n, n)) < p, 1)
        s, t = np.nonzero(A | A.T)
        out.append(Data(edge_index=torch.as_tensor(np.stack([s, t])), num_nodes=n,
                        node_attributes=torch.as_tensor(rng.standard_normal((n, d)))))
    return out


def to_grakel(graphs, labels=False):
    """GraKeL graphs from adjacency matrices; node "labels" are the feature vectors GraKeL
    reads: the float64 attributes, or one-hot vectors of the label numbers."""
    G = GraphSet(graphs)
    if labels:
        ids, L = initial_labels(G)
        onehot = np.eye(L)[ids.numpy()]
    out = []
    for i, d in enumerate(graphs):
        n, s = d.num_nodes, int(G.ptr[i])
        A = np.zeros((n, n))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        f = onehot[s:s + n] if labels else d.node_attributes.double().numpy()
        out.append(grakel.Graph(A, node_labels={j: f[j] for j in range(n)}))
    return out


def dense(k, X, Y=None):
    return k(X, Y).to_dense().numpy()


def assert_rel(K, ref, rtol=RTOL):
    """|K − ref| ≤ rtol·|ref| entrywise (exact zeros, the cut-off, must match)."""
    assert K.shape == ref.shape
    np.testing.assert_array_equal(K == 0, ref == 0)
    np.testing.assert_allclose(K, ref, rtol=rtol, atol=0)


def normalized(K, dx, dy=None):
    dy = dx if dy is None else dy
    return K / np.sqrt(np.outer(dx, dy))


# -- GraKeL ---------------------------------------------------------------------------------

def test_equals_grakel_on_cuneiform_attributes(cuneiform):
    graphs = cuneiform[:8]
    kw = dict(L=2, n_samples=15, P=6, random_state=3)
    ref = gk.MultiscaleLaplacian(**kw).fit_transform(to_grakel(graphs))
    assert_rel(dense(MultiscaleLaplacian(**kw), graphs), ref)
    # normalize: GraKeL divides by the square roots of its diagonal
    assert_rel(dense(MultiscaleLaplacian(**kw, normalize=True), graphs),
               normalized(ref, np.diag(ref)))


def test_equals_grakel_on_mutag_labels_with_the_defaults(mutag):
    graphs = mutag[:4]  # 72 nodes: 50 landmarks, L = 3, P = 10
    ref = gk.MultiscaleLaplacian(random_state=0, normalize=True).fit_transform(
        to_grakel(graphs, labels=True))
    K = dense(MultiscaleLaplacian(random_state=0, features="labels", normalize=True), graphs)
    assert_rel(K, ref)


def test_equals_grakel_on_random_attributed_graphs():
    # isolated nodes, one-node graphs, neighbourhoods of radius 4 smaller than the graph
    graphs = attributed_graphs(10, 1, 14, 0.2, 4, seed=2)
    kw = dict(L=3, n_samples=20, P=8, gamma=0.1, heta=0.05, random_state=11)
    ref = gk.MultiscaleLaplacian(**kw).fit_transform(to_grakel(graphs))
    assert_rel(dense(MultiscaleLaplacian(**kw), graphs), ref)


def test_transform_equals_grakel_on_cuneiform(cuneiform):
    X, Y = cuneiform[:6], cuneiform[100:103]
    kw = dict(L=2, n_samples=12, P=3, random_state=1)
    g = gk.MultiscaleLaplacian(**kw).fit(to_grakel(X))
    ref = g.transform(to_grakel(Y)).T  # GraKeL: (Y, X)
    g.normalize = True
    ref_n = g.transform(to_grakel(Y)).T
    k = MultiscaleLaplacian(**kw)
    assert_rel(dense(k, X, Y), ref)  # fits on X
    assert_rel(dense(k, X[:3], Y), ref[:3])  # the kept basis maps X[:3] as it mapped X
    kn = MultiscaleLaplacian(**kw, normalize=True).fit(X)
    assert_rel(dense(kn, Y, X), ref_n.T)  # the fitted basis on either side


def _labels_of(graphs):
    G = GraphSet(graphs)
    return set(G.label_values[G.node_label].argmax(1).tolist())


def test_transform_equals_grakel_on_mutag_with_unseen_labels(mutag):
    X = mutag[:6]
    seen = _labels_of(X)
    Y = [d for d in mutag[6:] if _labels_of([d]) - seen][:2] + mutag[6:8]
    assert _labels_of(Y) - seen  # Y has labels X lacks: their features are 0
    kw = dict(L=2, n_samples=15, P=4, random_state=4)
    both = to_grakel(X + Y, labels=True)  # one-hot over the labels of both sets
    g = gk.MultiscaleLaplacian(**kw, normalize=True).fit(both[:6])
    ref = g.transform(both[6:]).T
    K = dense(MultiscaleLaplacian(**kw, features="labels", normalize=True), X, Y)
    assert_rel(K, ref)


# -- the definition ---------------------------------------------------------------------------

def _flg(S1, S2, half):
    """Kondor and Pan's FLG kernel |(½S1⁻¹ + ½S2⁻¹)⁻¹|^½ / (|S1|^¼ |S2|^¼) (``half``),
    or GraKeL's form without the halves."""
    c = 0.5 if half else 1.0
    M = c * (np.linalg.inv(S1) + np.linalg.inv(S2))
    return np.sqrt(1 / np.linalg.det(M)) / (np.linalg.det(S1) * np.linalg.det(S2)) ** 0.25


def _graph_S(d, U, gamma, heta, nodes=None):
    """Uᵀ(L + ηI)⁻¹U + γI for the subgraph of d's networkx graph on ``nodes``."""
    g = nx.Graph()
    g.add_nodes_from(range(d.num_nodes))
    g.add_edges_from(d.edge_index.t().tolist())
    if nodes is not None:
        g = g.subgraph(nodes)
    order = sorted(g.nodes)
    L = nx.laplacian_matrix(g, nodelist=order).toarray().astype(float) + heta * np.eye(len(order))
    return U.T @ np.linalg.solve(L, U) + gamma * np.eye(U.shape[1])


def test_level_zero_is_the_flg_kernel_of_the_attributes():
    """L = 0 with every node a landmark and P ≥ d: the level-0 map is a rotation of the
    attributes, so k(G, G') is the FLG kernel of S_G = Uᵀ(L + ηI)⁻¹U + γI with the raw
    attributes U — the paper's formula, times 2^(−d/2) (GraKeL's form drops the ½s)."""
    graphs = attributed_graphs(6, 3, 9, 0.4, 3, seed=5)
    gamma, heta = 0.05, 0.02
    S = [_graph_S(d, d.node_attributes.double().numpy(), gamma, heta) for d in graphs]
    paper = np.array([[_flg(a, b, half=True) for b in S] for a in S])
    K = dense(MultiscaleLaplacian(L=0, n_samples=1000, P=3, gamma=gamma, heta=heta), graphs)
    assert_rel(K, paper * 2.0 ** (-3 / 2))
    assert_rel(np.diag(K), np.full(6, 2.0 ** (-3 / 2)))  # k(G, G) = 2^(−p/2)


def test_one_level_equals_the_dense_definition():
    """L = 1, every node a landmark, P ≥ the number of nodes: the landmark features span
    the level-1 feature space exactly. Written out: S_v over the ball of radius 1 of v
    (networkx) with the attributes, the FLG Gram K₁ of all nodes, any factor F of K₁
    (F Fᵀ = K₁, here from its eigendecomposition) as level-1 features, and the graphs'
    FLG kernel (GraKeL's form, without the paper's ½s, at both levels)."""
    graphs = attributed_graphs(4, 2, 4, 0.6, 2, seed=7)
    gamma, heta = 0.1, 0.1
    nodes = []  # (graph, local node, S_v)
    for gi, d in enumerate(graphs):
        g = nx.Graph()
        g.add_nodes_from(range(d.num_nodes))
        g.add_edges_from(d.edge_index.t().tolist())
        U = d.node_attributes.double().numpy()
        for v in range(d.num_nodes):
            ball = sorted(nx.single_source_shortest_path_length(g, v, cutoff=1))
            nodes.append((gi, v, _graph_S(d, U[ball], gamma, heta, ball)))
    K1 = np.array([[_flg(a[2], b[2], half=False) for b in nodes] for a in nodes])
    lam, W = np.linalg.eigh(K1)
    keep = lam > 1e-6  # nodes with equal balls (a triangle's) have equal S_v: rank < N
    assert lam[keep].min() > 1e-3 and np.abs(lam[~keep]).max() < 1e-12  # a clear rank
    F = W[:, keep] * np.sqrt(lam[keep])  # F Fᵀ = K₁, any such factor gives the same k
    gid = np.array([a[0] for a in nodes])
    S = [_graph_S(d, F[gid == gi], gamma, heta) for gi, d in enumerate(graphs)]
    ref = np.array([[_flg(a, b, half=False) for b in S] for a in S])
    N = len(nodes)
    K = dense(MultiscaleLaplacian(L=1, n_samples=N, P=N, gamma=gamma, heta=heta,
                                  random_state=0), graphs)
    assert_rel(K, ref, rtol=1e-9)


def test_a_truncation_inside_a_repeated_eigenvalue_warns():
    # two labels, each once among the landmarks: level 0's Gram has eigenvalues 1, 1, and
    # P = 1 keeps one of them — which one is not defined
    g = Data(x=torch.tensor([[0], [1]]), edge_index=torch.tensor([[0, 1], [1, 0]]))
    with pytest.warns(UserWarning, match="splits a repeated eigenvalue"):
        MultiscaleLaplacian(L=0, P=1, features="labels", random_state=0)([g])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # P = 2 keeps the whole eigenspace: no warning
        MultiscaleLaplacian(L=0, P=2, features="labels", random_state=0)([g])


# -- inputs, estimators, arguments ------------------------------------------------------------

def test_inputs_and_kept_basis(cuneiform):
    graphs = cuneiform[:6]
    k = MultiscaleLaplacian(L=1, n_samples=10, P=4, random_state=0)
    K = dense(k, graphs)
    np.testing.assert_array_equal(dense(k, Batch.from_data_list(graphs)), K)
    np.testing.assert_array_equal(dense(k, GraphSet(graphs)), K)
    # k(X, X) maps X with the basis k(X) kept: GraKeL's transform of the fitted graphs
    np.testing.assert_allclose(dense(k, graphs, graphs), K, rtol=1e-13, atol=0)
    np.testing.assert_allclose(k.diag(graphs).numpy(), np.diag(K), rtol=1e-13)
    k.set_params(P=3)
    assert k.basis_ is None  # a changed argument drops the basis


def test_svc_predicts_with_the_training_basis(mutag):
    graphs = mutag[:40]
    y = np.array([int(d.y) for d in graphs])
    train, test = np.arange(0, 40, 2), np.arange(1, 40, 2)
    Xtr, Xte = [graphs[i] for i in train], [graphs[i] for i in test]
    kw = dict(L=1, n_samples=20, P=5, random_state=0, features="labels", normalize=True)
    svc = tk.SVC(kernel=MultiscaleLaplacian(**kw), C=10.0).fit(Xtr, y[train])
    k = MultiscaleLaplacian(**kw)
    Ktr = k(Xtr).to_dense()
    Kte = k(Xte, Xtr).to_dense()  # test graphs in the basis fitted on the training graphs
    ref = tk.SVC(kernel="precomputed", C=10.0).fit(Ktr, y[train])
    np.testing.assert_allclose(np.asarray(svc.decision_function(Xte)),
                               np.asarray(ref.decision_function(Kte)), rtol=1e-9, atol=1e-9)


def test_grid_search_over_its_arguments(mutag):
    graphs = mutag[:30]
    y = np.array([int(d.y) for d in graphs])
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"kernel__L": [0, 1], "kernel__gamma": [0.01, 0.1]}
    base = MultiscaleLaplacian(n_samples=15, P=4, random_state=0, features="labels",
                               normalize=True)
    gs = GridSearchCV(tk.SVC(kernel=base, C=1.0), grid, cv=cv).fit(graphs, y)
    assert set(gs.best_params_) == set(grid)
    assert gs.best_estimator_.kernel_.L == gs.best_params_["kernel__L"]


@pytest.mark.parametrize("kw, match", [
    (dict(L=-1), "L must be"), (dict(L=1.5), "L must be"), (dict(gamma=0), "gamma must be"),
    (dict(heta=-1.0), "heta must be"), (dict(heta=float("nan")), "heta must be"),
    (dict(n_samples=0), "n_samples must be"), (dict(P=0), "P must be"),
    (dict(random_state=-1), "random_state must be"), (dict(random_state=0.5), "random_state"),
    (dict(random_state=2 ** 32), "random_state must be"),  # numpy RandomState's range
    (dict(features="x"), "features must be")])
def test_bad_arguments_are_refused_by_name(kw, match):
    with pytest.raises(ValueError, match=match):
        MultiscaleLaplacian(**kw)
    with pytest.raises(TypeError, match="node_attr"):
        MultiscaleLaplacian(node_attr=3)


def test_one_way_edges_are_refused_and_self_loops_ignored():
    one_way = Data(edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=3,
                   node_attributes=torch.randn(3, 2))
    with pytest.raises(ValueError, match="to_undirected"):
        MultiscaleLaplacian()([one_way])
    graphs = attributed_graphs(4, 3, 6, 0.5, 2, seed=1)
    loops = [Data(edge_index=torch.cat([d.edge_index, torch.tensor([[0], [0]])], 1),
                  num_nodes=d.num_nodes, node_attributes=d.node_attributes) for d in graphs]
    k = MultiscaleLaplacian(L=2, n_samples=10, P=3, random_state=0)
    np.testing.assert_array_equal(dense(k, loops), dense(k, graphs))


def test_missing_attributes_and_empty_sets_are_refused(mutag):
    with pytest.raises(ValueError, match="node_attributes"):
        MultiscaleLaplacian()(mutag[:2])  # MUTAG has labels only
    empty = Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=0,
                 node_attributes=torch.zeros(0, 2))
    with pytest.raises(ValueError, match="no nodes"):
        MultiscaleLaplacian()([empty])


@requires_device
def test_device_equals_cpu(dev, cuneiform):
    graphs = cuneiform[:10]
    k = MultiscaleLaplacian(L=2, n_samples=20, P=6, random_state=0)
    ref = k(graphs).to_dense()
    out = k(GraphSet(graphs, device=dev)).to_dense()
    assert out.device.type == dev.type
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-10, atol=0)
