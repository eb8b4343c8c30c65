"""SVM-θ on large graphs: λ_min(A) from the batched Lanczos iteration (certified, with the
dense fallback), against dense eigvalsh, and α and the features against GraKeL 0.1.11
and against the dense path bit for bit."""

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from torchkern.graphs import GraphSet, SVMTheta
from torchkern.graphs import theta as theta_mod
from torchkern.graphs.theta import (_edge_pairs, _lambda_min_lanczos, _svm_theta_alphas_all,
                                    svm_theta_alphas)

from tests.graphs.test_theta import graph_draws_reference

from grakel import kernels as gk  # noqa: E402  (the test extra installs it: never skipped)
from grakel.kernels.svm_theta import _calculate_svm_theta_  # noqa: E402


def er_pairs(seed, n, degree=4.0):
    """(n, pairs a < b) of an Erdős–Rényi graph of average degree ``degree``."""
    rng = np.random.default_rng(seed)
    iu = np.triu_indices(n, 1)
    keep = rng.random(len(iu[0])) < degree / (n - 1)
    return n, np.stack([iu[0][keep], iu[1][keep]], 1).astype(np.int64)


def union(*graphs):
    """The disjoint union of (n, pairs) graphs."""
    off, pairs = 0, []
    for n, e in graphs:
        pairs.append(e + off)
        off += n
    return off, np.concatenate(pairs)


def dense(n, e):
    A = np.zeros((n, n))
    A[e[:, 0], e[:, 1]] = A[e[:, 1], e[:, 0]] = 1.0
    return A


def data(n, e):
    return Data(edge_index=torch.as_tensor(np.concatenate([e, e[:, ::-1]]).T.copy()),
                num_nodes=n)


@pytest.fixture(scope="module")
def graphs():
    """Graphs of 60–160 nodes: connected and not, isolated nodes, repeated λ_min
    (disjoint copies of one graph), bipartite (a cycle, a grid), no edge."""
    g = [er_pairs(s, n) for s, n in enumerate([150, 149, 120, 100, 60])]
    g.append(union(er_pairs(7, 50), er_pairs(8, 70), (30, np.zeros((0, 2), np.int64))))
    g.append(union(*[er_pairs(9, 50)] * 3))  # λ_min three times
    g.append((150, np.array([(i, (i + 1) % 150) for i in range(150)])))  # C_150: −2
    grid = [(10 * r + c, 10 * r + c + 1) for r in range(15) for c in range(9)] + \
        [(10 * r + c, 10 * r + c + 10) for r in range(14) for c in range(10)]
    g.append((150, np.array(grid)))
    g.append((80, np.zeros((0, 2), np.int64)))
    return g


def test_lanczos_lambda_min_equals_dense_eigvalsh(graphs):
    lam, ok = _lambda_min_lanczos(graphs)
    ref = np.array([np.linalg.eigvalsh(dense(n, e))[0] for n, e in graphs])
    assert ok.all()
    err = np.abs(lam - ref) / np.maximum(1.0, np.abs(ref))
    assert err.max() <= 1e-12, err  # measured: at most 4.5e-15
    # the grid is P_15 □ P_10 (eigenvalues of P_m: 2cos(πj/(m + 1))), C_150's is −2
    assert abs(lam[8] - 2 * (np.cos(15 * np.pi / 16) + np.cos(10 * np.pi / 11))) <= 1e-12
    assert abs(lam[7] + 2) <= 1e-12


def test_lanczos_gives_up_and_the_dense_fallback_answers(graphs, monkeypatch):
    # too few steps to certify anything: every graph goes to the dense eigvalsh
    lam, ok = _lambda_min_lanczos(graphs, max_iter=5)
    assert not ok[:-1].any()  # (the graph without edges is exact after one step)
    calls = []
    dense_eig = theta_mod.torch.linalg.eigvalsh

    def counted(A):
        calls.append(A.shape)
        return dense_eig(A)

    monkeypatch.setattr(theta_mod.torch.linalg, "eigvalsh", counted)
    few = _svm_theta_alphas_all(graphs, lanczos_max_iter=5)
    assert sum(s[0] if len(s) == 3 else 1 for s in calls) == len(graphs) - 1
    monkeypatch.undo()
    ref = _svm_theta_alphas_all(graphs, lanczos_min_n=10 ** 9)  # all dense
    assert all(np.array_equal(a, b) for a, b in zip(few, ref))


def test_alphas_bit_identical_to_dense_path_and_grakel(graphs):
    ours = _svm_theta_alphas_all(graphs)
    via_dense = _svm_theta_alphas_all(graphs, lanczos_min_n=10 ** 9)
    assert all(np.array_equal(a, b) for a, b in zip(ours, via_dense))
    for (n, e), a in zip(graphs[::2], ours[::2]):
        assert np.array_equal(a, _calculate_svm_theta_(dense(n, e)))


def test_near_rounding_tie_takes_grakels_eigenvalue_call(monkeypatch):
    # this graph's 1/ρ is 6e-12 (relative) from a float32 rounding tie: λ_min is taken
    # again from GraKeL's own LAPACK call, whichever path gave it first
    n, e = er_pairs(915, 60)
    calls = []
    scipy_eig = theta_mod.eigvalsh

    def counted(*args, **kw):
        calls.append(1)
        return scipy_eig(*args, **kw)

    monkeypatch.setattr(theta_mod, "eigvalsh", counted)
    (a,) = _svm_theta_alphas_all([(n, e)])
    assert calls == [1]
    assert np.array_equal(a, _calculate_svm_theta_(dense(n, e)))


def test_svm_theta_features_on_large_graphs_are_grakels():
    graphs = [data(*er_pairs(20 + i, n)) for i, n in enumerate([40, 55, 90, 130, 70, 110])]
    adj = [[dense(d.num_nodes, _edge_pairs(GraphSet([d]))[0][1])] for d in graphs]
    ref = gk.SvmTheta(random_state=3, n_samples=20).fit(adj).X
    f = SVMTheta(random_state=3, n_samples=20, draws="grakel").features(graphs).numpy()
    assert np.array_equal(f, np.hstack(ref).T)


def test_edge_pairs_one_direction_duplicates_and_loops():
    # edges given in one direction only, both, twice, and self-loops: the undirected
    # simple graph, against a brute-force set
    rng = np.random.default_rng(5)
    ds, want = [], []
    for n in (7, 1, 12, 9):
        s, t = rng.integers(0, n, (2, 3 * n))
        ds.append(Data(edge_index=torch.as_tensor(np.stack([s, t])), num_nodes=n))
        want.append(sorted({(min(a, b), max(a, b)) for a, b in zip(s, t) if a != b}))
    for (n, p), d, w in zip(_edge_pairs(GraphSet(ds)), ds, want):
        assert n == d.num_nodes and p.tolist() == [list(x) for x in w]


def test_public_alphas_with_repeated_reversed_pairs_and_a_loop():
    # svm_theta_alphas takes any pairs: on the Lanczos path (60 nodes) and the dense
    # one, repeated and reversed pairs count once and a self-loop not at all (GraKeL
    # zeroes the diagonal of the adjacency it is given)
    n, e = er_pairs(31, 60)
    messy = np.concatenate([e, e[:7, ::-1], e[3:9], [[5, 5]]])
    A = dense(n, e)
    A[5, 5] = 1.0
    ref = _calculate_svm_theta_(A)
    assert np.array_equal(svm_theta_alphas(n, messy), ref)
    assert np.array_equal(_svm_theta_alphas_all([(n, messy)], lanczos_min_n=10 ** 9)[0], ref)


def test_svm_theta_graph_draws_small_and_large_graphs():
    # draws="graph" on graphs of 12 to 90 nodes, written out with NumPy's
    # RandomState([seed, n, crc32(edges)]).choice per subset and GraKeL's α
    graphs = [data(*er_pairs(50 + i, n)) for i, n in enumerate([12, 60, 40, 41, 90])]
    lo, hi, S, seed = 2, 6, 15, 5
    f = SVMTheta(n_samples=S, subsets_size_range=(lo, hi), random_state=seed).features(graphs)
    assert np.array_equal(f.numpy(), graph_draws_reference(graphs, lo, hi, S, seed))


def test_small_graphs_shared_draws_are_grakels():
    # draws="grakel" on small graphs (one stream for the set): GraKeL's features
    graphs = [data(*er_pairs(70 + i, n)) for i, n in enumerate([12, 30, 9, 25, 18])]
    adj = [[dense(d.num_nodes, _edge_pairs(GraphSet([d]))[0][1])] for d in graphs]
    ref = gk.SvmTheta(random_state=8, n_samples=20).fit(adj).X
    f = SVMTheta(random_state=8, n_samples=20, draws="grakel").features(graphs).numpy()
    assert np.array_equal(f, np.hstack(ref).T)


def test_lanczos_looks_back_past_a_ghost(monkeypatch):
    # checked late, long after θ₁ converged, a rounding copy of θ₁ closes the gap: the
    # certificate comes from an earlier step's tridiagonal (not the dense fallback)
    n, e = union(*[er_pairs(9, 50)] * 3)
    monkeypatch.setattr(theta_mod, "_LANCZOS_FIRST_CHECK", 70)
    steps, ritz = [], theta_mod._ritz_min

    def logged(d, b, tol):
        steps.append(len(d))
        return ritz(d, b, tol)

    monkeypatch.setattr(theta_mod, "_ritz_min", logged)
    lam, ok = _lambda_min_lanczos([(n, e)])
    assert ok[0] and steps[0] == 70 and min(steps) < 70
    assert abs(lam[0] - np.linalg.eigvalsh(dense(n, e))[0]) <= 1e-12 * abs(lam[0])
