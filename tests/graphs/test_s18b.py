"""CoreFramework over Gram-only base kernels (RandomWalk, GraphHopper, MultiscaleLaplacian,
...) against GraKeL 0.1.11's CoreFramework, through estimators; paired values of the graph
kernels (``pairs``) against the diagonal of the dense Gram, without an n × n matrix."""
import os
import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, StratifiedKFold

import torchkern as tk
from torchkern.graphs import (CoreFramework, GraphHopper, MultiscaleLaplacian,
                              NeighborhoodHash, RandomWalk, ShortestPath)
from tests.graphs import test_grakel_part_a as part_a
from tests.graphs import test_multiscale_laplacian as msl
from tests.graphs.test_grakel_part_b import to_grakel

import grakel  # noqa: E402  (the test extra installs it: never skipped)
from grakel import kernels as gk  # noqa: E402

DATA = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")


@pytest.fixture(scope="module")
def mutag():
    return tk.datasets.read_tu(os.path.join(DATA, "MUTAG"))


def dense(k, X, Y=None):
    return k(X, Y).to_dense().numpy()


def grakel_core(base, params, graphs, Y=None, normalize=False):
    ref = gk.CoreFramework(base_graph_kernel=(base, dict(params)), normalize=normalize)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GraKeL's format-change warnings
        if Y is None:
            return ref.fit_transform(graphs)
        return ref.fit(graphs).transform(Y)


# -- CoreFramework over Gram-only bases ---------------------------------------------------

@pytest.mark.parametrize("normalize", [False, True])
def test_core_random_walk_equals_grakel_on_mutag(mutag, normalize):
    sub = mutag[::6]  # 32 graphs, cores of levels 0, 1, 2
    K = dense(CoreFramework(RandomWalk(0.01, labeled=False), normalize=normalize), sub)
    R = grakel_core(gk.RandomWalk, dict(lamda=0.01), to_grakel(sub), normalize=normalize)
    np.testing.assert_allclose(K, R, rtol=1e-10, atol=0)


@pytest.mark.parametrize("normalize", [False, True])
def test_core_graphhopper_equals_grakel_fit_and_transform(normalize):
    # connected: GraKeL 0.1.11's GraphHopper fails on a graph with an isolated node
    graphs = part_a.random_graphs(12, seed=2, dim=3, connected=True)
    base = GraphHopper(kernel_type="gaussian", mu=0.25)
    theirs = dict(kernel_type=("gaussian", 0.25))
    G = part_a.gk(graphs, "attributes")
    K = dense(CoreFramework(base, normalize=normalize), graphs)
    R = grakel_core(gk.GraphHopper, theirs, G, normalize=normalize)
    np.testing.assert_allclose(K, R, rtol=1e-10, atol=1e-13)
    X, Y = graphs[:8], graphs[8:]
    K = dense(CoreFramework(base, normalize=normalize), Y, X)
    R = grakel_core(gk.GraphHopper, theirs, part_a.gk(X, "attributes"),
                    part_a.gk(Y, "attributes"), normalize=normalize)
    np.testing.assert_allclose(K, R, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("normalize", [False, True])
def test_core_multiscale_laplacian_equals_grakel(normalize):
    # a seeded base with a fitted basis: each level's base is fitted on that level's cores
    # with the same random_state, as GraKeL's fresh base per level
    graphs = msl.attributed_graphs(8, 3, 12, 0.3, 3, seed=2)
    kw = dict(L=2, n_samples=10, P=4, random_state=3)
    K = dense(CoreFramework(MultiscaleLaplacian(**kw), normalize=normalize), graphs)
    R = grakel_core(gk.MultiscaleLaplacian, kw, msl.to_grakel(graphs), normalize=normalize)
    np.testing.assert_allclose(K, R, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("normalize", [False, True])
def test_core_multiscale_laplacian_keeps_the_bases_fitted_by_k_of_x(normalize):
    # k(X) fits every level's basis on X's cores and keeps them: k(Y, X) maps Y's cores
    # with them (GraKeL's fit(X).transform(Y)), whatever the batch of Y
    graphs = msl.attributed_graphs(16, 3, 12, 0.3, 3, seed=2)
    X, Y = graphs[:10], graphs[10:]
    kw = dict(L=2, n_samples=10, P=4, random_state=3)
    k = CoreFramework(MultiscaleLaplacian(**kw), normalize=normalize)
    k(X)
    K = dense(k, Y, X)
    R = grakel_core(gk.MultiscaleLaplacian, kw, msl.to_grakel(X), msl.to_grakel(Y),
                    normalize=normalize)
    np.testing.assert_allclose(K, R, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dense(k, Y[:3], X), K[:3], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(k.pairs(Y, X[:6]).numpy(), np.diag(K[:, :6]), rtol=1e-12,
                               atol=1e-14)


def test_core_multiscale_laplacian_svc_predictions_do_not_depend_on_the_batch():
    graphs = msl.attributed_graphs(16, 3, 12, 0.3, 3, seed=2)
    X, Y = graphs[:10], graphs[10:]
    k = CoreFramework(MultiscaleLaplacian(L=2, n_samples=10, P=4, random_state=3))
    svc = tk.SVC(kernel=k, C=10.0).fit(X, np.array([0, 1] * 5))
    np.testing.assert_allclose(np.asarray(svc.decision_function(Y[:3])),
                               np.asarray(svc.decision_function(Y))[:3], rtol=1e-10,
                               atol=1e-12)
    # a new parameter drops the kept bases: k(X, X) is again k(X)
    k.set_params(base_kernel__L=1)
    np.testing.assert_allclose(dense(k, X, X), dense(CoreFramework(MultiscaleLaplacian(
        L=1, n_samples=10, P=4, random_state=3)), X), rtol=1e-12, atol=1e-14)


def level_sum(base, X, Y):
    """Σ_i base(C_i(x), C_i(y)), pair by pair, the cores from networkx."""
    import networkx as nx
    import torch

    def core(d, i):
        g = nx.Graph(d.edge_index.t().tolist())
        g.add_nodes_from(range(d.num_nodes))
        c = nx.core_number(g)
        keep = [v for v in range(d.num_nodes) if c[v] >= i]
        return d.subgraph(torch.tensor(keep)) if keep else None
    K = np.zeros((len(X), len(Y)))
    for i in range(max(d.num_nodes for d in X + Y)):
        for a, x in enumerate(X):
            for b, y in enumerate(Y):
                cx, cy = core(x, i), core(y, i)
                if cx is not None and cy is not None:
                    K[a, b] += float(base([cx], [cy]).to_dense())
    return K


@pytest.mark.parametrize("base", [
    tk.graphs.PropagationAttr(random_state=0),  # the cores carry the node attributes
    tk.graphs.SubgraphMatching(k=2, node_kernel="gaussian"),  # no finite feature map
], ids=["PropagationAttr", "SubgraphMatching"])
def test_core_over_attributed_bases_equals_the_level_sum(base):
    G = part_a.random_graphs(10, seed=1, dim=3, connected=True)
    np.testing.assert_allclose(dense(CoreFramework(base), G[:6], G[6:]),
                               level_sum(base, G[:6], G[6:]), rtol=1e-12, atol=1e-13)


def test_core_gram_only_k_xy_blocks_equal_k_of_the_union(mutag):
    # a graph without an i-core adds 0 at level i; k(X, Y) is the block of k(X ∪ Y)
    sub = mutag[:30]
    k = CoreFramework(NeighborhoodHash(R=2, random_state=1), normalize=True)
    full = dense(k, sub)
    np.testing.assert_allclose(dense(k, sub[:20], sub[20:]), full[:20, 20:], rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(np.diag(full), 1.0, rtol=1e-12)


def test_core_gram_only_through_svc_and_grid_search(mutag):
    graphs = mutag[::4]
    y = np.array([int(d.y) for d in graphs])
    k = CoreFramework(RandomWalk(0.01, labeled=False), normalize=True)
    train, test = graphs[:35], graphs[35:]
    m = tk.SVC(kernel=k, C=10.0).fit(train, y[:35])
    ref = tk.SVC(kernel="precomputed", C=10.0).fit(dense(k, train), y[:35])
    np.testing.assert_array_equal(np.asarray(m.predict(test)),
                                  np.asarray(ref.predict(dense(k, test, train))))
    np.testing.assert_allclose(np.asarray(m.decision_function(test)),
                               np.asarray(ref.decision_function(dense(k, test, train))),
                               rtol=1e-8, atol=1e-10)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    gs = GridSearchCV(tk.SVC(kernel=k, C=10.0), {"kernel__base_kernel__lam": [0.005, 0.02]},
                      cv=cv).fit(graphs, y)
    for i, lam in enumerate([0.005, 0.02]):
        kl = CoreFramework(RandomWalk(lam, labeled=False), normalize=True)
        ref = GridSearchCV(tk.SVC(kernel="precomputed", C=10.0), {"C": [10.0]}, cv=cv) \
            .fit(dense(kl, graphs), y)
        assert gs.cv_results_["mean_test_score"][i] == ref.cv_results_["mean_test_score"][0]


def test_core_base_kernel_must_be_a_graph_kernel():
    with pytest.raises(TypeError, match="base_kernel must be a graph kernel"):
        CoreFramework(tk.RBF())
    with pytest.raises(TypeError, match="base_kernel must be a graph kernel"):
        CoreFramework(tk.graphs.DiffusionKernel())
    # the feature-map fast path is kept: features() still works for ShortestPath
    assert CoreFramework(ShortestPath()).features(
        [part_a.random_graphs(1, seed=0)[0]]).shape[0] == 1


# -- pairs: k(x_i, y_i) without the n × n Gram ---------------------------------------------

def pair_sets(mutag, kind):
    if kind == "attributes":
        return (part_a.random_graphs(20, seed=1, dim=3, connected=True),
                part_a.random_graphs(20, seed=2, dim=3, connected=True))
    return mutag[:20], mutag[100:120]


PAIR_KERNELS = [  # (kernel, inputs): kernels whose Gram is a dense (n, m) matrix
    (lambda: RandomWalk(0.01), "labels"),
    (lambda: RandomWalk(0.01, kind="exponential", edge_labels=True, normalize=True), "labels"),
    (lambda: GraphHopper(kernel_type="gaussian", mu=0.3, normalize=True), "attributes"),
    (lambda: MultiscaleLaplacian(features="labels", random_state=0, n_samples=10, L=1,
                                 normalize=True), "labels"),
    (lambda: CoreFramework(RandomWalk(0.01, labeled=False), normalize=True), "labels"),
    (lambda: tk.graphs.SubgraphMatching(k=2, node_kernel="gaussian"), "attributes"),
    # other Gram-only bases: each level's entries read by row blocks of its lazy Gram
    (lambda: CoreFramework(MultiscaleLaplacian(features="labels", random_state=0,
                                               n_samples=10, L=1), normalize=True), "labels"),
    (lambda: CoreFramework(tk.graphs.SVMTheta(random_state=0, n_samples=5)), "labels"),
]


@pytest.mark.parametrize("make, kind", PAIR_KERNELS, ids=lambda v: getattr(v, "__name__", v))
def test_pairs_equal_the_gram_diagonal_without_an_n_by_n_matrix(mutag, monkeypatch, make, kind):
    X, Y = pair_sets(mutag, kind)
    k = make()
    ref = k(X, Y).to_dense().diagonal()  # the dense reference, before the spy
    shapes = []
    init = tk.gram.DenseKernelMatrix.__init__

    def spy(self, tensor, *a, **kw):
        shapes.append(tuple(tensor.shape))
        init(self, tensor, *a, **kw)

    monkeypatch.setattr(tk.gram.DenseKernelMatrix, "__init__", spy)
    got = k.pairs(X, Y)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12, atol=1e-14)
    # no (20, 20) Gram: batches of 16 pairs at most (or none)
    assert all(s[0] <= 16 for s in shapes), shapes


@pytest.mark.parametrize("normalize", [False, True])
def test_neighborhood_hash_pairs_of_different_graphs(mutag, normalize):
    # the lazy Jaccard matrix's diagonal was all ones, right for k(X, X) only
    X, Y = mutag[:20], mutag[100:120]
    for k in (NeighborhoodHash(R=2, random_state=0, normalize=normalize),
              CoreFramework(NeighborhoodHash(R=2, random_state=0), normalize=normalize)):
        ref = k(X, Y).to_dense().diagonal()
        assert float(ref.min()) < 0.9  # not all ones
        np.testing.assert_allclose(k.pairs(X, Y).numpy(), ref.numpy(), rtol=1e-12)
        np.testing.assert_allclose(k(X, Y).diag().numpy(), ref.numpy(), rtol=1e-12)


def test_random_walk_pairs_batches_stay_within_the_budget_of_their_padding(monkeypatch):
    # pairs (400, 2) and (2, 400) have one product size, so they were batched together and
    # each padded to 400 × 400: 1.1 GB for 100 pairs against a budget of 16 MB
    import torch
    from torch_geometric.data import Data
    from torchkern.graphs import RandomWalk
    from torchkern.graphs import random_walk as rw

    def path(n):
        i = torch.arange(n - 1)
        return Data(edge_index=torch.stack([torch.cat([i, i + 1]), torch.cat([i + 1, i])]),
                    x=(torch.arange(n) % 2).reshape(-1, 1), num_nodes=n)  # two labels

    big, small = path(400), path(2)
    k = RandomWalk(0.01, labeled=True)
    padded, walk_sums = [], rw.RandomWalk._walk_sums

    def spy(self, Ax, Ay, Lx, Ly):
        padded.append(Ax.shape[0] * Ax.shape[-1] * Ay.shape[-1])
        return walk_sums(self, Ax, Ay, Lx, Ly)

    monkeypatch.setattr(rw.RandomWalk, "_walk_sums", spy)
    X, Y = [big, small] * 8, [small, big] * 8
    got = k.pairs(X, Y)
    assert max(padded) <= rw._PRODUCT_BUDGET
    monkeypatch.undo()
    np.testing.assert_allclose(got.numpy(), k(X, Y).to_dense().diagonal().numpy(), rtol=1e-12)


def test_neighborhood_hash_seed_outside_numpy_range_is_refused_at_construction():
    # -1 was taken, then the first call failed inside NumPy ("Seed must be between 0 and
    # 2**32 - 1"), naming no argument
    for bad in (-1, 2 ** 32, 1.5):
        with pytest.raises(ValueError, match="random_state must be None, a numpy RandomState"):
            NeighborhoodHash(random_state=bad)
