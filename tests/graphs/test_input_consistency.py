"""Graph inputs that differ in a field a kernel does not read.

1. Predict-time graphs are checked against the fitted ones on the fields the kernel reads
   only: a model with a WL / shortest-path / vertex-histogram kernel predicts graphs without
   (or with other) node attributes exactly as it predicts the same graphs with them; an
   edge-histogram model ignores the node labels' width; GraphHopper and PropagationAttr,
   which read attributes, still refuse attributes of another width or none.
2. A set in which some graphs have ``edge_attr`` and others not is compared, by the kernels
   that read no edge labels, exactly as the same set with ``edge_attr`` removed from every
   graph (as a list, a GraphSet, a list of Batches, across two sets, and against GraKeL's
   WL); the kernels that read edge labels refuse it with an error naming ``edge_attr``.
3. EdgeHistogram's kept labelled edges follow in-place writes to the set's edge tensors:
   after an edit of an edge label, its Gram equals label counts of the edited graphs made
   in Python.
"""
import numpy as np
import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.utils import coalesce

import torchkern as tk
from tests.graphs.test_fast_inputs import edge_labels, gram_from_counts
from torchkern.graphs import (CoreFramework, EdgeHistogram, GraphHopper, GraphletSampling,
                              GraphSet, HadamardCode, LovaszTheta, NeighborhoodHash, ODDSTh,
                              Propagation, PropagationAttr,
                              PyramidMatch, RandomWalk, ShortestPath,
                              SubgraphMatching, SVMTheta, VertexHistogram, WeisfeilerLehman,
                              WeisfeilerLehmanOptimalAssignment)
from torchkern.graphs.multiscale_laplacian import MultiscaleLaplacian
from torchkern.graphs.nspdk import NeighborhoodSubgraphPairwiseDistance


def graphs(m, seed=0, edge_attr=True):
    """Undirected coalesced graphs of 3 to 7 nodes with integer labels ``x`` (one column),
    node attributes (two columns) and integer edge labels in both directions
    (``edge_attr``: True, False, or a predicate of the graph's index)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(m):
        n = 3 + i % 5
        e = torch.randint(0, n, (2, 2 * n), generator=g)
        e = e[:, e[0] != e[1]]
        lab = torch.randint(0, 3, (e.shape[1],), generator=g)
        ei, ea = coalesce(torch.cat([e, e.flip(0)], 1), torch.cat([lab, lab]), n, reduce="min")
        d = dict(edge_index=ei, num_nodes=n, x=torch.randint(0, 3, (n, 1), generator=g),
                 node_attributes=torch.rand(n, 2, generator=g, dtype=torch.float64))
        if edge_attr(i) if callable(edge_attr) else edge_attr:
            d["edge_attr"] = ea[:, None]
        out.append(Data(**d))
    return out


def strip(gs, *fields):
    """Copies of the graphs without ``fields``."""
    return [Data(**{k: v for k, v in g.to_dict().items() if k not in fields}) for g in gs]


def replace(gs, **fields):
    """Copies of the graphs with ``fields`` (functions of the graph) set anew."""
    out = []
    for g in gs:
        d = g.to_dict()
        d.update({k: f(g) for k, f in fields.items()})
        out.append(Data(**d))
    return out


def dense(k, X, Y=None):
    return k(X, Y).to_dense()


# -- 1. predict-time checks on the fields the kernel reads ------------------------------------
@pytest.mark.parametrize("kernel", [WeisfeilerLehman(n_iter=2), ShortestPath(),
                                    WeisfeilerLehmanOptimalAssignment(n_iter=2),
                                    VertexHistogram(), RandomWalk(lam=0.01),
                                    Propagation(t_max=2), GraphletSampling(k=3, n_samples=None),
                                    NeighborhoodHash(R=2, random_state=0), PyramidMatch(L=2, d=4),
                                    ODDSTh(h=2),
                                    NeighborhoodSubgraphPairwiseDistance(r=1, d=1),
                                    SubgraphMatching(k=3),
                                    MultiscaleLaplacian(features="labels", L=1, random_state=0),
                                    LovaszTheta(n_samples=4, subsets_size_range=(2, 3)),
                                    CoreFramework(WeisfeilerLehman(n_iter=1)),
                                    CoreFramework(ShortestPath()),
                                    HadamardCode(VertexHistogram(), n_iter=2),
                                    SVMTheta(n_samples=4, subsets_size_range=(2, 3))],
                         ids=lambda k: type(k).__name__)
def test_predict_ignores_attributes_the_kernel_does_not_read(kernel):
    train, test = graphs(16, seed=1), graphs(6, seed=2)
    y = torch.arange(16) % 2
    model = tk.SVC(kernel=kernel, C=1.0).fit(train, y)
    want = model.decision_function(test)  # the test graphs as they are, attributes on
    wide = replace(test, node_attributes=lambda g: torch.rand(g.num_nodes, 5))
    nan = replace(test, node_attributes=lambda g: torch.full((g.num_nodes, 2), float("nan")))
    for other in (strip(test, "node_attributes"), wide, nan):  # nor read: NaN passes
        torch.testing.assert_close(model.decision_function(other), want, rtol=0, atol=0)
        assert torch.equal(model.predict(other), model.predict(test))
    # and against the precomputed Gram of the graphs with no attributes at all
    ref = tk.SVC(kernel="precomputed", C=1.0).fit(dense(kernel, strip(train, "node_attributes")), y)
    K = dense(kernel, strip(test, "node_attributes"), strip(train, "node_attributes"))
    torch.testing.assert_close(ref.decision_function(K), want, rtol=1e-12, atol=1e-12)


def test_unread_attributes_stay_unread_through_fit_take_and_pickle():
    """A WL model fitted on graphs whose node attributes hold NaN (never read) equals the
    model fitted on clean attributes, saved and loaded too; its support vectors, pickled,
    hold their own fields (not the training set), the error of reading the attributes
    kept for their first read."""
    import pickle
    train, test = graphs(20, seed=21), graphs(5, seed=22)
    y = torch.arange(20) % 2
    nan = replace(train, node_attributes=lambda g: torch.full((g.num_nodes, 2), float("nan")))
    want = tk.SVC(kernel=WeisfeilerLehman(n_iter=1)).fit(train, y).decision_function(test)
    model = tk.SVC(kernel=WeisfeilerLehman(n_iter=1)).fit(nan, y)
    assert torch.equal(model.decision_function(test), want)
    loaded = pickle.loads(pickle.dumps(model))
    assert torch.equal(loaded.decision_function(test), want)
    assert loaded.support_vectors_.__dict__["_reader"].parent is None
    with pytest.raises(ValueError, match="node_attributes contains NaN"):
        loaded.support_vectors_.node_attributes  # noqa: B018


def test_sums_and_scalings_check_what_their_terms_read():
    train, test = graphs(12, seed=17), graphs(4, seed=18)
    y = torch.arange(12) % 2
    bare = strip(test, "node_attributes")
    for kernel in (2.0 * WeisfeilerLehman(n_iter=1), WeisfeilerLehman(n_iter=1) + ShortestPath()):
        model = tk.SVC(kernel=kernel).fit(train, y)
        assert torch.equal(model.decision_function(bare), model.decision_function(test))
    model = tk.SVC(kernel=WeisfeilerLehman(n_iter=1) + GraphHopper()).fit(train, y)
    with pytest.raises(ValueError, match="X has node attributes of width None"):
        model.predict(bare)


def test_predict_without_edge_attr_for_a_kernel_that_reads_no_edge_labels():
    train, test = graphs(12, seed=3), graphs(5, seed=4)
    y = torch.linspace(0, 1, 12, dtype=torch.float64)
    model = tk.KernelRidge(kernel=WeisfeilerLehman(n_iter=2), alpha=0.1).fit(train, y)
    want = model.predict(test)
    torch.testing.assert_close(model.predict(strip(test, "edge_attr")), want, rtol=0, atol=0)


def test_edge_histogram_ignores_node_label_widths():
    """EdgeHistogram reads no node labels: a model fitted on one-column x predicts graphs
    with two-column x, or none, as it predicts the same graphs with one column."""
    train, test = graphs(12, seed=5), graphs(5, seed=6)
    y = torch.linspace(0, 1, 12, dtype=torch.float64)
    model = tk.KernelRidge(kernel=EdgeHistogram(), alpha=0.1).fit(train, y)
    want = model.predict(test)
    two = replace(test, x=lambda g: torch.cat([g.x, 1 - g.x], 1))
    for other in (two, strip(test, "x")):
        torch.testing.assert_close(model.predict(other), want, rtol=0, atol=0)
    # the reference: ridge on Python label counts (np.linalg.solve)
    K = gram_from_counts(train, train, edge_labels)
    alpha = np.linalg.solve(K + 0.1 * np.eye(12), y.numpy())
    np.testing.assert_allclose(want.numpy(), gram_from_counts(test, train, edge_labels) @ alpha,
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kernel", [GraphHopper(), PropagationAttr(t_max=2)],
                         ids=lambda k: type(k).__name__)
def test_kernels_reading_attributes_refuse_other_widths_at_predict(kernel):
    train = graphs(8, seed=7)
    model = tk.KernelRidge(kernel=kernel, alpha=1.0).fit(train, torch.ones(8, dtype=torch.float64))
    with pytest.raises(ValueError, match="X has node attributes of width 3 but the model was "
                                         "fitted on graphs whose node attributes have width 2"):
        model.predict(replace(graphs(3, seed=8),
                              node_attributes=lambda g: torch.rand(g.num_nodes, 3)))
    with pytest.raises(ValueError, match="reads continuous node attributes, and the graphs "
                                         "have no field 'node_attributes'"):
        model.predict(strip(graphs(3, seed=8), "node_attributes"))


@pytest.mark.parametrize("kernel", [GraphHopper(), PropagationAttr(t_max=2),
                                    MultiscaleLaplacian(L=1, random_state=0)],
                         ids=lambda k: type(k).__name__)
def test_kernels_reading_attributes_only_ignore_node_labels_at_predict(kernel):
    train, test = graphs(10, seed=19), graphs(4, seed=20)
    y = torch.linspace(0, 1, 10, dtype=torch.float64)
    model = tk.KernelRidge(kernel=kernel, alpha=0.1).fit(train, y)
    want = model.predict(test)
    for other in (replace(test, x=lambda g: torch.cat([g.x, g.x], 1)), strip(test, "x"),
                  replace(test, x=lambda g: torch.rand(g.num_nodes, 1))):  # not labels, unread
        torch.testing.assert_close(model.predict(other), want, rtol=0, atol=0)
    # the reference: ridge on the Gram of the graphs without x (np.linalg.solve)
    bare = strip(train, "x")
    K = dense(kernel, bare).numpy()
    alpha = np.linalg.solve(K + 0.1 * np.eye(10), y.numpy())
    np.testing.assert_allclose(want.numpy(), dense(kernel, strip(test, "x"), bare).numpy() @ alpha,
                               rtol=1e-10, atol=1e-10)


def test_wl_still_refuses_another_node_label_width_at_predict():
    model = tk.SVC(kernel=WeisfeilerLehman(n_iter=1)).fit(graphs(8, seed=9), torch.arange(8) % 2)
    with pytest.raises(ValueError, match="X has node labels of width 2 but the model was "
                                         "fitted on graphs whose node labels have width 1"):
        model.predict(replace(graphs(3, seed=10), x=lambda g: torch.cat([g.x, g.x], 1)))


# -- 2. edge_attr in some graphs only ---------------------------------------------------------
def half(i):
    return i % 2 == 1  # graph 0 has no edge_attr, graph 1 has


NO_EDGE_LABELS = [WeisfeilerLehman(n_iter=2), ShortestPath(),
                  WeisfeilerLehmanOptimalAssignment(n_iter=2)]


@pytest.mark.parametrize("kernel", NO_EDGE_LABELS, ids=lambda k: type(k).__name__)
def test_edge_attr_in_some_graphs_is_ignored_by_kernels_that_read_no_edge_labels(kernel):
    mixed = graphs(10, seed=11, edge_attr=half)
    want = dense(kernel, strip(mixed, "edge_attr"))
    for first in (half, lambda i: not half(i)):  # graph 0 without, then with edge_attr
        mixed = graphs(10, seed=11, edge_attr=first)
        assert torch.equal(dense(kernel, mixed), want)
        assert torch.equal(dense(kernel, GraphSet(mixed)), want)
        assert torch.equal(dense(kernel, GraphSet(mixed)[[7, 2, 5]]), want[[7, 2, 5]][:, [7, 2, 5]])
    # a list of Batches, one with edge_attr and one without
    with_ea, without = graphs(10, seed=11)[:4], strip(graphs(10, seed=11)[4:], "edge_attr")
    batches = [Batch.from_data_list(with_ea), Batch.from_data_list(without)]
    assert torch.equal(dense(kernel, batches), dense(kernel, strip(with_ea + without, "edge_attr")))
    # two sets, one with edge_attr, one without (the union is made for the cross Gram)
    torch.testing.assert_close(dense(kernel, with_ea, without),
                               dense(kernel, strip(with_ea + without, "edge_attr"))[:4, 4:],
                               rtol=1e-15, atol=0)


def test_mixed_edge_attr_wl_equals_grakel():
    from grakel import kernels as gk

    from tests.graphs.test_grakel_part_b import to_grakel
    mixed = graphs(10, seed=12, edge_attr=half)
    ref = gk.WeisfeilerLehman(n_iter=2).fit_transform(to_grakel(strip(mixed, "edge_attr")))
    np.testing.assert_array_equal(dense(WeisfeilerLehman(n_iter=2), mixed).numpy(), ref)


@pytest.mark.parametrize("kernel", [WeisfeilerLehman(n_iter=1, edge_labels=True), EdgeHistogram(),
                                    NeighborhoodSubgraphPairwiseDistance(r=1, d=1)],
                         ids=lambda k: type(k).__name__)
def test_kernels_reading_edge_labels_refuse_edge_attr_in_some_graphs(kernel):
    for first in (half, lambda i: not half(i)):
        mixed = graphs(6, seed=13, edge_attr=first)
        for X in (mixed, GraphSet(mixed)):
            with pytest.raises(ValueError, match=r"edge_attr: graph [01] has none while "
                                                 r"graph [01] has one"):
                dense(kernel, X)
    with_ea, without = graphs(6, seed=13)[:3], strip(graphs(6, seed=13)[3:], "edge_attr")
    with pytest.raises(ValueError, match="edge_attr: the set of graphs 1 has none"):
        dense(kernel, [Batch.from_data_list(with_ea), Batch.from_data_list(without)])


# -- 3. the labelled edges follow in-place writes ----------------------------------------------
@pytest.mark.parametrize("source", ["list", "graphset"])
def test_edge_histogram_after_an_in_place_edit_of_an_edge_label(source):
    gs = graphs(6, seed=14)
    k = EdgeHistogram()
    G = k.check_input(gs) if source == "list" else GraphSet(gs)
    before = dense(k, G)
    np.testing.assert_array_equal(before.numpy(), gram_from_counts(gs, gs, edge_labels))
    kept = G.labelled_edges()
    assert G.labelled_edges() is kept  # kept while nothing changes
    G.edge_index  # noqa: B018 (merging the edges changes no edge: still kept)
    assert G.labelled_edges() is kept
    # edit: every edge of graph 2 gets the label of value 0
    e = slice(int(G.eptr[2]), int(G.eptr[3]))
    G.edge_label[e] = int((G.edge_label_values[:, 0] == 0).nonzero()[0, 0])  # label value 0
    edited = [Data(**g.to_dict()) for g in gs]
    edited[2].edge_attr = torch.zeros_like(edited[2].edge_attr)
    want = gram_from_counts(edited, edited, edge_labels)
    assert not np.array_equal(want, before.numpy())  # the edit changes the Gram
    np.testing.assert_array_equal(dense(k, G).numpy(), want)
    np.testing.assert_array_equal(dense(k, GraphSet(edited)).numpy(), want)



def test_edge_histogram_cross_gram_ignores_node_labels_on_the_sparse_path(monkeypatch):
    """Many edge labels (one per edge): the sparse path, which unites X and Y
    (``GraphSet.concat(labels=False)``), with X's x of one column and Y without x."""
    from torchkern.graphs._labels import CountFeatureKernel
    g = torch.Generator().manual_seed(16)
    X = []
    for _ in range(40):
        e = coalesce(torch.randint(0, 30, (2, 80), generator=g), num_nodes=30)
        X.append(Data(x=torch.randint(0, 3, (30, 1), generator=g), edge_index=e, num_nodes=30,
                      edge_attr=torch.randint(0, 10 ** 6, (e.shape[1], 1), generator=g)))
    calls = []
    sparse = CountFeatureKernel._gram
    monkeypatch.setattr(CountFeatureKernel, "_gram",
                        lambda self, *a, **kw: calls.append(1) or sparse(self, *a, **kw))
    Y = strip(X[30:], "x")
    K = dense(EdgeHistogram(), X[:30], Y)
    assert calls  # the sparse path
    np.testing.assert_array_equal(K.numpy(), gram_from_counts(X[:30], Y, edge_labels))
