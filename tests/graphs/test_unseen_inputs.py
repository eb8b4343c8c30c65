"""Graph kernels on inputs the other tests do not use — graphs without edges, one-node and
regular graphs, negative and non-contiguous label ids, labels unseen in the fitted set —
against GraKeL 0.1.11 and against closed forms; each test guards a fix found that way."""
import warnings

import numpy as np
import torch
from torch_geometric.data import Data

import torchkern.graphs as tg

import grakel  # noqa: E402  (the test extra installs it: never skipped)


def und(pairs):
    """An undirected edge_index (both directions) from a list of pairs."""
    e = sorted({(a, b) for a, b in pairs} | {(b, a) for a, b in pairs})
    return torch.tensor(e, dtype=torch.long).t() if e else torch.zeros(2, 0, dtype=torch.long)


def graph(pairs, labels):
    """A graph with ``x`` the integer labels as one column (any ints: negative, large)."""
    return Data(x=torch.tensor(labels)[:, None], edge_index=und(pairs), num_nodes=len(labels))


def to_grakel(graphs):
    """GraKeL's input: the adjacency matrix (isolated nodes kept), the raw labels, one
    edge label (0) for every edge."""
    out = []
    for d in graphs:
        A = np.zeros((d.num_nodes, d.num_nodes))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        out.append([A, dict(enumerate(d.x[:, 0].tolist())),
                    {tuple(e): 0 for e in d.edge_index.t().tolist()}])
    return out


def unseen_graphs():
    """Regular graphs (Petersen, cube, K4, a 4-regular circulant), two triangles, a star,
    a path with isolated nodes; labels from {−7, 3, 42, 1000}, seeded; Y adds a label
    (99999) that X lacks."""
    rng = np.random.default_rng(0)
    pet = ([(i, (i + 1) % 5) for i in range(5)] + [(i, i + 5) for i in range(5)]
           + [(5 + i, 5 + (i + 2) % 5) for i in range(5)], 10)
    cube = ([(a, b) for a in range(8) for b in range(a + 1, 8) if bin(a ^ b).count("1") == 1], 8)
    k4 = ([(i, j) for i in range(4) for j in range(i + 1, 4)], 4)
    circ = ([(i, (i + d) % 8) for i in range(8) for d in (1, 2)], 8)
    tris = ([(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)], 6)
    star = ([(0, i) for i in range(1, 6)], 6)
    iso = ([(0, 1), (1, 2)], 5)
    pool = np.array([-7, 3, 42, 1000])
    X = [graph(e, rng.choice(pool, n).tolist()) for e, n in (pet, cube, k4, tris, star, iso)]
    Y = [graph(e, rng.choice(pool, n).tolist()) for e, n in (circ, pet)]
    Y.append(graph([(0, 1), (1, 2), (2, 3)], [3, 99999, 3, -7]))
    return X, Y


def grakel_ref(kernel, X, Y=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GraKeL's format-change warnings
        if Y is None:
            return kernel.fit_transform(to_grakel(X))
        return kernel.fit(to_grakel(X)).transform(to_grakel(Y))


# -- random walk with edge labels on graphs without edges ------------------------------------

def test_random_walk_edge_labels_on_graphs_without_edges():
    """No graph of the set has an edge (zero edge labels): only the length-0 walks count,
    k(G, G') = the number of node pairs with equal labels (all pairs when unlabeled) —
    the set used to fail with a ZeroDivisionError."""
    def bare(labels):
        n = len(labels)
        return Data(x=torch.tensor(labels)[:, None], num_nodes=n,
                    edge_index=torch.zeros(2, 0, dtype=torch.long),
                    edge_attr=torch.zeros(0, 1, dtype=torch.long))
    X = [bare([0, 0, 1]), bare([0]), bare([1, 1])]
    lab = [d.x[:, 0] for d in X]
    matched = np.array([[(a[:, None] == b[None, :]).sum().item() for b in lab] for a in lab])
    sizes = np.array([len(a) for a in lab])
    for kind in ("geometric", "exponential"):
        for labeled, want in ((True, matched), (False, np.outer(sizes, sizes))):
            k = tg.RandomWalk(0.1, kind=kind, labeled=labeled, edge_labels=True)
            np.testing.assert_array_equal(k(X).to_dense().numpy(), want)
            np.testing.assert_array_equal(k(X[:1], X[1:]).to_dense().numpy(), want[:1, 1:])
    k = tg.RandomWalk(0.1, p=2, edge_labels=True)
    np.testing.assert_array_equal(k([X[0]]).to_dense().numpy(), matched[:1, :1])


# -- core framework: min_core ----------------------------------------------------------------

def test_core_framework_min_core_equals_grakel_with_min_core_set():
    """GraKeL 0.1.11's constructor discards ``min_core`` (its values are always those of
    min_core = −1, the default, which the other tests compare); set as an attribute it
    is used, and its values are torchkern's for every min_core, k(X) and k(Y, X)."""
    X, Y = unseen_graphs()
    for mc in (0, 1, 2):
        def theirs():
            k = grakel.CoreFramework(base_graph_kernel=(grakel.WeisfeilerLehman,
                                                        dict(n_iter=2)))
            k.min_core = mc
            return k
        ours = tg.CoreFramework(tg.WeisfeilerLehman(n_iter=2), min_core=mc)
        np.testing.assert_array_equal(ours(X).to_dense().numpy(), grakel_ref(theirs(), X))
        np.testing.assert_array_equal(ours(Y, X).to_dense().numpy(),
                                      grakel_ref(theirs(), X, Y))
    assert grakel.CoreFramework(min_core=2).min_core == -1  # what the docstring says


# -- subgraph matching: weights given as numbers ----------------------------------------------

def test_subgraph_matching_weight_sequence_equals_grakel_callable():
    """``lw`` as k numbers λ_1..λ_k: GraKeL 0.1.11 fails on a sequence, and its callable
    lw(i), i = 0..k, weighs size i + 1 (the value at i = k is unused: 0 and 7 give the
    same Gram)."""
    X, Y = unseen_graphs()
    X = X[:5]  # GraKeL's SubgraphMatching needs edges on every graph: no isolated node
    for w in ([0.5, 0.0, 2.0], [1.0, 3.0, 0.25]):
        ours = tg.SubgraphMatching(k=3, lw=w)
        for last in (0.0, 7.0):
            theirs = grakel.SubgraphMatching(k=3, ke=None,
                                             lw=lambda i, w=w, last=last: (w + [last])[i])
            np.testing.assert_allclose(ours(X).to_dense().numpy(), grakel_ref(theirs, X),
                                       rtol=1e-12)
            theirs = grakel.SubgraphMatching(k=3, ke=None,
                                             lw=lambda i, w=w, last=last: (w + [last])[i])
            np.testing.assert_allclose(ours(Y, X).to_dense().numpy(),
                                       grakel_ref(theirs, X, Y), rtol=1e-12)


# -- neighborhood hash: labels that are not 0 .. L-1 ------------------------------------------

def test_neighborhood_hash_codes_for_labels_not_numbered_from_zero():
    """Labels 1, 2, 5: GraKeL 0.1.11 gives them the codes torchkern gives to 0, 1, 2 (the
    first entries of its draw, in set order); torchkern's codes follow the label values,
    so k(X) and k(Y, X) are blocks of k(X ∪ Y)."""
    X, Y = unseen_graphs()
    remap = {-7: 1, 3: 2, 42: 5, 1000: 2, 99999: 5}
    for d in X + Y:
        d.x = torch.tensor([[remap[v]] for v in d.x[:, 0].tolist()])
    packed = [Data(x=torch.tensor([[{1: 0, 2: 1, 5: 2}[v]] for v in d.x[:, 0].tolist()]),
                   edge_index=d.edge_index, num_nodes=d.num_nodes) for d in X]
    for nh_type in ("simple", "count_sensitive"):
        k = tg.NeighborhoodHash(R=3, nh_type=nh_type, random_state=4)
        want = grakel_ref(grakel.NeighborhoodHash(R=3, nh_type=nh_type, random_state=4), X)
        np.testing.assert_allclose(k(packed).to_dense().numpy(), want, rtol=1e-14)
        full = k(X + Y).to_dense().numpy()
        np.testing.assert_allclose(k(X).to_dense().numpy(), full[:6, :6], rtol=1e-14)
        np.testing.assert_allclose(k(Y, X).to_dense().numpy(), full[6:, :6], rtol=1e-14)


# -- normalization of graphs whose self-similarity is 0 ---------------------------------------

def test_normalized_zero_rows_where_grakel_divides_zero_by_zero():
    """One-node and edgeless graphs have k(G, G) = 0 under ShortestPath and EdgeHistogram:
    normalized, their rows are 0 here and NaN in GraKeL 0.1.11; elsewhere the two agree."""
    X, Y = unseen_graphs()
    X = X + [graph([], [3]), graph([], [3, 42, 3])]
    for d in X:  # one edge label, 0 (as to_grakel gives GraKeL)
        d.edge_attr = torch.zeros(d.edge_index.shape[1], 1, dtype=torch.long)
    for ours, theirs in ((tg.ShortestPath(normalize=True), grakel.ShortestPath(normalize=True)),
                         (tg.EdgeHistogram(normalize=True),
                          grakel.EdgeHistogram(normalize=True))):
        K, R = ours(X).to_dense().numpy(), grakel_ref(theirs, X)
        bad = np.isnan(R)
        assert bad[-2:].all() and bad[:, -2:].all() and not bad[:-2, :-2].any()
        np.testing.assert_array_equal(K[bad], 0.0)
        np.testing.assert_allclose(K[~bad], R[~bad], rtol=1e-14)
