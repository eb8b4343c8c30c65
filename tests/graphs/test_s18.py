"""Session 18: GraphletSampling on 5 to 7 nodes, Propagation's random_state=None, the
empty graph in MultiscaleLaplacian, PropagationAttr's overflowing hash."""
import itertools
import math
import warnings

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from tests.graphs.test_graph_kernels import adjacency, random_graphs
from torchkern.graphs import GraphletSampling

import grakel  # noqa: E402  (the test extra installs it: never skipped)


# -- graphlets on k = 5 to 7 nodes ---------------------------------------------------------

def _bits(k):
    return list(itertools.combinations(range(k), 2))


def _canonical_codes(k):
    """The smallest adjacency code over the k! node permutations, for every code (bit b
    the b-th pair i < j): brute force, independent of graphlet_classes' propagation."""
    pairs = _bits(k)
    index = {p: b for b, p in enumerate(pairs)}
    perm_bits = [[index[tuple(sorted((p[u], p[v])))] for (u, v) in pairs]
                 for p in itertools.permutations(range(k))]
    codes = np.arange(2 ** len(pairs))
    best = np.full(codes.size, codes.size)
    for pb in perm_bits:
        moved = np.zeros_like(codes)
        for b, nb in enumerate(pb):
            moved |= (codes >> b & 1) << nb
        best = np.minimum(best, moved)
    return best


def _graph(code, k):
    e = [p for b, p in enumerate(_bits(k)) if code >> b & 1]
    ei = torch.tensor([[u for u, v in e] + [v for u, v in e],
                       [v for u, v in e] + [u for u, v in e]], dtype=torch.long).reshape(2, -1)
    return Data(edge_index=ei, num_nodes=k)


def _column_of_class(kern, k, canon):
    """torchkern's column of every isomorphism class: the one nonzero of φ of the class's
    smallest-code graph on k nodes."""
    reps = sorted(set(canon.tolist()))
    phi = kern.features([_graph(c, k) for c in reps]).numpy()
    assert np.all(phi.sum(1) == 1) and np.all((phi == 0) | (phi == 1))
    return {c: int(col) for c, col in zip(reps, phi.argmax(1))}


def _code(A, S):
    return sum(int(A[S[u], S[v]]) << b for b, (u, v) in enumerate(_bits(len(S))))


def test_five_node_graphlets_equal_enumeration_and_sampling():
    canon = _canonical_codes(5)
    kern = GraphletSampling(5, n_samples=None)
    col = _column_of_class(kern, 5, canon)
    assert len(col) == 34 and sorted(col.values()) == list(range(34))  # a bijection
    X = random_graphs(6, 5, 9, 0.45, 1, seed=8, isolated=1)
    X.append(Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=4))  # < 5 nodes: φ = 0
    ref = np.zeros((len(X), 34))
    for g, d in enumerate(X):
        A = adjacency(d)
        A = ((A + A.T) > 0).astype(int)
        for S in itertools.combinations(range(d.num_nodes), 5):
            ref[g, col[int(canon[_code(A, S)])]] += 1
        ref[g] /= max(math.comb(d.num_nodes, 5), 1)
    np.testing.assert_allclose(kern.features(X).numpy(), ref, rtol=1e-12, atol=1e-15)
    # Hoeffding: with 20000 samples each frequency is within 0.02 with probability
    # > 1 − 2e-6 (seed fixed)
    sampled = GraphletSampling(5, n_samples=20000, random_state=0).features(X).numpy()
    np.testing.assert_allclose(sampled, ref, atol=0.02)
    np.testing.assert_allclose(sampled.sum(1), [1.0] * 6 + [0.0])


def test_six_node_graphlet_classes_are_isomorphism_classes():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 2 ** 15, 30).tolist()
    perms = list(itertools.permutations(range(6)))
    pairs = _bits(6)
    index = {p: b for b, p in enumerate(pairs)}

    def canon(c):
        return min(sum((c >> b & 1) << index[tuple(sorted((p[u], p[v])))]
                       for b, (u, v) in enumerate(pairs)) for p in perms)

    # each code beside a random relabeling of itself: same class, and classes equal
    # exactly when the brute-force canonical forms are
    relabeled = []
    for c in codes:
        p = rng.permutation(6)
        relabeled.append(sum((c >> b & 1) << index[tuple(sorted((p[u], p[v])))]
                             for b, (u, v) in enumerate(pairs)))
    phi = GraphletSampling(6, n_samples=None).features([_graph(c, 6) for c in codes + relabeled])
    assert phi.shape[1] == 156
    cols = phi.argmax(1).tolist()
    assert cols[:30] == cols[30:]
    forms = [canon(c) for c in codes]
    for i, j in itertools.combinations(range(30), 2):
        assert (cols[i] == cols[j]) == (forms[i] == forms[j])


def test_graphlet_class_counts_and_k_range():
    from torchkern.graphs.graphlet import graphlet_classes
    # the numbers of graphs on 3..7 nodes (OEIS A000088)
    assert [graphlet_classes(k)[1] for k in (3, 4, 5, 6, 7)] == [4, 11, 34, 156, 1044]
    for bad in (2, 8, 5.0, True):
        with pytest.raises(ValueError, match="k must be an int from 3 to 7"):
            GraphletSampling(k=bad)


def test_five_node_graphlets_match_grakel_on_connected_five_node_graphs():
    # GraKeL's sampling=None enumerates the connected 5-subsets (its ConSubg misses some on
    # larger graphs, and a class's first subgraph counts twice in later graphs: see
    # docs/graphs.md); on connected 5-node graphs the one subset is the graph itself, and
    # the normalized Gram is 1 for isomorphic graphs, 0 otherwise, in both (where
    # GraKeL's enumeration finds that subset).
    from grakel.kernels.graphlet_sampling import sample_graphlets_all_connected
    canon = _canonical_codes(5)
    rng = np.random.default_rng(1)
    graphs, n_connected = [], 0
    for c in sorted(set(canon.tolist())):
        d = _graph(c, 5)
        A = adjacency(d)
        reach = np.linalg.matrix_power(A + np.eye(5), 4) > 0
        if not reach.all():  # not connected
            continue
        n_connected += 1
        p = torch.as_tensor(rng.permutation(5))
        for e in (d, Data(edge_index=p[d.edge_index], num_nodes=5)):
            if sum(1 for _ in sample_graphlets_all_connected(adjacency(e).astype(int), 5)):
                graphs.append(e)  # GraKeL's enumeration finds the subset
    assert n_connected == 21  # the connected graphs on 5 nodes
    assert len(graphs) >= 30
    gk = grakel.GraphletSampling(k=5, normalize=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Kg = gk.fit_transform([grakel.Graph(adjacency(d).astype(int)) for d in graphs])
    K = GraphletSampling(5, n_samples=None, normalize=True)(graphs).to_dense().numpy()
    np.testing.assert_allclose(K, Kg, atol=1e-12)


# -- Propagation(random_state=None) --------------------------------------------------------

def _labelled(seed, attributes=False):
    X = random_graphs(8, 4, 8, 0.4, 3, seed=seed)
    if attributes:
        g = torch.Generator().manual_seed(seed)
        for d in X:
            d.node_attributes = torch.randn(d.num_nodes, 2, generator=g, dtype=torch.float64)
    return X


@pytest.mark.parametrize("kind", ["labels", "grakel_draws", "attributes"])
def test_propagation_random_state_none_draws_once_per_object(kind):
    from torchkern.graphs import Propagation, PropagationAttr

    def make():
        if kind == "attributes":
            return PropagationAttr(t_max=3, w=0.5, random_state=None)
        return Propagation(t_max=3, w=1e-3, random_state=None,
                           n_labels=3 if kind == "grakel_draws" else None)

    X = _labelled(3, kind == "attributes")
    A, B = X[:5], X[5:]
    np.random.seed(0)
    k = make()
    K = k(X).to_dense()
    # one object: every call uses the same draws (a fitted model predicts with them)
    torch.testing.assert_close(k(A, B).to_dense(), K[:5, 5:], rtol=0, atol=0)
    torch.testing.assert_close(k(B).to_dense(), K[5:, 5:], rtol=0, atol=0)
    assert torch.linalg.eigvalsh(K.double()).min() > -1e-9 * K.abs().max()
    # the seed comes from NumPy's global generator: reseeding reproduces it...
    np.random.seed(0)
    torch.testing.assert_close(make()(X).to_dense(), K, rtol=0, atol=0)
    # ...and a new object draws anew
    Ks = [make()(X).to_dense() for _ in range(3)]
    assert any(not torch.equal(Ki, K) for Ki in Ks)
