"""Neighborhood hash, pyramid match and the core framework against GraKeL 0.1.11 (MUTAG,
Cuneiform, random graphs) and against definitions computed independently (networkx core
numbers, GraKeL's base kernels on networkx k-cores); NSPDK against a brute-force
implementation of its definition (GraKeL's NSPDK hashes a numbering-dependent string)."""
import os

import networkx as nx
import numpy as np
import pytest
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.linalg import eigs
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from torch_geometric.data import Batch, Data

import torchkern as tk
from tests._devices import dev, requires_device  # noqa: F401 (fixture)
from torchkern.graphs import GraphSet, ShortestPath, WeisfeilerLehman
from torchkern.graphs._labels import initial_labels
from torchkern.graphs.core import CoreFramework, core_numbers
from torchkern.graphs.neighborhood_hash import NeighborhoodHash, label_numbers
from torchkern.graphs.nspdk import NeighborhoodSubgraphPairwiseDistance
from torchkern.graphs.pyramid_match import PyramidMatch

import grakel  # noqa: E402  (the test extra installs it: never skipped)
from grakel import kernels as gk  # noqa: E402

DATA = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")


@pytest.fixture(scope="module")
def mutag():
    return tk.datasets.read_tu(os.path.join(DATA, "MUTAG"))


@pytest.fixture(scope="module")
def cuneiform():
    return tk.datasets.read_tu(os.path.join(DATA, "Cuneiform"))


def random_graphs(n_graphs, n_min, n_max, p, n_labels, seed):
    """Undirected Erdős–Rényi graphs (isolated nodes possible), one-hot labels."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_graphs):
        n = int(rng.integers(n_min, n_max + 1))
        A = np.triu(rng.random((n, n)) < p, 1)
        s, t = np.nonzero(A | A.T)
        x = torch.nn.functional.one_hot(torch.as_tensor(rng.integers(0, n_labels, n)),
                                        n_labels).float()
        out.append(Data(x=x, edge_index=torch.as_tensor(np.stack([s, t])), num_nodes=n))
    return out


def to_grakel(graphs):
    """GraKeL graphs from adjacency matrices (isolated nodes kept), labelled by the label
    numbers of ``label_numbers`` (the column of the 1 of one-hot rows, the value of one
    integer column, else a number of the row itself)."""
    G = GraphSet(graphs)
    lab = label_numbers(G).tolist()
    out = []
    for i, d in enumerate(graphs):
        n, s = d.num_nodes, int(G.ptr[i])
        A = np.zeros((n, n))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        out.append(grakel.Graph(A, node_labels={j: lab[s + j] for j in range(n)}))
    return out


def dense(k, X, Y=None):
    return k(X, Y).to_dense().numpy()


# -- neighborhood hash ----------------------------------------------------------------------

@pytest.mark.parametrize("nh_type", ["simple", "count_sensitive"])
def test_neighborhood_hash_equals_grakel_on_mutag(mutag, nh_type):
    ref = gk.NeighborhoodHash(R=3, nh_type=nh_type, random_state=5).fit_transform(
        to_grakel(mutag))
    K = dense(NeighborhoodHash(R=3, nh_type=nh_type, random_state=5), mutag)
    np.testing.assert_allclose(K, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dense(NeighborhoodHash(3, nh_type, random_state=5,
                                                      normalize=True), mutag), ref,
                               rtol=0, atol=1e-12)


def test_neighborhood_hash_equals_grakel_with_colliding_codes(cuneiform):
    # Cuneiform's labels (distinct rows of x) numbered 0..L-1 in one integer column;
    # bits=3 gives 8 codes for more labels, the branch where GraKeL draws several blocks
    # of codes
    G = GraphSet(cuneiform[:60])
    assert G.label_values.shape[0] > 8
    graphs = [Data(x=G.node_label[int(G.ptr[i]):int(G.ptr[i + 1]), None],
                   edge_index=d.edge_index, num_nodes=d.num_nodes)
              for i, d in enumerate(cuneiform[:60])]
    for nh_type in ("simple", "count_sensitive"):
        ref = gk.NeighborhoodHash(R=4, nh_type=nh_type, bits=3, random_state=1).fit_transform(
            to_grakel(graphs))
        K = dense(NeighborhoodHash(R=4, nh_type=nh_type, bits=3, random_state=1), graphs)
        np.testing.assert_allclose(K, ref, rtol=0, atol=1e-12)


def test_neighborhood_hash_count_sensitive_on_dense_random_graphs():
    # many neighbours per label: occurrence counts up to ~15 rotate the codes
    graphs = random_graphs(30, 5, 30, 0.6, 2, seed=3)
    for bits in (4, 8):
        ref = gk.NeighborhoodHash(R=2, nh_type="count_sensitive", bits=bits,
                                  random_state=7).fit_transform(to_grakel(graphs))
        K = dense(NeighborhoodHash(R=2, nh_type="count_sensitive", bits=bits, random_state=7),
                  graphs)
        np.testing.assert_allclose(K, ref, rtol=0, atol=1e-12)


def test_neighborhood_hash_cross_gram_is_the_block_of_the_joint_gram(mutag):
    k = NeighborhoodHash(R=2, random_state=0)
    X, Y = mutag[:50], mutag[50:80]
    full = dense(k, X + Y)
    np.testing.assert_allclose(dense(k, X, Y), full[:50, 50:], rtol=0, atol=1e-14)
    K = k(X, Y)
    V = torch.randn(30, 3, dtype=torch.float64)
    torch.testing.assert_close(K @ V, torch.as_tensor(full[:50, 50:]) @ V)
    torch.testing.assert_close(K.T.to_dense(), torch.as_tensor(full[50:, :50]))


def test_neighborhood_hash_codes_of_other_label_rows_depend_on_the_row_alone():
    """Rows of several 0/1 columns that are not one-hot (Cuneiform's labels) get number
    d + Σ_j x_j 2^j; negative integers a hash of the value: a set's Grams are blocks of
    those of a larger set whose new labels sort before the others (with the former
    numbering by rank among the set's rows, every code moved: k(X_train) and
    k(X_test, X_train) disagreed)."""
    rng = np.random.default_rng(2)

    def graph(rows):
        n = len(rows)
        s = torch.arange(n)
        t = (s + 1) % n
        return Data(x=torch.tensor(rows), num_nodes=n,
                    edge_index=torch.stack([torch.cat([s, t]), torch.cat([t, s])]))

    pool = [[0, 1, 0, 1, 0], [1, 0, 0, 0, 1], [0, 1, 1, 0, 0], [0, 0, 1, 0, 0]]
    X = [graph([pool[i] for i in rng.integers(0, 4, 6)]) for _ in range(5)]
    Y = [graph([[0, 0, 0, 1, 1], [0, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]])]
    G = GraphSet(X)
    want = [5 + sum(2 ** j * v for j, v in enumerate(r)) if sum(r) != 1 else r.index(1)
            for r in torch.cat([d.x for d in X]).tolist()]
    assert label_numbers(G).tolist() == want
    negative = [graph(rng.integers(-3, 3, (6, 1)).tolist()) for _ in range(5)]
    new = [graph([[-9], [-5], [1], [0]])]
    for A, B in ((X, Y), (negative, new)):
        for nh_type in ("simple", "count_sensitive"):
            k = NeighborhoodHash(R=3, nh_type=nh_type, random_state=1)
            full = dense(k, B + A)
            np.testing.assert_array_equal(dense(k, A), full[1:, 1:])
            np.testing.assert_array_equal(dense(k, B, A), full[:1, 1:])


# -- pyramid match -----------------------------------------------------------------------

def well_conditioned(graphs, d, L, tol=1e-6):
    """Indices of the graphs whose pyramid-match embedding is unique and stable, computed
    as GraKeL computes it: the selected eigenvalues simple, no tie in modulus at the d-th
    one, and no coordinate within ``tol`` of a bin edge of the finest level. (Elsewhere any
    orthonormal eigenbasis, or either side of an edge, is a valid answer.)"""
    keep = []
    for i, g in enumerate(graphs):
        n = g.num_nodes
        A = np.zeros((n, n))
        A[g.edge_index[0].numpy(), g.edge_index[1].numpy()] = 1
        lam = np.linalg.eigvalsh(A)
        if n > d + 1:
            mod = np.sort(np.abs(lam))[::-1]
            if mod[d - 1] - mod[d] < tol:
                continue
            sel = lam[np.argsort(-np.abs(lam))[:d]]
            w, U = eigs(csr_matrix(A), k=d, ncv=10 * d)
            U = np.abs(U[:, np.argsort(w)[::-1]])
        else:
            sel = lam
            U = np.abs(np.linalg.eigh(A)[1])
        gaps = np.abs(sel[:, None] - lam[None, :])
        if (np.sort(gaps, 1)[:, 1] < tol).any():
            continue
        frac = (U * 2 ** (L - 1)) % 1
        if (np.minimum(frac, 1 - frac)[U * 2 ** (L - 1) > 0.5] < tol).any():
            continue
        keep.append(i)
    return keep


@pytest.mark.parametrize("with_labels", [True, False])
def test_pyramid_match_equals_grakel_on_mutag(mutag, with_labels):
    keep = well_conditioned(mutag, 6, 4)
    assert len(keep) > 120  # most of MUTAG's 188 graphs
    graphs = [mutag[i] for i in keep[::2]]
    ref = gk.PyramidMatch(with_labels=with_labels).fit_transform(to_grakel(graphs))
    np.testing.assert_allclose(dense(PyramidMatch(with_labels=with_labels), graphs), ref,
                               rtol=0, atol=1e-10)
    ref = gk.PyramidMatch(with_labels=with_labels, normalize=True).fit_transform(
        to_grakel(graphs))
    np.testing.assert_allclose(dense(PyramidMatch(with_labels=with_labels, normalize=True),
                                     graphs), ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("L, d", [(2, 3), (5, 4)])
def test_pyramid_match_equals_grakel_on_random_graphs(L, d):
    graphs = random_graphs(50, 2, 22, 0.3, 3, seed=4)
    keep = well_conditioned(graphs, d, L)
    assert len(keep) > 35
    graphs = [graphs[i] for i in keep]
    ref = gk.PyramidMatch(L=L, d=d).fit_transform(to_grakel(graphs))
    np.testing.assert_allclose(dense(PyramidMatch(L=L, d=d), graphs), ref, rtol=0, atol=1e-10)


def test_pyramid_match_refuses_directed_graphs():
    g = Data(edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    with pytest.raises(ValueError, match="X: PyramidMatch needs undirected"):
        PyramidMatch()([g, g])


# -- core framework ----------------------------------------------------------------------

def test_core_numbers_equal_networkx():
    graphs = random_graphs(40, 1, 25, 0.25, 1, seed=5)
    core = core_numbers(GraphSet(graphs)).tolist()
    ref = []
    for g in graphs:
        h = nx.Graph()
        h.add_nodes_from(range(g.num_nodes))
        h.add_edges_from(g.edge_index.t().tolist())
        c = nx.core_number(h)
        ref += [c[v] for v in range(g.num_nodes)]
    assert core == ref


@pytest.mark.parametrize("base, ref_base", [
    (WeisfeilerLehman(n_iter=3), (gk.WeisfeilerLehman, dict(n_iter=3))),
    (ShortestPath(), (gk.ShortestPath, {}))], ids=["wl", "sp"])
def test_core_framework_equals_grakel_on_mutag(mutag, base, ref_base):
    mutag = mutag[::2]
    for normalize in (False, True):
        ref = gk.CoreFramework(base_graph_kernel=ref_base, normalize=normalize).fit_transform(
            to_grakel(mutag))
        K = dense(CoreFramework(base, normalize=normalize), mutag)
        np.testing.assert_allclose(K, ref, rtol=0, atol=0 if not normalize else 1e-12)


def test_core_framework_equals_grakel_on_cuneiform(cuneiform):
    # two-column labels (each distinct row one label); Cuneiform's symmetric signs have
    # repeated adjacency eigenvalues in every graph, so PyramidMatch is not unique there
    graphs = cuneiform[::3]
    ref = gk.CoreFramework(base_graph_kernel=(gk.WeisfeilerLehman, dict(n_iter=2))
                           ).fit_transform(to_grakel(graphs))
    np.testing.assert_array_equal(dense(CoreFramework(WeisfeilerLehman(2)), graphs), ref)


def test_core_framework_min_core_against_networkx_cores():
    # GraKeL 0.1.11 ignores its min_core argument (its constructor sets -1), so levels
    # above min_core are checked against GraKeL's WL on the networkx k-cores
    graphs = random_graphs(40, 6, 20, 0.35, 2, seed=6)
    nxg = []
    for g in graphs:
        h = nx.Graph()
        h.add_nodes_from(range(g.num_nodes))
        h.add_edges_from(g.edge_index.t().tolist())
        nxg.append(h)
    lab = initial_labels(GraphSet(graphs))[0].tolist()
    starts = np.cumsum([0] + [g.num_nodes for g in graphs])
    top = max(max(nx.core_number(h).values()) for h in nxg)
    ref = np.zeros((40, 40))
    for i in range(2, top + 1):
        idx, sub = [], []
        for j, h in enumerate(nxg):
            c = nx.k_core(h, i)
            if c.number_of_nodes():
                nodes = sorted(c.nodes)
                pos = {v: a for a, v in enumerate(nodes)}
                A = np.zeros((len(nodes), len(nodes)))
                for u, v in c.edges:
                    A[pos[u], pos[v]] = A[pos[v], pos[u]] = 1
                idx.append(j)
                sub.append(grakel.Graph(A, node_labels={pos[v]: lab[starts[j] + v]
                                                        for v in nodes}))
        ref[np.ix_(idx, idx)] += gk.WeisfeilerLehman(n_iter=2).fit_transform(sub)
    K = dense(CoreFramework(WeisfeilerLehman(n_iter=2), min_core=1), graphs)
    np.testing.assert_array_equal(K, ref)
    with pytest.raises(ValueError, match="min_core=30"):
        CoreFramework(WeisfeilerLehman(), min_core=30)(graphs)


# -- NSPDK -------------------------------------------------------------------------------

def nspdk_brute_force(graphs, r, d):
    """The definition of NeighborhoodSubgraphPairwiseDistance, in plain Python: BFS
    distances, invariants as sorted tuples (no hashing), per-level cosine, and GraKeL's
    diagonal (1 for a level of the set that the graph lacks)."""
    from collections import Counter, deque
    G = GraphSet(graphs)
    lab = initial_labels(G)[0].tolist()
    el = G.edge_label.tolist() if G.edge_label is not None else [0] * G.edge_index.shape[1]
    feats = []
    for gi, g in enumerate(graphs):
        n, s0 = g.num_nodes, int(G.ptr[gi])
        adj, elab = {i: [] for i in range(n)}, {}
        for k in range(int(G.eptr[gi]), int(G.eptr[gi + 1])):
            a, b = int(G.edge_index[0, k]) - s0, int(G.edge_index[1, k]) - s0
            adj[a].append(b)
            elab[a, b] = el[k]
        D = {}
        for s in range(n):
            dist, q = {s: 0}, deque([s])
            while q:
                u = q.popleft()
                for w in adj[u]:
                    if w not in dist:
                        dist[w] = dist[u] + 1
                        q.append(w)
            D.update({(s, t): v for t, v in dist.items()})
        L = lab[s0:s0 + n]
        H = {}
        for rho in range(r + 1):
            for v in range(n):
                ball = [i for i in range(n) if D.get((v, i), n + 1) <= rho]
                inv = {i: tuple(sorted((D[i, j], L[j]) for j in ball
                                       if D.get((i, j), n + 1) <= d)) for i in ball}
                H[rho, v] = (tuple(sorted(inv.values())),
                             tuple(sorted((inv[a], inv[b], elab[a, b])
                                          for a in ball for b in adj[a] if b in inv)))
        f = {}
        for rho in range(r + 1):
            for (u, v), dd in D.items():
                if dd <= d:
                    f.setdefault((rho, dd), Counter())[H[rho, u], H[rho, v]] += 1
        feats.append(f)
    levels = {k for f in feats for k in f}
    K = np.zeros((len(graphs), len(graphs)))
    for a, fa in enumerate(feats):
        for b, fb in enumerate(feats):
            for lv in levels:
                if lv in fa and lv in fb:
                    x, y = fa[lv], fb[lv]
                    K[a, b] += sum(x[k] * y[k] for k in x if k in y) / np.sqrt(
                        sum(c * c for c in x.values()) * sum(c * c for c in y.values()))
                elif a == b:
                    K[a, b] += 1
    return K, len(levels)


@pytest.mark.parametrize("r, d", [(2, 2), (1, 3)])
def test_nspdk_equals_its_definition_by_brute_force(mutag, r, d):
    graphs = mutag[:8]  # with edge labels (bond types)
    ref, n_levels = nspdk_brute_force(graphs, r, d)
    k = NeighborhoodSubgraphPairwiseDistance(r=r, d=d)
    np.testing.assert_allclose(dense(k, graphs), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dense(NeighborhoodSubgraphPairwiseDistance(r, d, normalize=True),
                                     graphs), ref / n_levels, rtol=0, atol=1e-12)
    # k(X, Y) is the block of k(X ∪ Y) without the diagonal completion
    np.testing.assert_allclose(dense(k, graphs[:5], graphs[5:]), ref[:5, 5:], rtol=0,
                               atol=1e-12)


def test_nspdk_on_unlabelled_random_graphs_and_renumbering():
    graphs = random_graphs(10, 1, 12, 0.3, 1, seed=10)
    for g in graphs:
        g.x = None
    ref, _ = nspdk_brute_force(graphs, 2, 3)
    k = NeighborhoodSubgraphPairwiseDistance(r=2, d=3)
    np.testing.assert_allclose(dense(k, graphs), ref, rtol=0, atol=1e-12)
    # the invariants do not depend on the numbering of the nodes (GraKeL's do)
    g = graphs[-1]
    perm = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(0))
    h = Data(edge_index=perm[g.edge_index], num_nodes=g.num_nodes)
    np.testing.assert_allclose(dense(k, graphs + [h])[-1], dense(k, graphs + [g])[-1],
                               rtol=0, atol=1e-12)


# -- inputs, estimators, arguments ---------------------------------------------------------

def test_inputs_and_grid_search(mutag):
    mutag = mutag[::3]
    y = np.array([int(d.y) for d in mutag])
    k = CoreFramework(WeisfeilerLehman(n_iter=1), normalize=True)
    K = dense(k, mutag)
    np.testing.assert_array_equal(dense(k, Batch.from_data_list(mutag)), K)
    np.testing.assert_array_equal(dense(k, GraphSet(mutag)), K)
    c = clone(k).set_params(base_kernel__n_iter=2, min_core=0)
    assert (c.base_kernel.n_iter, c.min_core, k.base_kernel.n_iter) == (2, 0, 1)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"kernel__R": [1, 3]}
    nh = NeighborhoodHash(random_state=0)
    gs = GridSearchCV(tk.SVC(kernel=nh, C=10.0), grid, cv=cv).fit(mutag, y)
    for R, score in zip(grid["kernel__R"], gs.cv_results_["mean_test_score"]):
        G = dense(NeighborhoodHash(R=R, random_state=0), mutag)
        ref = GridSearchCV(tk.SVC(kernel="precomputed", C=10.0), {"C": [10.0]}, cv=cv).fit(G, y)
        assert score == ref.cv_results_["mean_test_score"][0]


@pytest.mark.parametrize("make, match", [
    (lambda: NeighborhoodHash(R=0), "R must be"),
    (lambda: NeighborhoodHash(nh_type="x"), "nh_type must be"),
    (lambda: NeighborhoodHash(bits=0), "bits must be"),
    (lambda: NeighborhoodHash(random_state=1.5), "random_state must be"),
    (lambda: PyramidMatch(L=0), "L must be"),
    (lambda: PyramidMatch(d=0), "d must be"),
    (lambda: PyramidMatch(with_labels=1), "with_labels must be"),
    (lambda: CoreFramework(tk.RBF()), "base_kernel must be"),
    (lambda: CoreFramework(ShortestPath(), min_core=-2), "min_core must be"),
    (lambda: NeighborhoodSubgraphPairwiseDistance(r=-1), "r must be"),
    (lambda: NeighborhoodSubgraphPairwiseDistance(d=1.5), "d must be")])
def test_bad_arguments_are_named(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


@requires_device
@pytest.mark.parametrize("kernel", [NeighborhoodHash(R=2, nh_type="count_sensitive",
                                                     random_state=0),
                                    PyramidMatch(), CoreFramework(WeisfeilerLehman(2)),
                                    NeighborhoodSubgraphPairwiseDistance(r=2, d=2)],
                         ids=["nh", "pm", "core", "nspdk"])
def test_device_equals_cpu(dev, kernel):
    graphs = random_graphs(30, 3, 15, 0.3, 3, seed=8)
    graphs = [graphs[i] for i in well_conditioned(graphs, 6, 4)]  # a unique embedding
    ref = kernel(graphs).to_dense()
    out = kernel(GraphSet(graphs, device=dev)).to_dense()
    assert out.device.type == dev.type
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-12, atol=1e-12)
