"""PyramidMatch's node embeddings by the d-eigenvector route (tridiagonal reduction,
bisection, inverse iteration: ``_largest_modulus_tridiagonal``) against NumPy's full
dense eigendecomposition, its tie rule on a spectrum built for a tie, its fallback, and
the kernel through that route against GraKeL 0.1.11 on MUTAG."""
import os

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

import torchkern.graphs.pyramid_match as pm
from tests.graphs.test_grakel_part_b import DATA, to_grakel, well_conditioned
from torchkern._threads import one_thread
from torchkern.datasets import read_tu
from torchkern.graphs import GraphSet, PyramidMatch
from torchkern.graphs._labels import SparseFeatureKernelMatrix

from grakel import kernels as gk  # noqa: E402  (test extra)


@pytest.fixture(autouse=True)
def one_blas_and_torch_thread():
    """One BLAS and one torch thread, as PyramidMatch runs these steps (many small
    LAPACK calls: on a busy 2-core machine a second thread only waits)."""
    with pm._one_blas_thread(), one_thread():
        yield


def adjacency(n, edges):
    A = np.zeros((n, n))
    for s, t in edges:
        A[s, t] = A[t, s] = 1
    return A


def er(rng, n, p):
    A = np.triu(rng.random((n, n)) < p, 1).astype(float)
    return A + A.T


def union(*mats):
    n = sum(len(a) for a in mats)
    out, i = np.zeros((n, n)), 0
    for a in mats:
        out[i:i + len(a), i:i + len(a)] = a
        i += len(a)
    return out


def sample_matrices():
    """Random graphs of 41–90 nodes: sparse and denser ones, some with isolated nodes or
    several components (the tridiagonal splits, reflectors with τ = 0), two copies of
    one graph (every eigenvalue repeated, also the largest), no edge, a star."""
    rng = np.random.default_rng(7)
    out = [er(rng, int(rng.integers(41, 90)), p) for p in (0.04, 0.06, 0.1, 0.3) for _ in range(3)]
    out.append(union(er(rng, 30, 0.15), np.zeros((12, 12))))
    g = er(rng, 25, 0.2)
    out.append(union(g, g))
    out.append(union(g, er(rng, 20, 0.2), g))
    out.append(np.zeros((45, 45)))  # no edge: T = 0, every eigenvalue 0
    out.append(adjacency(50, [(0, i) for i in range(1, 50)]))  # star: ±7, then 48 zeros
    return out


def reference(A, d):
    """(λ, U, unique): NumPy's eigh, the d eigenvalues of largest modulus (decreasing)
    and their eigenvectors; ``unique`` when every chosen eigenvalue is 10⁻⁶ from every
    other eigenvalue and the d-th modulus 10⁻⁶ above the next."""
    lam, V = np.linalg.eigh(A)
    top = np.argsort(-np.abs(lam), kind="stable")
    mod = np.abs(lam[top])
    sel = top[:d][np.argsort(-lam[top[:d]], kind="stable")]
    gaps = np.abs(lam[sel][:, None] - lam[None, :])
    gaps[np.arange(d), sel] = np.inf
    unique = gaps.min() > 1e-6 and mod[d - 1] - mod[d] > 1e-6
    return lam[sel], V[:, sel], unique


@pytest.mark.parametrize("coarse", [pm._COARSE, 10.0])  # 10: every graph refines all 2d
@pytest.mark.parametrize("d", [1, 3, 6])
def test_tridiagonal_route_equals_dense_eigh(monkeypatch, coarse, d):
    monkeypatch.setattr(pm, "_COARSE", coarse)
    n_unique = n_repeated = 0
    for A in sample_matrices():
        lam_ref, V_ref, unique = reference(A, d)
        w, U = pm._largest_modulus_tridiagonal(A.copy(), d)
        np.testing.assert_allclose(w, lam_ref, rtol=0, atol=1e-12)
        if unique:  # the same |u| as the full decomposition
            np.testing.assert_allclose(np.abs(U), np.abs(V_ref), rtol=0, atol=1e-12)
            n_unique += 1
        else:  # any orthonormal eigenbasis is an answer
            np.testing.assert_allclose(U.T @ U, np.eye(d), rtol=0, atol=1e-12)
            np.testing.assert_allclose(A @ U, U * w, rtol=0, atol=1e-12)
            n_repeated += 1
    assert n_unique >= 10 and n_repeated >= 4


@pytest.mark.parametrize("d", [3, 5])
def test_path_modulus_tie_goes_to_the_negative_eigenvalue(d):
    """A path of n nodes has eigenvalues 2 cos(πj/(n + 1)), in ± pairs (bipartite): with
    d odd the d-th modulus ties, and the tie goes to the smaller (negative) eigenvalue.
    The pairs' |u| agree (bipartite: u₋ = S u₊ with S = ±1 on the two sides)."""
    n = 60
    A = adjacency(n, [(i, i + 1) for i in range(n - 1)])
    pos = 2 * np.cos(np.pi * np.arange(1, d // 2 + 2) / (n + 1))  # the (d + 1) // 2 largest
    expected = np.sort(np.r_[pos[:d // 2], -pos[:d // 2 + 1]])[::-1]
    w, U = pm._largest_modulus_tridiagonal(A.copy(), d)
    np.testing.assert_allclose(w, expected, rtol=0, atol=1e-12)
    lam, V = np.linalg.eigh(A)
    for q in range(d):
        v = V[:, np.argmin(np.abs(lam - w[q]))]
        np.testing.assert_allclose(np.abs(U[:, q]), np.abs(v), rtol=0, atol=1e-12)


@pytest.mark.parametrize("min_n", [0, 10 ** 9])  # the tridiagonal route, the full eigh
def test_embedding_tie_rule_on_both_routes(monkeypatch, min_n):
    """C₅ (eigenvalues 2, 0.618², −1.618²) beside a 5-node graph Y with spectrum
    −2, −1.170, 0, 0.689, 2.481 (and isolated nodes): for d = 2 the second modulus ties
    between C₅'s 2 and Y's −2; the tie goes to −2, whose eigenvector lives on Y."""
    monkeypatch.setattr(pm, "_TRIDIAGONAL_MIN_N", min_n)
    c5 = [(i, (i + 1) % 5) for i in range(5)]
    y = [(5 + s, 5 + t) for s, t in [(0, 1), (0, 3), (0, 4), (1, 2), (2, 3), (3, 4)]]
    n = 14
    ei = torch.tensor(c5 + y).T
    g = Data(edge_index=torch.cat([ei, ei.flip(0)], 1), num_nodes=n)
    U = pm.node_embeddings(GraphSet([g]), 2).numpy()
    Ay = adjacency(5, [(0, 1), (0, 3), (0, 4), (1, 2), (2, 3), (3, 4)])
    lam, V = np.linalg.eigh(Ay)
    np.testing.assert_allclose(lam[[0, -1]], [-2, 2.4811943040920157], atol=1e-12)
    expected = np.zeros((n, 2))
    expected[5:10] = np.abs(V[:, [-1, 0]])  # 2.481, then −2
    np.testing.assert_allclose(U, expected, rtol=0, atol=1e-12)


def test_lapack_failure_falls_back_to_eigh(monkeypatch):
    graphs = []
    for A in sample_matrices()[:6]:
        s, t = np.nonzero(A)
        graphs.append(Data(edge_index=torch.as_tensor(np.stack([s, t])), num_nodes=len(A)))
    G = GraphSet(graphs)
    monkeypatch.setattr(pm, "_TRIDIAGONAL_MIN_N", 10 ** 9)
    full = pm.node_embeddings(G, 4)
    monkeypatch.setattr(pm, "_TRIDIAGONAL_MIN_N", 0)
    monkeypatch.setattr(pm, "_largest_modulus_tridiagonal", lambda a, d: None)
    torch.testing.assert_close(pm.node_embeddings(G, 4), full, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("with_labels", [True, False])
def test_pyramid_match_by_the_tridiagonal_route_equals_grakel_on_mutag(monkeypatch,
                                                                        with_labels):
    """MUTAG's graphs (10–28 nodes) forced through the d-eigenvector route."""
    monkeypatch.setattr(pm, "_TRIDIAGONAL_MIN_N", 0)
    mutag = read_tu(os.path.join(DATA, "MUTAG"))
    graphs = [mutag[i] for i in well_conditioned(mutag, 6, 4) if mutag[i].num_nodes > 2 * 6]
    graphs = graphs[1::3]  # all on that route (n > 2d)
    assert len(graphs) > 35
    ref = gk.PyramidMatch(with_labels=with_labels, normalize=True).fit_transform(
        to_grakel(graphs))
    K = PyramidMatch(with_labels=with_labels, normalize=True)(graphs).to_dense().numpy()
    np.testing.assert_allclose(K, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("with_labels", [True, False])
def test_sparse_features_route_equals_grakel_on_mutag(monkeypatch, with_labels):
    """Φ as sparse √w features (the route of a set too large for int8 patterns, and of
    other devices): K(X), K(X, Y), rows of both and the transpose against GraKeL 0.1.11
    on MUTAG, and against the float64 product of the √w features."""
    monkeypatch.setattr(pm, "_PATTERN_CELLS", 0)
    mutag = read_tu(os.path.join(DATA, "MUTAG"))
    graphs = [mutag[i] for i in well_conditioned(mutag, 6, 4)][::2]
    kernel = PyramidMatch(with_labels=with_labels)
    KM = kernel(graphs)
    assert isinstance(KM, SparseFeatureKernelMatrix)
    K = KM.to_dense()
    ref = gk.PyramidMatch(with_labels=with_labels).fit_transform(to_grakel(graphs))
    np.testing.assert_allclose(K.numpy(), ref, rtol=0, atol=1e-10)
    r, c, v, p = kernel._entries(kernel.check_input(graphs, "X"))
    phi = torch.zeros(len(graphs), p, dtype=torch.float64).index_put_((r, c), v, accumulate=True)
    torch.testing.assert_close(K, phi @ phi.T, rtol=1e-15, atol=1e-12)
    idx = torch.tensor([5, 0, 41])
    # (float64 sums in another order than the whole product's: rounding only)
    torch.testing.assert_close(KM.rows(idx), K[idx], rtol=0, atol=1e-12)
    KXY = kernel(graphs[:30], graphs[30:])
    assert isinstance(KXY, SparseFeatureKernelMatrix)
    torch.testing.assert_close(KXY.to_dense(), K[:30, 30:], rtol=0, atol=1e-12)
    torch.testing.assert_close(KXY.T.rows(idx), K[30:][idx, :30], rtol=0, atol=1e-12)
    ref = gk.PyramidMatch(with_labels=with_labels, normalize=True).fit_transform(
        to_grakel(graphs))
    np.testing.assert_allclose(PyramidMatch(with_labels=with_labels, normalize=True)(
        graphs).to_dense().numpy(), ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("with_labels, L", [(True, 4), (False, 4), (False, 14)])
def test_int8_patterns_equal_grakel_on_mutag(with_labels, L):
    """Φ as int8 0/1 patterns, one product per level weight (``_PatternMatrix``), the
    route of sets on the CPU: K, the normalized K against GraKeL 0.1.11 on MUTAG; K(X, Y),
    rows, the transpose, the diagonal and K @ V against the float64 √w features.
    L = 14: more cells than features, numbered as seen (the levels' column bounds
    found among them)."""
    mutag = read_tu(os.path.join(DATA, "MUTAG"))
    graphs = [mutag[i] for i in well_conditioned(mutag, 6, L)][::3]
    kernel = PyramidMatch(with_labels=with_labels, L=L)
    KM = kernel(graphs)
    assert isinstance(KM, pm._PatternMatrix)
    K = KM.to_dense()
    ref = gk.PyramidMatch(with_labels=with_labels, L=L).fit_transform(to_grakel(graphs))
    np.testing.assert_allclose(K.numpy(), ref, rtol=0, atol=1e-10)
    ref = gk.PyramidMatch(with_labels=with_labels, L=L, normalize=True).fit_transform(
        to_grakel(graphs))
    np.testing.assert_allclose(PyramidMatch(with_labels=with_labels, L=L, normalize=True)(
        graphs).to_dense().numpy(), ref, rtol=0, atol=1e-12)
    r, c, v, p = kernel._entries(kernel.check_input(graphs, "X"))
    phi = torch.zeros(len(graphs), p, dtype=torch.float64).index_put_((r, c), v, accumulate=True)
    torch.testing.assert_close(K, phi @ phi.T, rtol=1e-15, atol=1e-12)
    idx = torch.tensor([5, 0, 21])
    torch.testing.assert_close(KM.rows(idx), K[idx], rtol=0, atol=0)
    torch.testing.assert_close(KM.diag(), K.diagonal(), rtol=0, atol=0)
    V = torch.randn(len(graphs), 3, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(KM @ V, K @ V, rtol=1e-12, atol=1e-10)
    KXY = kernel(graphs[:20], graphs[20:])
    assert isinstance(KXY, pm._PatternMatrix) and KXY.shape == (20, len(graphs) - 20)
    torch.testing.assert_close(KXY.to_dense(), K[:20, 20:], rtol=0, atol=1e-12)
    torch.testing.assert_close(KXY.T.rows(idx), K[20:][idx, :20], rtol=0, atol=1e-12)
    torch.testing.assert_close(KXY.diag(), K[:20, 20:].diagonal(), rtol=0, atol=1e-12)


def test_embeddings_do_not_depend_on_the_place_in_the_batch():
    # a graph of 5 nodes with the eigenvalue -1 twice (its eigenvectors: any basis of a
    # plane): batched at odd places, LAPACK's rounding (by alignment) picked another basis
    # than at even places, so k(X) and k(X, X) differed (by 2.5 on 16 small graphs)
    edges = [(0, 2), (0, 3), (0, 4), (1, 4), (2, 3), (2, 4), (3, 4)]
    A = adjacency(5, edges)
    lam = np.linalg.eigvalsh(A)
    assert np.sum(np.abs(lam + 1) < 1e-12) == 2  # the repeated eigenvalue
    ei = torch.tensor(edges).T
    g = Data(edge_index=torch.cat([ei, ei.flip(0)], 1), num_nodes=5)
    E = pm.node_embeddings(GraphSet([g] * 5), 4).view(5, 5, 4)
    for i in range(1, 5):
        assert torch.equal(E[i], E[0])
    # |u| is an orthonormal eigenbasis's, up to signs: against NumPy's spectrum
    U = pm._batched_eigh(torch.as_tensor(A)[None])[1][0].numpy()
    np.testing.assert_allclose(U.T @ A @ U, np.diag(lam), atol=1e-12)
    k = PyramidMatch(L=2, d=4)
    others = [Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=3), g, g]
    X = [g] + others
    torch.testing.assert_close(k(X).to_dense(), k(X, X).to_dense(), rtol=0, atol=0)
