"""Kernels between graphs against independent references: GraKeL 0.1.11 on MUTAG, brute
force (Kronecker products, scipy expm, csgraph shortest paths, a dict-based WL, subset
enumeration with isomorphism by permutations) on small random graphs."""
import itertools
import math
import os
import re
from collections import Counter

import numpy as np
import pytest
import scipy.linalg as sl
import torch
from scipy.sparse.csgraph import shortest_path as csgraph_shortest_path
from threadpoolctl import threadpool_limits
from torch_geometric.data import Batch, Data

from torchkern.graphs import (GraphletSampling, GraphSet, RandomWalk, ShortestPath,
                              WeisfeilerLehman)
from torchkern.graphs.graphlet import graphlet_classes

import grakel  # noqa: E402  (the test extra installs it: never skipped)


# -- data ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mutag():
    from torchkern.datasets import read_tu
    return read_tu(os.path.join(os.path.dirname(grakel.__file__), "tests", "data", "MUTAG"))


def to_grakel(graphs):
    """GraKeL graphs: the edge list as given (both directions) and integer node labels."""
    out = []
    for d in graphs:
        labels = d.x.argmax(1).tolist() if d.x is not None else [0] * d.num_nodes
        out.append(grakel.Graph([tuple(e) for e in d.edge_index.t().tolist()],
                                node_labels=dict(enumerate(labels))))
    return out


def random_graphs(n_graphs, n_min, n_max, p, n_labels, seed, directed=False, isolated=0):
    """Erdős–Rényi graphs as PyG Data (both directions unless ``directed``), integer
    labels as one-hot x; the last ``isolated`` nodes of each graph have no edge."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_graphs):
        n = int(rng.integers(n_min, n_max + 1))
        m = n - isolated
        A = rng.random((n, n)) < p
        np.fill_diagonal(A, False)
        A = A if directed else np.triu(A, 1) | np.triu(A, 1).T
        A[m:, :] = A[:, m:] = False
        s, t = np.nonzero(A)
        labels = rng.integers(0, n_labels, n)
        x = torch.nn.functional.one_hot(torch.as_tensor(labels), n_labels).float()
        out.append(Data(x=x, edge_index=torch.as_tensor(np.stack([s, t])), num_nodes=n))
    return out


def adjacency(d):
    A = np.zeros((d.num_nodes, d.num_nodes))
    A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
    return A


def labels_of(d):
    return d.x.argmax(1).numpy() if d.x is not None else np.zeros(d.num_nodes, int)


def dense(K):
    return K.to_dense().numpy()


# -- references ---------------------------------------------------------------------------

def wl_reference(graphs, h):
    """WL subtree Gram by dictionaries: labels (own, sorted out-neighbour labels)."""
    lab = [[("init", int(v)) for v in labels_of(d)] for d in graphs]
    nbrs = []
    for d in graphs:
        nb = [[] for _ in range(d.num_nodes)]
        for s, t in d.edge_index.t().tolist():
            nb[s].append(t)
        nbrs.append(nb)
    feats = [Counter((0, l) for l in L) for L in lab]
    for it in range(1, h + 1):
        lab = [[(L[v], tuple(sorted(L[u] for u in nb[v]))) for v in range(len(L))]
               for L, nb in zip(lab, nbrs)]
        for f, L in zip(feats, lab):
            f.update((it, l) for l in L)
    return np.array([[sum(c * g[k] for k, c in f.items()) for g in feats] for f in feats], float)


def sp_reference(graphs, with_labels=True, directed=True):
    feats = []
    for d in graphs:
        D = csgraph_shortest_path(adjacency(d), directed=directed, unweighted=True) \
            if d.num_nodes else np.zeros((0, 0))
        lab = labels_of(d)
        c = Counter()
        for u, v in itertools.product(range(d.num_nodes), repeat=2):
            if u != v and np.isfinite(D[u, v]):
                c[(lab[u], lab[v], D[u, v]) if with_labels else D[u, v]] += 1
        feats.append(c)
    return np.array([[sum(n * g[k] for k, n in f.items()) for g in feats] for f in feats], float)


def rw_reference(d1, d2, lam, labeled, kind="geometric", p=None):
    """1ᵀ f(λ A×) 1 on the explicit product graph diag(m)(A₁ ⊗ A₂)diag(m)."""
    m = (labels_of(d1)[:, None] == labels_of(d2)[None, :]).reshape(-1) if labeled \
        else np.ones(d1.num_nodes * d2.num_nodes, bool)
    m = m.astype(float)
    Ax = m[:, None] * np.kron(adjacency(d1), adjacency(d2)) * m[None, :]
    return walk_sum(Ax, m, lam, kind, p)


def walk_sum(Ax, m, lam, kind="geometric", p=None):
    """mᵀ f(λ A×) m for the product-graph adjacency A×: (I − λA×)⁻¹ (geometric),
    exp(λA×) (exponential), or their first p + 1 terms (p-step)."""
    if p is not None:
        c = [lam ** k / (math.factorial(k) if kind == "exponential" else 1) for k in range(p + 1)]
        return sum(ck * m @ np.linalg.matrix_power(Ax, k) @ m for k, ck in enumerate(c))
    if kind == "geometric":
        return m @ np.linalg.solve(np.eye(len(m)) - lam * Ax, m)
    return m @ sl.expm(lam * Ax) @ m


# -- GraKeL on all of MUTAG -------------------------------------------------------------

def test_mutag_read(mutag):
    assert len(mutag) == 188
    assert sum(d.num_nodes for d in mutag) == 3371


@pytest.mark.parametrize("h", [1, 3, 5])
def test_wl_equals_grakel_on_mutag(mutag, h):
    ref = grakel.WeisfeilerLehman(n_iter=h, base_graph_kernel=grakel.VertexHistogram) \
        .fit_transform(to_grakel(mutag))
    K = dense(WeisfeilerLehman(n_iter=h)(mutag))
    np.testing.assert_array_equal(K, ref)


@pytest.mark.parametrize("with_labels", [True, False])
def test_shortest_path_equals_grakel_on_mutag(mutag, with_labels):
    ref = grakel.ShortestPath(with_labels=with_labels).fit_transform(to_grakel(mutag))
    np.testing.assert_array_equal(dense(ShortestPath(with_labels=with_labels)(mutag)), ref)


def test_wl_shortest_path_equals_grakel_on_mutag(mutag):
    ref = grakel.WeisfeilerLehman(n_iter=2, base_graph_kernel=grakel.ShortestPath) \
        .fit_transform(to_grakel(mutag))
    K = dense(WeisfeilerLehman(n_iter=2, base="shortest_path")(mutag))
    np.testing.assert_array_equal(K, ref)


def test_random_walk_equals_grakel_baseline(mutag):
    # GraKeL's baseline inverts an (n₁n₂)² matrix per pair (~10 min for all of MUTAG):
    # here on every 8th MUTAG graph (24 graphs of 10 to 28 nodes); all 188 below.
    sub = mutag[::8]
    with threadpool_limits(1):
        ref = grakel.RandomWalk(lamda=0.01, method_type="baseline").fit_transform(to_grakel(sub))
    K = dense(RandomWalk(0.01, labeled=False)(sub))
    np.testing.assert_allclose(K, ref, rtol=1e-10, atol=0)


def test_labeled_random_walk_equals_grakel_up_to_unmatched_pairs(mutag):
    # GraKeL's RandomWalkLabeled sums (I − λA×)⁻¹ over all n₁n₂ node pairs, so each pair
    # of differently labelled nodes adds a walk of length 0; the product graph here has
    # matched pairs only (Gärtner et al., 2003). On every 16th MUTAG graph (12 graphs).
    sub = mutag[::16]
    with threadpool_limits(1):
        ref = grakel.RandomWalkLabeled(lamda=0.01, method_type="baseline") \
            .fit_transform(to_grakel(sub))
    matched = np.array([[(labels_of(a)[:, None] == labels_of(b)[None, :]).sum() for b in sub]
                        for a in sub])
    sizes = np.array([d.num_nodes for d in sub])
    K = dense(RandomWalk(0.01)(sub))
    np.testing.assert_allclose(K + np.outer(sizes, sizes) - matched, ref, rtol=1e-10, atol=0)


def test_random_walk_all_of_mutag_against_eigendecompositions(mutag):
    # 1ᵀ(I − λA₁⊗A₂)⁻¹1 = Σ_ab (u_aᵀ1)²(v_bᵀ1)² / (1 − λ α_a β_b) from numpy eigh.
    eig = [np.linalg.eigh(adjacency(d)) for d in mutag]
    n = max(d.num_nodes for d in mutag)
    vals = np.zeros((len(mutag), n))
    w = np.zeros((len(mutag), n))
    for i, (a, U) in enumerate(eig):
        vals[i, :len(a)], w[i, :len(a)] = a, (U.sum(0)) ** 2
    lam = 0.01
    ref = np.einsum("ia,jb,ijab->ij", w, w,
                    1 / (1 - lam * vals[:, None, :, None] * vals[None, :, None, :]))
    np.testing.assert_allclose(dense(RandomWalk(lam, labeled=False)(mutag)), ref,
                               rtol=1e-10, atol=0)


# -- predict time: labels only in Y ---------------------------------------------------------

def test_wl_unseen_labels_equal_grakel_transform(mutag):
    train, test = mutag[:150], [d.clone() for d in mutag[150:]]
    test[0].x[0] = 0  # an all-zero row: a label no training graph has
    gk = grakel.WeisfeilerLehman(n_iter=3, base_graph_kernel=grakel.VertexHistogram)
    gk.fit(to_grakel(train))
    g_test = to_grakel(test)
    g_test[0] = grakel.Graph([tuple(e) for e in test[0].edge_index.t().tolist()],
                             node_labels={**dict(enumerate(test[0].x.argmax(1).tolist())), 0: 99})
    ref = gk.transform(g_test)
    np.testing.assert_array_equal(dense(WeisfeilerLehman(3)(test, train)), ref)


# -- random walk against the explicit product graph ----------------------------------------

RW_CASES = [dict(kind="geometric"), dict(kind="exponential"), dict(kind="geometric", p=3),
            dict(kind="exponential", p=4)]


@pytest.mark.parametrize("labeled", [True, False])
@pytest.mark.parametrize("case", RW_CASES, ids=lambda c: "-".join(map(str, c.values())))
def test_random_walk_equals_brute_force(case, labeled):
    X = random_graphs(7, 3, 9, 0.4, 2, seed=1)
    Y = random_graphs(4, 2, 8, 0.5, 2, seed=2)
    lam = 0.05
    k = RandomWalk(lam, labeled=labeled, **case)
    ref = np.array([[rw_reference(a, b, lam, labeled, case["kind"], case.get("p"))
                     for b in Y] for a in X])
    np.testing.assert_allclose(dense(k(X, Y)), ref, rtol=1e-10, atol=1e-12)
    refxx = np.array([[rw_reference(a, b, lam, labeled, case["kind"], case.get("p"))
                       for b in X] for a in X])
    np.testing.assert_allclose(dense(k(X)), refxx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(k.diag(X).numpy(), np.diag(refxx), rtol=1e-10)


@pytest.mark.parametrize("labeled", [True, False])
def test_random_walk_directed_graphs(labeled):
    X = random_graphs(5, 3, 7, 0.5, 2, seed=3, directed=True)
    assert any(not np.array_equal(adjacency(d), adjacency(d).T) for d in X)
    lam = 0.5 / max(np.abs(np.linalg.eigvals(adjacency(d))).max() for d in X) ** 2
    ref = np.array([[rw_reference(a, b, lam, labeled) for b in X] for a in X])
    np.testing.assert_allclose(dense(RandomWalk(lam, labeled=labeled)(X)), ref, rtol=1e-10)


def test_random_walk_lambda_too_large_names_the_limit():
    X = random_graphs(6, 4, 9, 0.6, 2, seed=4)
    rho = max(np.abs(np.linalg.eigvalsh(adjacency(d))).max() for d in X)
    limit = 1 / rho ** 2
    with pytest.raises(ValueError, match="lam must be < ") as e:
        RandomWalk(1.01 * limit)(X)
    assert float(re.search(r"lam must be < ([0-9.e+-]+)\.", str(e.value)).group(1)) == \
        pytest.approx(limit, rel=1e-5)
    lam = 0.9 * limit  # admissible, and accurate close to the limit on both paths
    for labeled in (True, False):
        ref = np.array([[rw_reference(a, b, lam, labeled) for b in X[:3]] for a in X[:3]])
        np.testing.assert_allclose(dense(RandomWalk(lam, labeled=labeled)(X[:3])), ref,
                                   rtol=1e-10)
    RandomWalk(2 * limit, p=3)(X)  # truncated walks take any λ
    with pytest.raises(ValueError, match="lam"):
        RandomWalk(0.0)


# -- shortest path and WL on random, directed and degenerate graphs -------------------------

def test_shortest_path_and_wl_on_random_graphs_with_isolated_nodes():
    X = random_graphs(8, 4, 10, 0.35, 3, seed=5, isolated=2)
    np.testing.assert_array_equal(dense(ShortestPath()(X)), sp_reference(X))
    np.testing.assert_array_equal(dense(ShortestPath(with_labels=False)(X)),
                                  sp_reference(X, with_labels=False))
    np.testing.assert_array_equal(dense(WeisfeilerLehman(3)(X)), wl_reference(X, 3))


def test_directed_graphs_follow_edge_directions():
    X = random_graphs(6, 4, 9, 0.4, 2, seed=6, directed=True)
    np.testing.assert_array_equal(dense(ShortestPath()(X)), sp_reference(X, directed=True))
    np.testing.assert_array_equal(dense(WeisfeilerLehman(2)(X)), wl_reference(X, 2))


def test_empty_graphs_and_graphs_without_x():
    X = random_graphs(4, 3, 6, 0.5, 1, seed=7)
    bare = [Data(edge_index=d.edge_index, num_nodes=d.num_nodes) for d in X]
    empty = Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=0)
    for k in (WeisfeilerLehman(2), ShortestPath(), RandomWalk(0.05), GraphletSampling(3, None)):
        # without x all nodes are alike: the same as one label everywhere
        np.testing.assert_array_equal(dense(k(bare)), dense(k(X)))
        K = dense(k(bare + [empty]))
        np.testing.assert_array_equal(K[-1], 0)
        np.testing.assert_array_equal(K[:-1, :-1], dense(k(bare)))
    np.testing.assert_array_equal(dense(WeisfeilerLehman(2)(bare)), wl_reference(bare, 2))
    one = Data(edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=1)  # no node pair
    for k in (WeisfeilerLehman(2, normalize=True), ShortestPath(normalize=True),
              RandomWalk(0.05, normalize=True)):
        K = dense(k(bare + [empty, one]))
        assert np.isfinite(K).all() and (K[-2] == 0).all()
        np.testing.assert_allclose(np.diag(K)[:-2], 1.0)


# -- input handling -------------------------------------------------------------------------

def test_list_batch_graphset_and_take_agree(mutag):
    sub = mutag[:30]
    k = WeisfeilerLehman(2)
    K = dense(k(sub))
    np.testing.assert_array_equal(dense(k(Batch.from_data_list(sub))), K)
    G = GraphSet(sub)
    np.testing.assert_array_equal(dense(k(G)), K)
    idx = torch.tensor([5, 2, 17, 2])
    np.testing.assert_array_equal(dense(k(G[idx])), K[np.ix_(idx, idx)])
    both = GraphSet.concat([G[torch.arange(10)], GraphSet(sub[10:])])
    np.testing.assert_array_equal(dense(ShortestPath()(both)), dense(ShortestPath()(sub)))
    K32 = k(G.to(dtype=torch.float32))
    assert K32.dtype == torch.float32
    np.testing.assert_array_equal(K32.to_dense().double().numpy(), K)
    small = G[torch.arange(10)]
    for rw in (RandomWalk(0.01), RandomWalk(0.01, labeled=False)):  # solved in float64
        K32 = rw(small.to(dtype=torch.float32))
        assert K32.dtype == torch.float32
        np.testing.assert_allclose(K32.to_dense().double().numpy(), dense(rw(small)), rtol=1e-6)


def test_bad_inputs_have_clear_errors(mutag):
    k = WeisfeilerLehman(2)
    with pytest.raises(TypeError, match=r"X must be a list of torch_geometric Data \(or of "
                                        r"Batch objects\), a Batch, .* got ndarray"):
        k(np.zeros((3, 3)))
    with pytest.raises(TypeError, match="not one Data"):
        k(mutag[0])
    with pytest.raises(TypeError, match="item 1 is a int"):
        k([mutag[0], 3])
    narrow = [Data(x=d.x[:, :3], edge_index=d.edge_index) for d in mutag[:3]]
    with pytest.raises(ValueError, match="same number of columns"):
        k(mutag[:3], narrow)
    bare = Data(edge_index=mutag[1].edge_index, num_nodes=mutag[1].num_nodes)
    with pytest.raises(ValueError, match="graph 1 has no x while others do"):
        k([mutag[0], bare])
    with pytest.raises(ValueError, match=r"X: graph 0: edge_index must be an integer tensor "
                                         r"of shape \(2, E\) with entries in \[0, num_nodes\); "
                                         r"got node id 5 in a graph with num_nodes=3"):
        k([Data(edge_index=torch.tensor([[0], [5]]), num_nodes=3)])
    with pytest.raises(ValueError, match="n_iter"):
        WeisfeilerLehman(-1)
    with pytest.raises(ValueError, match="base"):
        WeisfeilerLehman(2, base="edge")


# -- normalization and positive semi-definiteness -----------------------------------------

KERNELS = [WeisfeilerLehman(3), WeisfeilerLehman(1, base="shortest_path"), ShortestPath(),
           RandomWalk(0.01), RandomWalk(0.01, labeled=False), GraphletSampling(4, 200, 0)]


@pytest.mark.parametrize("k", KERNELS, ids=lambda k: type(k).__name__)
def test_normalize_and_psd(k, mutag):
    X, Y = mutag[:24], mutag[24:36]
    K = dense(k(X))
    assert np.linalg.eigvalsh(K).min() >= -1e-9 * np.abs(K).max()
    d = np.diag(K)
    np.testing.assert_allclose(k.diag(X).numpy(), d, rtol=1e-12)
    Kxy, dy = dense(k(X, Y)), np.diag(dense(k(Y)))
    k.normalize = True
    try:
        np.testing.assert_allclose(dense(k(X)), K / np.sqrt(np.outer(d, d)), rtol=1e-12)
        np.testing.assert_allclose(dense(k(X, Y)), Kxy / np.sqrt(np.outer(d, dy)), rtol=1e-12)
        np.testing.assert_allclose(k.diag(X).numpy(), 1.0)
    finally:
        k.normalize = False


# -- graphlets ----------------------------------------------------------------------------

def _canonical(A):
    """The lexicographically smallest adjacency bit string over node permutations."""
    k = len(A)
    return min(tuple(A[np.ix_(p, p)][np.triu_indices(k, 1)])
               for p in itertools.permutations(range(k)))


@pytest.mark.parametrize("k, n_classes", [(3, 4), (4, 11), (5, 34)])
def test_graphlet_classes_are_the_isomorphism_classes(k, n_classes):
    pairs = list(itertools.combinations(range(k), 2))
    table, n = graphlet_classes(k)
    assert n == n_classes
    cls_of = {}
    for mask in range(2 ** len(pairs)):
        A = np.zeros((k, k), int)
        for bit, (i, j) in enumerate(pairs):
            A[i, j] = A[j, i] = mask >> bit & 1
        ours = int(table[mask])
        cls_of.setdefault(_canonical(A), set()).add(ours)
    assert len(cls_of) == n_classes  # isomorphism classes by brute force
    assert all(len(v) == 1 for v in cls_of.values())  # each class gets one id...
    assert len({next(iter(v)) for v in cls_of.values()}) == n_classes  # ...distinct ids


def graphlet_reference(d, k):
    """Exact class frequencies by enumeration, classes ordered as graphlet_classes: by the
    base-k code of the sorted degree sequence."""
    A = adjacency(d)
    A = ((A + A.T) > 0).astype(int)
    np.fill_diagonal(A, 0)
    codes = Counter()
    for S in itertools.combinations(range(d.num_nodes), k):
        sub = A[np.ix_(S, S)]
        codes[_canonical(sub)] += 1
    # order the classes by degree code, the code computed from a representative
    all_codes = sorted({int((np.sort(_graph_from_bits(c, k).sum(1)) * k ** np.arange(k)).sum())
                        for c in _all_canonical(k)})
    f = np.zeros(len(all_codes))
    for c, cnt in codes.items():
        code = int((np.sort(_graph_from_bits(c, k).sum(1)) * k ** np.arange(k)).sum())
        f[all_codes.index(code)] += cnt
    return f / max(f.sum(), 1)


def _graph_from_bits(bits, k):
    A = np.zeros((k, k), int)
    A[np.triu_indices(k, 1)] = bits
    return A + A.T


def _all_canonical(k):
    m = k * (k - 1) // 2
    return {_canonical(_graph_from_bits(np.array([b >> i & 1 for i in range(m)]), k))
            for b in range(2 ** m)}


@pytest.mark.parametrize("k", [3, 4])
def test_graphlets_exact_and_sampled(k):
    X = random_graphs(5, 5, 9, 0.45, 1, seed=8, isolated=1)
    ref = np.array([graphlet_reference(d, k) for d in X])
    exact = GraphletSampling(k, n_samples=None).features(X).numpy()
    np.testing.assert_allclose(exact, ref, rtol=1e-12, atol=1e-15)
    # Hoeffding: with s = 20000 samples each frequency is within 0.02 of the truth with
    # probability 1 − 2e^{−2·s·0.02²} > 1 − 2e-6 (and the seed is fixed).
    sampled = GraphletSampling(k, n_samples=20000, random_state=0).features(X).numpy()
    np.testing.assert_allclose(sampled, ref, atol=0.02)
    np.testing.assert_allclose(sampled.sum(1), 1.0)


def test_graphlet_features_do_not_depend_on_the_other_graphs():
    X = random_graphs(6, 5, 12, 0.4, 1, seed=9)
    k = GraphletSampling(4, n_samples=300, random_state=3)
    phi = k.features(X).numpy()
    np.testing.assert_array_equal(k.features(X[3:] + X[:3]).numpy(), np.roll(phi, -3, 0))
    np.testing.assert_allclose(dense(k(X[:2], X[2:])), phi[:2] @ phi[2:].T, rtol=1e-12)
    tiny = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    np.testing.assert_array_equal(k.features([tiny]).numpy(), 0)  # fewer than k nodes
