"""Hadamard code and subgraph matching kernels against GraKeL 0.1.11 (MUTAG, random
graphs), the subgraph matching kernel also against a brute-force count of its definition
(every bijection between node subsets), and both in estimators."""
import itertools
import os
import warnings

import networkx as nx
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from torch_geometric.data import Batch, Data

import torchkern as tk
from tests._devices import dev, requires_device  # noqa: F401 (fixture)
from torchkern.graphs import (GraphSet, HadamardCode, ShortestPath, SubgraphMatching,
                              WeisfeilerLehman)
from torchkern.graphs.subgraph_matching import canonical_codes, connected_subgraphs

import grakel  # noqa: E402  (the test extra installs it: never skipped)
from grakel import kernels as gk  # noqa: E402

DATA = os.path.join(os.path.dirname(grakel.__file__), "tests", "data")


@pytest.fixture(scope="module")
def mutag():
    return tk.datasets.read_tu(os.path.join(DATA, "MUTAG"))


def random_graphs(n_graphs, n_min, n_max, p, n_labels, seed, n_bonds=0, loops=False):
    """Undirected Erdős–Rényi graphs (isolated nodes possible, edge 0 - 1 always), one-hot
    node labels, ``n_bonds`` one-hot edge labels (the same both ways), self-loops if
    asked."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_graphs):
        n = int(rng.integers(n_min, n_max + 1))
        A = np.triu(rng.random((n, n)) < p, 1)
        A[0, 1:2] = True  # an edge where n > 1: GraKeL needs an edge to read edge labels
        A = A | A.T
        if loops:
            A[np.diag_indices(n)] = rng.random(n) < 0.3
        s, t = np.nonzero(A)
        x = torch.nn.functional.one_hot(torch.as_tensor(rng.integers(0, n_labels, n)),
                                        n_labels).float()
        d = Data(x=x, edge_index=torch.as_tensor(np.stack([s, t])), num_nodes=n)
        if n_bonds:
            bond = np.triu(rng.integers(0, n_bonds, (n, n)), 1)
            bond = bond + bond.T
            d.edge_attr = torch.nn.functional.one_hot(torch.as_tensor(bond[s, t]),
                                                      n_bonds).float()
        out.append(d)
    return out


def grakel_graphs(graphs, edge_labels=False, as_list=False):
    """GraKeL inputs: the adjacency matrix (isolated nodes kept), node labels the rows of x
    as tuples, edge labels the rows of edge_attr as tuples."""
    out = []
    for d in graphs:
        n = d.num_nodes
        A = np.zeros((n, n))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        nodes = {i: tuple(r) for i, r in enumerate(d.x.tolist())}
        el = {}
        if edge_labels:
            el = {tuple(e): tuple(r) for e, r in zip(d.edge_index.t().tolist(),
                                                      d.edge_attr.tolist())}
        out.append([A, nodes] if as_list else grakel.Graph(A, node_labels=nodes,
                                                           edge_labels=el))
    return out


def reference(kernel, X, Y=None, **conv):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GraKeL's format-change warnings
        if Y is None:
            return kernel.fit_transform(grakel_graphs(X, **conv))
        return kernel.fit(grakel_graphs(X, **conv)).transform(grakel_graphs(Y, **conv))


def dense(k, X, Y=None):
    return k(X, Y).to_dense().numpy()


# -- Hadamard code ------------------------------------------------------------------------

@pytest.mark.parametrize("normalize", [False, True])
def test_hadamard_code_equals_grakel_on_mutag(mutag, normalize):
    ref = reference(gk.HadamardCode(normalize=normalize), mutag, as_list=True)
    K = dense(HadamardCode(normalize=normalize), mutag)
    if normalize:
        np.testing.assert_allclose(K, ref, rtol=0, atol=1e-13)
    else:
        np.testing.assert_array_equal(K, ref)


def test_hadamard_code_equals_grakel_on_random_graphs_with_self_loops():
    # many labels (9: a Hadamard matrix of order 16), self-loops, isolated nodes
    graphs = random_graphs(40, 1, 14, 0.3, 9, seed=1, loops=True)
    for n_iter in (1, 3, 6):
        ref = reference(gk.HadamardCode(n_iter=n_iter), graphs, as_list=True)
        np.testing.assert_array_equal(dense(HadamardCode(n_iter=n_iter), graphs), ref)


@pytest.mark.parametrize("gbase, base", [
    ((gk.WeisfeilerLehman, {"n_iter": 2}), WeisfeilerLehman(n_iter=2)),
    (gk.ShortestPath, ShortestPath()),
])
def test_hadamard_code_over_other_base_kernels_equals_grakel(mutag, gbase, base):
    graphs = mutag[:25]
    ref = reference(gk.HadamardCode(base_graph_kernel=gbase, n_iter=3), graphs, as_list=True)
    np.testing.assert_array_equal(dense(HadamardCode(base, n_iter=3), graphs), ref)


def test_hadamard_code_cross_gram_equals_grakel_transform(mutag):
    # the test graphs' labels all occur in the training set (GraKeL's transform builds a
    # larger Hadamard matrix when they do not, and then matches no code of the fit)
    X, Y = mutag[:60], mutag[60:90]
    for normalize in (False, True):
        ref = reference(gk.HadamardCode(normalize=normalize), X, Y, as_list=True)
        np.testing.assert_allclose(dense(HadamardCode(normalize=normalize), Y, X), ref,
                                   rtol=0, atol=1e-13)


def test_hadamard_code_int64_rows_and_hash_collisions_equal_grakel(monkeypatch):
    # a star of 63 leaves: (n_iter − 1)·log2(64) = 54 bits, past float64's exact integers
    # (the int64 rows); then every hash code made equal (each round regrouped by rows)
    star = Data(x=torch.nn.functional.one_hot(torch.arange(64) % 3, 3).float(),
                edge_index=torch.stack([torch.zeros(63).long(), torch.arange(1, 64)]))
    star.edge_index = torch.cat([star.edge_index, star.edge_index.flip(0)], 1)
    graphs = [star] + random_graphs(10, 3, 12, 0.4, 3, seed=8)
    ref = reference(gk.HadamardCode(n_iter=10), graphs, as_list=True)
    np.testing.assert_array_equal(dense(HadamardCode(n_iter=10), graphs), ref)
    import torchkern.graphs.hadamard_code as hc
    monkeypatch.setattr(hc, "_EDGE_BLOCK", 7)  # the int64 rounds' edges in chunks of 2
    np.testing.assert_array_equal(dense(HadamardCode(n_iter=10), graphs), ref)
    monkeypatch.setattr(hc, "_random_codes", lambda n, salt, device: torch.zeros(
        n, dtype=torch.long, device=device))
    ref = reference(gk.HadamardCode(n_iter=4), graphs, as_list=True)
    np.testing.assert_array_equal(dense(HadamardCode(n_iter=4), graphs), ref)


def test_hadamard_code_is_walk_counts_by_definition():
    # independent check of the codes: h_i = (A + I)^i H[ℓ] with an explicit Hadamard matrix
    from scipy.linalg import hadamard
    graphs = random_graphs(12, 2, 9, 0.4, 3, seed=4, loops=True)
    H = hadamard(4)
    codes = []
    for d in graphs:
        A = np.zeros((d.num_nodes,) * 2, dtype=np.int64)
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        h = H[d.x.argmax(1).numpy()]
        per_round = []
        for _ in range(4):
            per_round.append([tuple(r) for r in h])
            h = h + A @ h
        codes.append(per_round)
    K = np.zeros((12, 12))
    for i, j in itertools.product(range(12), repeat=2):
        for r in range(4):
            K[i, j] += sum(a == b for a in codes[i][r] for b in codes[j][r])
    np.testing.assert_array_equal(dense(HadamardCode(n_iter=4), graphs), K)


# -- subgraph matching ----------------------------------------------------------------------

@pytest.mark.parametrize("n, gargs, args", [
    (14, {}, {"edge_labels": True}),
    (14, {"ke": None, "lw": "increasing", "normalize": True}, {"lw": "increasing",
                                                               "normalize": True}),
    (8, {"kv": None, "ke": None, "k": 4}, {"node_labels": False, "k": 4}),
])
def test_subgraph_matching_equals_grakel_on_mutag(mutag, n, gargs, args):
    graphs = mutag[:n]
    ref = reference(gk.SubgraphMatching(**gargs), graphs, edge_labels=True)
    K = dense(SubgraphMatching(**args), graphs)
    if args.get("normalize"):
        np.testing.assert_allclose(K, ref, rtol=0, atol=1e-14)
    else:
        np.testing.assert_array_equal(K, ref)


def test_both_equal_grakel_on_cuneiform_multi_hot_labels():
    # Cuneiform: node labels are multi-hot rows of x, edge labels two-column rows
    graphs = tk.datasets.read_tu(os.path.join(DATA, "Cuneiform"))
    ref = reference(gk.HadamardCode(), graphs, as_list=True)
    np.testing.assert_array_equal(dense(HadamardCode(), graphs), ref)
    ref = reference(gk.SubgraphMatching(normalize=True), graphs[:30], edge_labels=True)
    K = dense(SubgraphMatching(edge_labels=True, normalize=True), graphs[:30])
    np.testing.assert_allclose(K, ref, rtol=0, atol=1e-14)


@pytest.mark.parametrize("lw", ["decreasing", "strong_decreasing"])
def test_subgraph_matching_fractional_weights_equal_grakel(lw):
    graphs = random_graphs(12, 2, 8, 0.45, 2, seed=5, n_bonds=2, loops=True)
    ref = reference(gk.SubgraphMatching(k=4, lw=lw), graphs, edge_labels=True)
    K = dense(SubgraphMatching(k=4, lw=lw, edge_labels=True), graphs)
    np.testing.assert_allclose(K, ref, rtol=1e-14, atol=0)


def test_subgraph_matching_cross_gram_equals_grakel_transform(mutag):
    X, Y = mutag[20:28], mutag[28:32]
    for normalize in (False, True):
        ref = reference(gk.SubgraphMatching(k=3, normalize=normalize), X, Y, edge_labels=True)
        K = dense(SubgraphMatching(k=3, edge_labels=True, normalize=normalize), Y, X)
        np.testing.assert_allclose(K, ref, rtol=0, atol=1e-13)
    k = SubgraphMatching(k=3, edge_labels=True)
    full = dense(k, X + Y)
    np.testing.assert_array_equal(dense(k, X, Y), full[:8, 8:])
    np.testing.assert_array_equal(k.diag(Y).numpy(), np.diag(full)[8:])


def test_subgraph_matching_in_parts_equals_whole(mutag, monkeypatch):
    # a byte budget that splits the set down to single graphs at the larger sizes
    graphs = mutag[:24] + random_graphs(6, 2, 7, 0.5, 7, seed=9, n_bonds=4)
    k = SubgraphMatching(edge_labels=True, lw="increasing")  # integers: exact sums
    whole = dense(k, graphs)
    monkeypatch.setattr(SubgraphMatching, "_budget", 20_000)
    np.testing.assert_array_equal(dense(k, graphs), whole)
    np.testing.assert_array_equal(dense(k, graphs[:10], graphs[10:]), whole[:10, 10:])


def _brute_force(g, h, k, lam, node_labels, edge_labels, ell=None):
    """Σ_s λ_s · #{(S, φ): S ⊆ V(g) of size s with g[S] connected, φ an injective map S →
    V(h) preserving edges, non-edges, node labels and edge labels} — every subset, every
    bijection, no canonical forms; with ``ell`` each φ weighs Π_v exp(−‖a_v − a_φ(v)‖² /
    (2 ell²)) instead of 1."""
    def parts(d):
        n = d.num_nodes
        A = np.zeros((n, n), dtype=np.int64)  # 0: no edge, else 1 + edge label
        s, t = d.edge_index.numpy()
        keep = s != t
        lab = d.edge_attr.argmax(1).numpy() + 1 if edge_labels else np.ones(len(s), np.int64)
        A[s[keep], t[keep]] = lab[keep]
        x = d.x.argmax(1).numpy() if node_labels else np.zeros(n, np.int64)
        return n, A, x
    (n, A, x), (m, B, y) = parts(g), parts(h)
    G = nx.from_numpy_array((A > 0).astype(int))
    total = 0.0
    for s in range(1, k + 1):
        count = 0
        for S in itertools.combinations(range(n), s):
            if not nx.is_connected(G.subgraph(S)):
                continue
            for T in itertools.permutations(range(m), s):
                if all(x[a] == y[b] for a, b in zip(S, T)) and all(
                        A[S[i], S[j]] == B[T[i], T[j]]
                        for i in range(s) for j in range(i + 1, s)):
                    count += 1 if ell is None else np.prod([np.exp(-np.sum(
                        (g.node_attributes[a] - h.node_attributes[b]).numpy() ** 2)
                        / (2 * ell ** 2)) for a, b in zip(S, T)])
        total += lam[s - 1] * count
    return total


@pytest.mark.parametrize("node_labels, edge_labels, lw", [
    (True, True, [1, 1, 1, 1]), (False, False, [2, 0.5, 1, 3]), (True, False, [1, 2, 3, 4])])
def test_subgraph_matching_equals_brute_force_definition(node_labels, edge_labels, lw):
    graphs = random_graphs(6, 2, 6, 0.5, 2, seed=11, n_bonds=2, loops=True)
    K = dense(SubgraphMatching(k=4, lw=lw, node_labels=node_labels,
                               edge_labels=edge_labels), graphs)
    ref = np.array([[_brute_force(g, h, 4, lw, node_labels, edge_labels) for h in graphs]
                    for g in graphs])
    np.testing.assert_allclose(K, ref, rtol=1e-15, atol=0)


def test_subgraph_matching_pair_code_table_and_search_paths(monkeypatch):
    # more than 255 edge labels (a 16-bit pair-code table) against GraKeL; then the
    # binary-search lookup (no table) against GraKeL and the brute-force definition
    graphs = random_graphs(10, 9, 12, 0.8, 2, seed=3, n_bonds=1000)
    assert GraphSet(graphs).edge_label_values.shape[0] > 255
    ref = reference(gk.SubgraphMatching(k=3), graphs, edge_labels=True)
    k = SubgraphMatching(k=3, edge_labels=True)
    np.testing.assert_array_equal(dense(k, graphs), ref)
    monkeypatch.setattr(SubgraphMatching, "_table_bytes", 0)
    np.testing.assert_array_equal(dense(k, graphs), ref)
    small = random_graphs(5, 2, 6, 0.5, 2, seed=11, n_bonds=2, loops=True)
    K = dense(SubgraphMatching(k=4, edge_labels=True), small)
    want = [[_brute_force(g, h, 4, [1] * 4, True, True) for h in small] for g in small]
    np.testing.assert_array_equal(K, np.array(want))


def with_attributes(graphs, dim, seed):
    rng = np.random.default_rng(seed)
    for d in graphs:
        d.node_attributes = torch.as_tensor(rng.normal(size=(d.num_nodes, dim)))
    return graphs


def gaussian_kv(ell, labels=True):
    """GraKeL's kv on node 'labels' (label, attribute...) tuples: label equality times
    the Gaussian of the attributes."""
    def kv(a, b):
        same = a[0] == b[0] if labels else True
        return float(same) * float(np.exp(-np.sum((np.array(a[1:]) - np.array(b[1:])) ** 2)
                                          / (2 * ell ** 2)))
    return kv


def grakel_attributed(graphs):
    out = []
    for d in graphs:
        n = d.num_nodes
        A = np.zeros((n, n))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1
        nodes = {i: (tuple(d.x[i].tolist()),) + tuple(d.node_attributes[i].tolist())
                 for i in range(n)}
        el = {tuple(e): tuple(r) for e, r in zip(d.edge_index.t().tolist(),
                                                  d.edge_attr.tolist())}
        out.append([A, nodes, el])
    return out


def test_subgraph_matching_gaussian_attributes_equal_grakel():
    graphs = with_attributes(random_graphs(8, 2, 6, 0.5, 2, seed=3, n_bonds=2), 2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, labels, normalize in ((3, True, False), (4, True, True), (4, False, False)):
            ref = gk.SubgraphMatching(k=k, kv=gaussian_kv(0.8, labels), normalize=normalize,
                                      lw="increasing").fit_transform(grakel_attributed(graphs))
            K = dense(SubgraphMatching(k=k, lw="increasing", node_labels=labels,
                                       edge_labels=True, node_kernel="gaussian",
                                       lengthscale=0.8, normalize=normalize), graphs)
            np.testing.assert_allclose(K, ref, rtol=1e-13, atol=0)
        X, Y = graphs[:5], graphs[5:]
        ref = gk.SubgraphMatching(k=3, kv=gaussian_kv(0.8), normalize=True).fit(
            grakel_attributed(X)).transform(grakel_attributed(Y))
    k = SubgraphMatching(k=3, edge_labels=True, node_kernel="gaussian", lengthscale=0.8,
                         normalize=True)
    np.testing.assert_allclose(dense(k, Y, X), ref, rtol=1e-13, atol=0)
    np.testing.assert_array_equal(k.diag(Y).numpy(), np.ones(3))
    ref = np.array([[_brute_force(g, h, 3, [1, 1, 1], True, True, ell=0.8) for h in graphs]
                    for g in graphs])
    K = dense(SubgraphMatching(k=3, edge_labels=True, node_kernel="gaussian",
                               lengthscale=0.8), graphs)
    np.testing.assert_allclose(K, ref, rtol=1e-13, atol=0)


def test_subgraph_matching_gaussian_diag_by_brute_force_without_the_gram(monkeypatch):
    # k.diag sums the pairs of subgraphs of each graph only: no n × n Gram of the set
    graphs = with_attributes(random_graphs(7, 2, 6, 0.5, 2, seed=6, n_bonds=2), 3, seed=1)
    k = SubgraphMatching(k=3, lw=[1, 0.5, 2], edge_labels=True, node_kernel="gaussian",
                         lengthscale=0.9)
    ref = [_brute_force(g, g, 3, [1, 0.5, 2], True, True, ell=0.9) for g in graphs]

    def no_gram(self, U):
        raise AssertionError("diag built the n x n Gram")
    monkeypatch.setattr(SubgraphMatching, "_attribute_gram", no_gram)
    monkeypatch.setattr(SubgraphMatching, "_block", 5)  # many chunks, rows cut anywhere
    np.testing.assert_allclose(k.diag(graphs).numpy(), ref, rtol=1e-13, atol=0)


def test_subgraph_matching_gaussian_attributes_equal_grakel_on_cuneiform():
    graphs = tk.datasets.read_tu(os.path.join(DATA, "Cuneiform"))[:12]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = gk.SubgraphMatching(kv=gaussian_kv(1.5)).fit_transform(grakel_attributed(graphs))
    K = dense(SubgraphMatching(edge_labels=True, node_kernel="gaussian", lengthscale=1.5),
              graphs)
    np.testing.assert_allclose(K, ref, rtol=1e-13, atol=0)


def test_connected_subgraphs_and_canonical_codes_by_networkx():
    graphs = random_graphs(5, 3, 9, 0.4, 1, seed=2)
    G = GraphSet(graphs)
    src, dst = G.edge_index
    levels = connected_subgraphs(G, 5, src, dst)
    for s, sets in enumerate(levels, 1):
        want = set()
        for i, d in enumerate(graphs):
            off = int(G.ptr[i])
            g = nx.Graph(list(map(tuple, d.edge_index.t().tolist())))
            g.add_nodes_from(range(d.num_nodes))
            want |= {tuple(off + v for v in S)
                     for S in itertools.combinations(range(d.num_nodes), s)
                     if nx.is_connected(g.subgraph(S))}
        assert {tuple(r) for r in sets.tolist()} == want
    # automorphism counts of the 4-node shapes: path 2, star 6, cycle 8, paw 2,
    # diamond 4, clique 24
    shapes = {"path": ([(0, 1), (1, 2), (2, 3)], 2), "star": ([(0, 1), (0, 2), (0, 3)], 6),
              "cycle": ([(0, 1), (1, 2), (2, 3), (3, 0)], 8),
              "paw": ([(0, 1), (1, 2), (2, 0), (2, 3)], 2),
              "diamond": ([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)], 4),
              "clique": (list(itertools.combinations(range(4), 2)), 24)}
    adj = torch.zeros(len(shapes), 4, 4, dtype=torch.long)
    for i, (edges, _) in enumerate(shapes.values()):
        for a, b in edges:
            adj[i, a, b] = adj[i, b, a] = 1
    codes, aut = canonical_codes(torch.zeros(len(shapes), 4, dtype=torch.long), adj)
    assert aut.tolist() == [a for _, a in shapes.values()]
    assert len({tuple(c) for c in codes.tolist()}) == len(shapes)
    relabel = adj[:, [2, 0, 3, 1]][:, :, [2, 0, 3, 1]]  # isomorphic copies: same codes
    assert torch.equal(canonical_codes(torch.zeros(len(shapes), 4, dtype=torch.long),
                                       relabel)[0], codes)


def test_grams_invariant_to_node_renumbering():
    # every graph's nodes renumbered by a random permutation (labels, attributes and
    # edges carried along): Grams unchanged, and k(G, perm G) equal to k(G, G)
    rng = np.random.default_rng(12)
    graphs = with_attributes(random_graphs(10, 2, 9, 0.45, 3, seed=12, n_bonds=2,
                                           loops=True), 2, seed=12)
    perm = []
    for d in graphs:
        p = torch.as_tensor(rng.permutation(d.num_nodes))  # node i becomes node p[i]
        inv = torch.argsort(p)
        perm.append(Data(x=d.x[inv], edge_index=p[d.edge_index], edge_attr=d.edge_attr,
                         node_attributes=d.node_attributes[inv], num_nodes=d.num_nodes))
    for k in (HadamardCode(n_iter=4), HadamardCode(WeisfeilerLehman(n_iter=2), n_iter=3),
              SubgraphMatching(k=4, edge_labels=True), SubgraphMatching(k=5, node_labels=False),
              SubgraphMatching(k=3, edge_labels=True, node_kernel="gaussian")):
        K = dense(k, graphs)
        np.testing.assert_allclose(dense(k, perm), K, rtol=1e-14, atol=0)
        np.testing.assert_allclose(dense(k, graphs, perm), K, rtol=1e-14, atol=0)


# -- inputs, estimators, errors ----------------------------------------------------------------

def test_inputs_estimators_and_grid_search(mutag):
    graphs = mutag[:30]
    y = np.array([int(d.y) for d in graphs])
    for k in (HadamardCode(n_iter=3), SubgraphMatching(k=3, edge_labels=True)):
        K = dense(k, graphs)
        np.testing.assert_array_equal(dense(k, Batch.from_data_list(graphs)), K)
        np.testing.assert_array_equal(dense(k, GraphSet(graphs)), K)
        V = torch.randn(30, 2, dtype=torch.float64)
        torch.testing.assert_close(k(graphs) @ V, torch.as_tensor(K) @ V, rtol=1e-12, atol=0)
    c = clone(HadamardCode(WeisfeilerLehman(n_iter=1))).set_params(base_kernel__n_iter=2,
                                                                    n_iter=2)
    assert (c.base_kernel.n_iter, c.n_iter) == (2, 2)
    c = clone(SubgraphMatching()).set_params(lw="increasing", k=2)
    assert (c.k, c._lambdas) == (2, [1, 2])
    c = clone(SubgraphMatching(node_kernel="gaussian")).set_params(lengthscale=2.0)
    assert (c.node_kernel, c.lengthscale) == ("gaussian", 2.0)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"kernel__k": [2, 3]}
    gs = GridSearchCV(tk.SVC(kernel=SubgraphMatching(edge_labels=True), C=1.0), grid,
                      cv=cv).fit(graphs, y)
    for kk, score in zip(grid["kernel__k"], gs.cv_results_["mean_test_score"]):
        G = dense(SubgraphMatching(k=kk, edge_labels=True), graphs)
        ref = GridSearchCV(tk.SVC(kernel="precomputed", C=1.0), {"C": [1.0]}, cv=cv).fit(G, y)
        assert score == ref.cv_results_["mean_test_score"][0]
    kr = tk.KernelRidge(kernel=HadamardCode(n_iter=2, normalize=True), alpha=0.1)
    pred = kr.fit(graphs[:20], y[:20]).predict(graphs[20:])
    K = dense(HadamardCode(n_iter=2, normalize=True), graphs)
    a = np.linalg.solve(K[:20, :20] + 0.1 * np.eye(20), y[:20])
    np.testing.assert_allclose(np.asarray(pred), K[20:, :20] @ a, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("make, match", [
    (lambda: HadamardCode(n_iter=0), "n_iter must be"),
    (lambda: HadamardCode(base_kernel="VertexHistogram"), "base_kernel must be"),
    (lambda: SubgraphMatching(k=0), "k must be"),
    (lambda: SubgraphMatching(lw="log"), "lw must be"),
    (lambda: SubgraphMatching(k=2, lw=[1, 2, 3]), "lw as a sequence"),
    (lambda: SubgraphMatching(k=2, lw=[1, -1]), "lw as a sequence"),
    (lambda: SubgraphMatching(node_labels=1), "node_labels must be"),
    (lambda: SubgraphMatching(node_kernel="linear"), "node_kernel must be"),
    (lambda: SubgraphMatching(node_kernel="gaussian", lengthscale=0), "lengthscale must be"),
])
def test_bad_arguments_are_named(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make()


def test_bad_graphs_are_named():
    one_way = Data(x=torch.zeros(3, 1), edge_index=torch.tensor([[0, 1], [1, 2]]))
    with pytest.raises(ValueError, match="X: SubgraphMatching needs undirected graphs"):
        SubgraphMatching()([one_way])
    no_bonds = random_graphs(2, 3, 4, 0.9, 2, seed=0)
    with pytest.raises(ValueError, match="edge_labels=True needs edge labels"):
        SubgraphMatching(edge_labels=True)(no_bonds)
    g = Data(x=torch.zeros(2, 1), edge_index=torch.tensor([[0, 1], [1, 0]]),
             edge_attr=torch.tensor([[0.], [1.]]))
    with pytest.raises(ValueError, match="different labels"):
        SubgraphMatching(edge_labels=True)([g])
    with pytest.raises(ValueError, match="node_kernel='gaussian' compares continuous"):
        SubgraphMatching(node_kernel="gaussian")(no_bonds)
    with pytest.raises(TypeError, match="no finite feature map"):
        SubgraphMatching(node_kernel="gaussian").features(with_attributes(no_bonds, 2, 0))
    with pytest.raises(ValueError, match="x holds floats"):
        HadamardCode()([Data(x=torch.tensor([[0.5]]), edge_index=torch.zeros(2, 0).long())])
    star = Data(x=torch.zeros(64, 1), edge_index=torch.stack([torch.zeros(63).long(),
                                                             torch.arange(1, 64)]))
    with pytest.raises(ValueError, match="n_iter=12"):
        HadamardCode(n_iter=12)([star])


def test_too_large_graph_refused_by_argument_and_index(monkeypatch):
    # sets over the byte budget are split down to single graphs; one that would pass the
    # device's memory is refused as X[i] or Y[j], not as the joint set X ∪ Y
    import torchkern.graphs._batch as batch
    monkeypatch.setattr(batch, "device_memory", lambda device: 10 ** 5)
    monkeypatch.setattr(SubgraphMatching, "_budget", 1_000)
    n = 12
    ei = torch.tensor([(i, j) for i in range(n) for j in range(n) if i != j]).T
    clique = Data(x=torch.zeros(n, 1), edge_index=ei, num_nodes=n)
    path = Data(x=torch.zeros(3, 1), edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]))
    k = SubgraphMatching(k=4)
    with pytest.raises(ValueError, match=r"^Y\[1\]: SubgraphMatching\(k=4\) extends"):
        k([path], [path, clique])
    with pytest.raises(ValueError, match=r"^X\[2\]: SubgraphMatching\(k=4\) extends"):
        k([path, path, clique])


@requires_device
def test_on_device_equals_cpu(mutag, dev):
    graphs = mutag[:30]
    for k in (HadamardCode(), SubgraphMatching(k=4, edge_labels=True, normalize=True)):
        ref = k(graphs).to_dense()
        out = k([g.to(dev) for g in graphs]).to_dense()
        assert out.device.type == dev.type
        torch.testing.assert_close(out.cpu(), ref, rtol=1e-13, atol=1e-13)
