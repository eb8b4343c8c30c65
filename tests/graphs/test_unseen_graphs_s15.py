"""Graph kernels on unusual but valid inputs the other tests do not use — sets in which
every graph is empty, normalized Grams of edgeless sets, ... — against closed forms and
GraKeL 0.1.11; each test guards a fix found that way (it fails on the code before)."""
import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from tests.graphs.test_kernel_sweep import small_graphs
import torchkern.graphs as tg


def bare(labels, attributes=None):
    """A graph without edges: ``x`` the integer labels as one column, empty ``edge_attr``
    (one column), optional ``node_attributes``."""
    n = len(labels)
    d = Data(x=torch.tensor(labels, dtype=torch.long).reshape(n, 1), num_nodes=n,
             edge_index=torch.zeros(2, 0, dtype=torch.long),
             edge_attr=torch.zeros(0, 1, dtype=torch.long))
    if attributes is not None:
        d.node_attributes = torch.as_tensor(np.asarray(attributes, dtype=np.float64))
    return d


# -- sets without nodes or edges ----------------------------------------------------------------

@pytest.mark.parametrize("kernel_type", ["linear", "gaussian"])
@pytest.mark.parametrize("normalize", [False, True])
def test_graphhopper_on_one_node_and_empty_graphs(kernel_type, normalize):
    """One-node graphs: the one shortest path (length 0, through its node) gives
    k(G, G') = k_node(a, a') — ⟨a, a'⟩ or exp(−μ‖a − a'‖²) — and a graph with no node
    0. A set or a cross pair with no node at all used to fail in a reshape
    (RuntimeError) instead of giving zeros."""
    A = [[1.0, 2.0], [2.0, 4.0], [-1.0, 0.5]]
    ones = [bare([0], [a]) for a in A]
    empty = bare([], np.zeros((0, 2)))
    a = np.array(A)
    if kernel_type == "linear":
        ref = a @ a.T
    else:
        ref = np.exp(-((a[:, None] - a[None]) ** 2).sum(2))  # mu = 1
    if normalize:
        ref = ref / np.sqrt(np.outer(np.diag(ref), np.diag(ref)))
    k = tg.GraphHopper(kernel_type=kernel_type, normalize=normalize)
    want = np.zeros((4, 4))
    want[:3, :3] = ref
    np.testing.assert_allclose(k(ones + [empty]).to_dense().numpy(), want, rtol=1e-14,
                               atol=1e-15)
    np.testing.assert_array_equal(k([empty, empty]).to_dense().numpy(), np.zeros((2, 2)))
    np.testing.assert_array_equal(k([empty], ones).to_dense().numpy(), np.zeros((1, 3)))
    np.testing.assert_array_equal(k(ones, [empty]).to_dense().numpy(), np.zeros((3, 1)))


def test_random_walk_edge_labels_normalized_on_graphs_without_edges():
    """No graph has an edge (zero edge labels): only the length-0 walks count, k(G, G') =
    the number of equal-label node pairs, and normalized its cosine. The normalized Gram
    (whose diagonal is computed apart) used to fail with a ZeroDivisionError."""
    X = [bare([0, 0, 1]), bare([0]), bare([1, 1, 1])]
    Y = [bare([1, 0]), bare([2])]
    lab = [d.x[:, 0].numpy() for d in X + Y]
    M = np.array([[(a[:, None] == b[None, :]).sum() for b in lab] for a in lab], float)
    C = M / np.sqrt(np.outer(np.diag(M), np.diag(M)))
    k = tg.RandomWalk(lam=0.1, edge_labels=True, normalize=True)
    np.testing.assert_allclose(k(X).to_dense().numpy(), C[:3, :3], rtol=1e-14)
    np.testing.assert_allclose(k(X, Y).to_dense().numpy(), C[:3, 3:], rtol=1e-14)
    assert math.isclose(float(k([Y[1]]).to_dense()), 1.0, rel_tol=1e-14)


# -- continuous edge attributes: read by no kernel ----------------------------------------------

def attributed(m=6, seed=0):
    """``m`` small undirected graphs with one-hot node and bond labels and 2-dim node
    attributes (``test_kernel_sweep.small_graphs``)."""
    return small_graphs(m, seed)


EDGE_ATTRIBUTE_BLIND = [tg.WeisfeilerLehman(n_iter=2), tg.GraphHopper(),
                        tg.HadamardCode(n_iter=2), tg.EdgeHistogram()]


@pytest.mark.parametrize("kernel", EDGE_ATTRIBUTE_BLIND, ids=lambda k: type(k).__name__)
def test_edge_attributes_in_some_graphs_or_of_other_widths_are_ignored(kernel):
    """No graph kernel reads the continuous ``edge_attributes`` (nor does any of GraKeL
    0.1.11's: its graphs hold edge labels only), so a set in which some graphs have them
    and others not, or of different widths, is compared as the same graphs without
    them — from a list, a list of Batches, k(X, Y) either way. Such sets used to be
    refused when read (ValueError), while k(X, Y) of the two halves was not."""
    from torch_geometric.data import Batch
    plain = attributed()
    ref = kernel(plain).to_dense().numpy()
    mixed = [Data(**dict(g)) for g in plain]
    for g in mixed[:3]:
        g.edge_attributes = torch.ones(g.num_edges, 2)
    widths = [Data(**dict(g), edge_attributes=torch.ones(g.num_edges, 1 + i % 2))
              for i, g in enumerate(plain)]
    for graphs in (mixed, widths, [Batch.from_data_list(mixed[:3]), *mixed[3:]]):
        np.testing.assert_array_equal(kernel(graphs).to_dense().numpy(), ref)
    # the cross Grams: equal to the blocks of the Gram up to rounding (GraphHopper sums
    # its floating terms in another order)
    np.testing.assert_allclose(kernel(mixed[:3], mixed[3:]).to_dense().numpy(), ref[:3, 3:],
                               rtol=1e-13, atol=0)
    np.testing.assert_allclose(kernel(mixed[3:], mixed[:3]).to_dense().numpy(), ref[3:, :3],
                               rtol=1e-13, atol=0)
    G = tg.GraphSet(widths)
    with pytest.raises(ValueError, match=r"edge_attributes of different widths \[1, 2\]"):
        G.edge_attributes  # noqa: B018
    with pytest.raises(ValueError, match="edge_attributes: graph 3 has none"):
        tg.GraphSet(mixed).take(torch.tensor([0, 1])).edge_attributes  # noqa: B018


def test_duplicate_edges_with_different_edge_labels_are_refused_where_read():
    """An edge listed twice with different ``edge_attr`` rows has no one label (GraKeL's
    edge dictionaries hold one label per edge; merging kept the first row silently):
    the kernels that read edge labels refuse it naming ``edge_attr`` and the edge; the
    others compare the merged simple graph; duplicates with equal rows are merged. The
    edge-label histogram of the merged graph is counted here by hand."""
    ei = torch.tensor([[0, 1, 1, 2, 0, 1], [1, 0, 2, 1, 1, 0]])
    x = torch.eye(2)[[0, 1, 1]]
    simple = Data(x=x, edge_index=ei[:, :4], edge_attr=torch.tensor([[0], [0], [1], [1]]),
                  num_nodes=3)
    clash = Data(x=x, edge_index=ei, edge_attr=torch.tensor([[0], [0], [1], [1], [1], [1]]),
                 num_nodes=3)
    twice = Data(x=x, edge_index=ei, edge_attr=torch.tensor([[0], [0], [1], [1], [0], [0]]),
                 num_nodes=3)
    for k in (tg.EdgeHistogram(), tg.WeisfeilerLehman(n_iter=1, edge_labels=True),
              tg.RandomWalk(lam=0.1, edge_labels=True)):
        with pytest.raises(ValueError, match=r"edge_attr: graph 1 lists the edge \(0, 1\) "
                                             r"more than once with different edge_attr"):
            k([simple, clash]).to_dense()
    # equal duplicates: merged; per label (0: 2 directed edges, 1: 2) the histogram
    h = np.array([2.0, 2.0])
    np.testing.assert_array_equal(tg.EdgeHistogram()([simple, twice]).to_dense().numpy(),
                                  np.full((2, 2), h @ h))
    wl = tg.WeisfeilerLehman(n_iter=2)
    np.testing.assert_array_equal(wl([simple, clash]).to_dense().numpy(),
                                  wl([simple, simple]).to_dense().numpy())


# -- self-loops and one-way edges -----------------------------------------------------------------

def looped(m=8, seed=3):
    """Random graphs with both directions of every edge, one-hot labels from 3, bond
    labels, 2-dim attributes, and self-loops on one or two nodes of each graph."""
    from tests.graphs.test_grakel_part_a import random_graphs
    out = []
    for i, g in enumerate(random_graphs(m, seed=seed, connected=True)):
        n = g.num_nodes
        loops = torch.tensor([[0, n - 1], [0, n - 1]]) if i % 2 == 0 else torch.tensor([[1], [1]])
        g.edge_index = torch.cat([g.edge_index, loops], 1)
        g.edge_attr = torch.cat([g.edge_attr, torch.ones(loops.shape[1], 1)])
        out.append(g)
    return out


def test_self_loops_equal_grakel():
    """GraKeL 0.1.11 reads a self-loop from its adjacency matrix: WL (and WL over shortest
    paths), shortest path, the unlabelled random walk, the histograms, WL-OA, pyramid
    match, the core framework, neighborhood hash, propagation with labels and
    attributes, GraphHopper and SVM-θ equal it on graphs with loops, as docs/graphs.md
    says (exact integers, floats to 1e-12)."""
    import warnings

    import grakel

    from tests.graphs.test_grakel_part_a import ref
    from tests.graphs.test_grakel_part_b import to_grakel as nh_graphs
    from tests.graphs.test_propagation_labels import grakel_gram
    from tests.graphs.test_theta import adjacency
    graphs = looped()
    pairs = [
        (tg.WeisfeilerLehman(n_iter=2), grakel.WeisfeilerLehman(n_iter=2), "labels"),
        (tg.WeisfeilerLehman(n_iter=1, base="shortest_path"),
         grakel.WeisfeilerLehman(n_iter=1, base_graph_kernel=grakel.ShortestPath), "labels"),
        (tg.RandomWalk(lam=0.01, labeled=False),
         grakel.RandomWalk(lamda=0.01, method_type="baseline"), "labels"),
        (tg.ShortestPath(), grakel.ShortestPath(), "labels"),
        (tg.VertexHistogram(), grakel.VertexHistogram(), "labels"),
        (tg.EdgeHistogram(), grakel.EdgeHistogram(), "labels"),
        (tg.PyramidMatch(L=3, d=3), grakel.PyramidMatch(L=3, d=3), "labels"),
        (tg.WeisfeilerLehmanOptimalAssignment(n_iter=2),
         grakel.WeisfeilerLehmanOptimalAssignment(n_iter=2), "labels"),
        (tg.CoreFramework(tg.WeisfeilerLehman(n_iter=1)),
         grakel.CoreFramework(base_graph_kernel=(grakel.WeisfeilerLehman, dict(n_iter=1))),
         "labels"),
        (tg.PropagationAttr(t_max=2, random_state=0),
         grakel.PropagationAttr(t_max=2, random_state=0), "attributes"),
        (tg.GraphHopper(), grakel.GraphHopper(kernel_type="linear"), "attributes"),
    ]
    for ours, theirs, what in pairs:
        K = ours(graphs).to_dense().numpy()
        np.testing.assert_allclose(K, ref(theirs, graphs, what=what), rtol=1e-12, atol=0,
                                   err_msg=type(ours).__name__)
    K = tg.NeighborhoodHash(R=2, nh_type="count_sensitive", random_state=0)(graphs)
    np.testing.assert_array_equal(K.to_dense().numpy(), grakel.NeighborhoodHash(
        R=2, nh_type="count_sensitive", random_state=0).fit_transform(nh_graphs(graphs)))
    K = tg.Propagation(t_max=2, random_state=0, n_labels=3)(graphs).to_dense().numpy()
    np.testing.assert_array_equal(K, grakel_gram(grakel.Propagation(t_max=2, random_state=0),
                                                 graphs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        R = grakel.SvmTheta(n_samples=5, subsets_size_range=(2, 4), random_state=0,
                            metric=lambda x, y: (x.T @ y).item()).fit_transform(
            [[adjacency(d)] for d in graphs])
    K = tg.SVMTheta(n_samples=5, subsets_size_range=(2, 4), random_state=0,
                    draws="grakel")(graphs).to_dense().numpy()
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=0)


def test_nspdk_self_loops_and_one_way_edges_equal_its_definition():
    """NSPDK on graphs with self-loops (an edge of the neighbourhood subgraph) and with
    one-way edges (distances follow the directions) equals the brute-force evaluation of
    its definition in tests/graphs/test_grakel_part_b.py."""
    from tests.graphs.test_grakel_part_b import nspdk_brute_force
    graphs = looped(6, seed=5)
    oneway = [Data(x=g.x, edge_index=g.edge_index[:, g.edge_index[0] <= g.edge_index[1]],
                   num_nodes=g.num_nodes) for g in graphs]
    for gs in ([Data(x=g.x, edge_index=g.edge_index, num_nodes=g.num_nodes) for g in graphs],
               oneway):
        want, _ = nspdk_brute_force(gs, 2, 3)
        got = tg.NeighborhoodSubgraphPairwiseDistance(r=2, d=3)(gs).to_dense().numpy()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


# -- indexing a set ------------------------------------------------------------------------------

def test_a_graph_set_takes_every_slice_a_list_takes():
    """X[slice] of a GraphSet is the list's slice, negative steps and empty slices
    included (a negative step was a ValueError from torch's slicing): its Gram is the
    list slice's, whose Gram is WL's by GraKeL elsewhere."""
    graphs = attributed()
    G = tg.GraphSet(graphs)
    k = tg.WeisfeilerLehman(n_iter=2)
    for sl in (slice(None, None, -1), slice(None, None, -2), slice(4, 0, -3), slice(-2, None),
               slice(1, 5, 2)):
        np.testing.assert_array_equal(k(G[sl]).to_dense().numpy(),
                                      k(graphs[sl]).to_dense().numpy())
    assert len(G[3:1]) == 0 and len(G[::-1]) == len(graphs)


# -- the set's dtype -----------------------------------------------------------------------------

@pytest.mark.parametrize("cells", [None, 0], ids=["int8-patterns", "sparse"])
@pytest.mark.parametrize("normalize", [False, True])
def test_pyramid_match_gives_the_dtype_of_the_set(monkeypatch, cells, normalize):
    """A float32 GraphSet gets a float32 Gram, as from every other graph kernel (pyramid
    match gave float64 on both of its paths), equal to the float64 Gram rounded."""
    from torchkern.graphs import pyramid_match
    if cells is not None:
        monkeypatch.setattr(pyramid_match, "_PATTERN_CELLS", cells)
    graphs = attributed()
    k = tg.PyramidMatch(L=3, d=3, normalize=normalize)
    ref = k(graphs).to_dense()
    for K in (k(tg.GraphSet(graphs, dtype=torch.float32)),
              k(tg.GraphSet(graphs[:2], dtype=torch.float32),
                tg.GraphSet(graphs[2:], dtype=torch.float32))):
        assert K.dtype == torch.float32
        got = K.to_dense()
        assert got.dtype == torch.float32
        want = ref if got.shape == ref.shape else ref[:2, 2:]
        torch.testing.assert_close(got.double(), want, rtol=2e-7, atol=0)
        assert (K @ torch.ones(K.shape[1])).dtype == torch.float32


# -- PyG's sparse adjacency ------------------------------------------------------------------

def test_graphs_with_adj_t_instead_of_edge_index_are_refused():
    """``torch_geometric.transforms.ToSparseTensor`` replaces ``edge_index`` by a sparse
    ``adj_t``: such graphs were read as graphs without edges (WL gave 3 for a path
    against itself instead of 6), silently. They are refused by name, from a list and a
    Batch; with ``remove_edge_index=False`` (edge_index kept) the Gram is the original
    graphs'. A kernel that reads no edges (VertexHistogram) still takes them."""
    import warnings

    import torch_geometric.transforms as T
    from torch_geometric.data import Batch
    graphs = attributed(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's beta warning on sparse CSR tensors
        sparse = [T.ToSparseTensor(layout=torch.sparse_csr)(Data(**dict(g))) for g in graphs]
        kept = [T.ToSparseTensor(layout=torch.sparse_csr, remove_edge_index=False)(
            Data(**dict(g))) for g in graphs]
    k = tg.WeisfeilerLehman(n_iter=2)
    for X in (graphs[:2] + sparse[2:], Batch.from_data_list(sparse)):
        with pytest.raises(ValueError, match="no edge_index but a sparse adjacency matrix "
                                             "'adj_t'"):
            k(X)
    np.testing.assert_array_equal(k(kept).to_dense().numpy(), k(graphs).to_dense().numpy())
    np.testing.assert_array_equal(tg.VertexHistogram()(sparse).to_dense().numpy(),
                                  tg.VertexHistogram()(graphs).to_dense().numpy())


@pytest.mark.parametrize("field", ["node_attributes", "edge_attributes"])
def test_attributes_that_are_not_2d_tensors_are_refused_by_name(field):
    """A graph whose attributes are a NumPy array, a list or a 3-D tensor: a TypeError /
    ValueError naming the field and the graph (an AttributeError or a RuntimeError from
    torch.cat before)."""
    graphs = attributed(3)
    for g in graphs:
        g.edge_attributes = torch.ones(g.num_edges, 2)
    k = tg.GraphHopper()
    for bad, err in ((np.ones((graphs[1].num_nodes, 2)), TypeError), ([[1.0, 2.0]], TypeError),
                     (torch.ones(2, 2, 2), ValueError)):
        X = [Data(**dict(g)) for g in graphs]
        X[1][field] = bad
        with pytest.raises(err, match=f"{field} must .*graph 1 has"):
            k(X)


# -- label values beyond int64 -------------------------------------------------------------------

def test_label_values_beyond_int64_are_refused_where_labels_are_numbered():
    """Float labels hold integers, but 1e20 and 2e20 have no int64: neighborhood hash and
    propagation, which number labels by value, cast them all to one number, silently (NH
    gave 1 — identical graphs — for a path labelled 1e20, 2e20, 1e20 against one labelled
    1e20 three times; 0 with labels 1, 2, 1 against 1, 1, 1). Refused naming x; the
    kernels that compare label rows by value give the values of labels 1 and 2."""
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])

    def path(labels):
        return Data(x=torch.tensor(labels, dtype=torch.float64)[:, None], edge_index=ei,
                    num_nodes=3)
    big, small = [path([1e20, 2e20, 1e20]), path([1e20] * 3)], [path([1, 2, 1]), path([1] * 3)]
    for k in (tg.NeighborhoodHash(R=1, random_state=0), tg.Propagation(t_max=2, random_state=0)):
        with pytest.raises(ValueError, match="x: .* outside the int64 range"):
            k(big)
    np.testing.assert_array_equal(
        tg.NeighborhoodHash(R=1, random_state=0)(small).to_dense().numpy(), np.eye(2))
    for k in (tg.WeisfeilerLehman(n_iter=2), tg.ShortestPath(), tg.ODDSTh(h=2)):
        np.testing.assert_array_equal(k(big).to_dense().numpy(), k(small).to_dense().numpy())
