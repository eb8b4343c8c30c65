"""Kernels on the nodes of one graph, against closed forms and dense linear algebra
(numpy inv / pinv / eigh, scipy expm and csgraph Laplacians), on both methods."""
import json
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.linalg as sl
import torch
from scipy.sparse.csgraph import laplacian as csgraph_laplacian

from torchkern.graphs import (CommuteTime, DiffusionKernel, NodeSet, PStepRandomWalk,
                              RegularizedLaplacian)
from torchkern.linalg import ConvergenceWarning

METHODS = ["dense", "krylov"]

# The 5-node tree with edges 1–3, 2–3, 3–4, 4–5 (0-based below).
TREE = (torch.tensor([[0, 1, 2, 3], [2, 2, 3, 4]]), 5)


def _random_graph(n, avg_degree, seed, weighted=True, isolated=0):
    """Edges listed once each (u < v), optionally weighted; the last ``isolated`` nodes
    get no edge. Returns ((edge_index, n, weight), dense W as numpy)."""
    rng = np.random.default_rng(seed)
    m = n - isolated
    E = m * avg_degree // 2
    u, v = rng.integers(0, m, E), rng.integers(0, m, E)
    keep = u != v
    u, v = np.minimum(u, v)[keep], np.maximum(u, v)[keep]
    uv = np.unique(np.stack([u, v], 1), axis=0)
    w = rng.uniform(0.2, 2.0, len(uv)) if weighted else np.ones(len(uv))
    W = np.zeros((n, n))
    W[uv[:, 0], uv[:, 1]] = w
    W += W.T
    return (torch.as_tensor(uv.T.copy()), n, torch.as_tensor(w)), W


def _lap(W, normed=False):
    return csgraph_laplacian(W, normed=normed)


def _K(k, graph):
    return k(graph).to_dense().detach().numpy()


# -- exact values ----------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_tree_values_of_regularized_laplacian_and_commute_time(method):
    K = _K(RegularizedLaplacian(1.0, method=method), TREE)
    np.testing.assert_allclose(K[0], [0.60, 0.10, 0.19, 0.08, 0.04], atol=5e-3)
    P = _K(CommuteTime(method=method), TREE)
    np.testing.assert_allclose(P[0], [0.88, -0.12, 0.08, -0.32, -0.52], atol=5e-3)
    W = np.zeros((5, 5))
    W[[0, 1, 2, 3], [2, 2, 3, 4]] = 1
    L = _lap(W + W.T)
    np.testing.assert_allclose(K, np.linalg.inv(L + np.eye(5)), atol=1e-9)
    np.testing.assert_allclose(P, np.linalg.pinv(L), atol=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_diffusion_on_complete_graph_matches_closed_form(method):
    m, t = 7, 0.3
    u, v = np.triu_indices(m, 1)
    K = _K(DiffusionKernel(t, method=method), (torch.as_tensor(np.stack([u, v])), m))
    diag = (1 + (m - 1) * np.exp(-t * m)) / m
    off = (1 - np.exp(-t * m)) / m
    np.testing.assert_allclose(K, np.full((m, m), off) + (diag - off) * np.eye(m),
                               rtol=0, atol=1e-12)


def test_krylov_diffusion_matvec_equals_scipy_expm_on_2000_nodes():
    graph, W = _random_graph(2000, 6, seed=1)
    beta = 0.7
    V = torch.randn(2000, 3, dtype=torch.float64)
    K = DiffusionKernel(beta, method="krylov")(graph)
    assert K.backend == "operator"
    ref = sl.expm(-beta * _lap(W)) @ V.numpy()
    got = (K @ V).detach().numpy()
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-8)


# -- Laplacians, weights, isolated nodes ---------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_normalized_and_combinatorial_laplacians_with_isolated_nodes(method):
    graph, W = _random_graph(120, 5, seed=2, isolated=3)
    V = torch.randn(120, 2, dtype=torch.float64)
    for lap, normed in (("combinatorial", False), ("normalized", True)):
        ref = sl.expm(-1.3 * _lap(W, normed)) @ V.numpy()  # scipy: L̃_ii = 0 where isolated
        got = DiffusionKernel(1.3, laplacian=lap, method=method)(graph) @ V
        np.testing.assert_allclose(got.detach().numpy(), ref, atol=1e-9)
        R = _K(RegularizedLaplacian(0.2, laplacian=lap, method=method), graph)
        np.testing.assert_allclose(R, np.linalg.inv(_lap(W, normed) + 0.2 * np.eye(120)),
                                   atol=1e-8)
    # an isolated node does not diffuse: its row is e_i
    K = _K(DiffusionKernel(2.0, method=method), graph)
    np.testing.assert_allclose(K[-1], np.eye(120)[-1], atol=1e-12)


def test_weights_and_edge_directions():
    graph, W = _random_graph(60, 4, seed=3)
    ei, n, w = graph
    both = (torch.cat([ei, ei.flip(0)], 1), n, torch.cat([w, w]))  # PyG lists both ways
    ref = np.linalg.inv(_lap(W) + 0.5 * np.eye(n))
    for g in (graph, both):
        np.testing.assert_allclose(_K(RegularizedLaplacian(0.5), g), ref, atol=1e-10)
    # unweighted differs from weighted; self-loops change nothing
    loops = (torch.cat([ei, torch.arange(5).repeat(2, 1)], 1), n, torch.cat([w, torch.ones(5)]))
    np.testing.assert_allclose(_K(RegularizedLaplacian(0.5), loops), ref, atol=1e-10)
    unweighted = _K(RegularizedLaplacian(0.5), (ei, n))
    np.testing.assert_allclose(unweighted, np.linalg.inv(_lap((W > 0) * 1.0) + 0.5 * np.eye(n)),
                               atol=1e-10)


def test_pyg_data_with_edge_weight():
    from torch_geometric.data import Data
    graph, W = _random_graph(40, 4, seed=4)
    data = Data(edge_index=graph[0], edge_weight=graph[2], num_nodes=40)
    np.testing.assert_allclose(_K(DiffusionKernel(0.4), data), sl.expm(-0.4 * _lap(W)),
                               atol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_commute_time_on_disconnected_graph_is_the_pseudo_inverse(method):
    g1, W1 = _random_graph(30, 5, seed=5, weighted=True)
    g2, W2 = _random_graph(20, 5, seed=6, weighted=True)
    # two components plus two isolated nodes
    n = 52
    ei = torch.cat([g1[0], g2[0] + 30], 1)
    W = np.zeros((n, n))
    W[:30, :30], W[30:50, 30:50] = W1, W2
    P = _K(CommuteTime(method=method), (ei, n, torch.cat([g1[2], g2[2]])))
    np.testing.assert_allclose(P, np.linalg.pinv(_lap(W)), atol=1e-8)
    assert np.abs(P[:30, 30:]).max() < 1e-9


@pytest.mark.parametrize("method", METHODS)
def test_p_step_random_walk(method):
    graph, W = _random_graph(80, 5, seed=7, isolated=1)
    Ln = _lap(W, normed=True)
    K = _K(PStepRandomWalk(2.5, 3, method=method), graph)
    np.testing.assert_allclose(K, np.linalg.matrix_power(2.5 * np.eye(80) - Ln, 3), atol=1e-10)


# -- node-index inputs ---------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("cls", [DiffusionKernel, RegularizedLaplacian, PStepRandomWalk,
                                 CommuteTime])
def test_index_blocks_match_the_full_matrix(method, cls):
    graph, _ = _random_graph(90, 8, seed=8)
    k = cls(graph=graph, method=method)
    full = _K(k, graph)
    i = np.array([5, 0, 17, 17, 89])
    j = torch.tensor([3, 44, 5, 60])
    B = k(i[:, None], j)  # an (m, 1) column as scikit-learn passes
    assert B.shape == (5, 4)
    np.testing.assert_allclose(B.to_dense().detach().numpy(), full[np.ix_(i, j.numpy())],
                               atol=1e-9)
    v = torch.randn(4, dtype=torch.float64)
    np.testing.assert_allclose((B @ v).detach().numpy(), full[np.ix_(i, j.numpy())] @ v.numpy(),
                               atol=1e-9)
    np.testing.assert_allclose(k.diag(i).detach().numpy(), full[i, i], atol=1e-9)
    np.testing.assert_allclose(k(list(i)).rows([1, 3]).detach().numpy(),
                               full[np.ix_(i[[1, 3]], i)], atol=1e-9)


def test_node_set_protocol():
    graph, _ = _random_graph(30, 4, seed=9)
    k = DiffusionKernel(0.5, graph=graph)
    X = k.check_input(np.arange(10, 20))
    assert isinstance(X, NodeSet) and len(X) == 10 and X.shape == (10,)
    Y = X[torch.tensor([9, 0])]
    assert Y.index.tolist() == [19, 10]
    Z = NodeSet.concat([Y, X[[1]]])
    assert Z.index.tolist() == [19, 10, 11]
    np.testing.assert_allclose(k(Z).to_dense().detach().numpy(),
                               _K(k, graph)[np.ix_([19, 10, 11], [19, 10, 11])], atol=1e-12)
    X.check_compatible(Z)
    other = DiffusionKernel(0.5).check_input(_random_graph(30, 4, seed=10)[0])
    with pytest.raises(ValueError, match="another graph"):
        X.check_compatible(other)
    with pytest.raises(ValueError, match="different graphs"):
        NodeSet.concat([X, other])
    assert k(X.to(dtype=torch.float32)).dtype == torch.float32
    with pytest.raises(ValueError, match=r"index holds node index 30 outside \[0, 30\)"):
        NodeSet(graph, [0, 30])


def test_bad_inputs_name_the_argument():
    graph, _ = _random_graph(30, 4, seed=11)
    k = DiffusionKernel(1.0, graph=graph)
    with pytest.raises(ValueError, match=r"node index 30 outside \[0, 30\)"):
        k([0, 30])
    with pytest.raises(ValueError, match="node index -1"):
        k(torch.tensor([-1, 2]))
    with pytest.raises(TypeError, match="integer node indices"):
        k(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="1-D"):
        k(np.zeros((3, 2), dtype=int))
    with pytest.raises(TypeError, match="no graph"):
        DiffusionKernel(1.0)([0, 1])
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="beta must be"):
            DiffusionKernel(bad)
        with pytest.raises(ValueError, match="eps must be"):
            RegularizedLaplacian(bad)
    with pytest.raises(ValueError, match="a must be finite and >= 2"):
        PStepRandomWalk(a=1.5)
    with pytest.raises(ValueError, match="p must be a positive int"):
        PStepRandomWalk(p=0)
    with pytest.raises(ValueError, match="laplacian must be one of"):
        DiffusionKernel(1.0, laplacian="random-walk")
    with pytest.raises(ValueError, match="method must be one of"):
        CommuteTime(method="lanczos")
    with pytest.raises(ValueError, match=r"edge_index must be an integer tensor of shape "
                                         r"\(2, E\) with entries in \[0, num_nodes\); got "
                                         r"node id 5 in a graph with num_nodes=5"):
        CommuteTime()((torch.tensor([[0], [5]]), 5))
    with pytest.raises(ValueError, match="edge_weight must be finite and >= 0"):
        CommuteTime()((torch.tensor([[0], [1]]), 2, torch.tensor([-1.0])))
    with pytest.raises(ValueError, match="no nodes"):
        CommuteTime()((torch.zeros(2, 0, dtype=torch.long), 0))


# -- gradients and convergence -------------------------------------------------------

def test_hyperparameter_gradients_agree_between_methods():
    graph, W = _random_graph(100, 5, seed=12)
    idx = torch.arange(0, 100, 3)
    v = torch.randn(len(idx), dtype=torch.float64)
    for cls, name in ((DiffusionKernel, "beta"), (RegularizedLaplacian, "eps")):
        grads = []
        for method in METHODS:
            k = cls(0.8, graph=graph, method=method, tol=1e-12)
            (v @ (k(idx) @ v)).backward()
            grads.append(getattr(k, "raw_" + name).grad.item())
        # reference: d/dθ vᵀ f_θ(L) v by central differences of the dense matrix function
        L, h = _lap(W), 1e-5
        f = (lambda t: sl.expm(-t * L)) if name == "beta" else (
            lambda t: np.linalg.inv(L + t * np.eye(100)))
        s = np.zeros(100)
        np.add.at(s, idx.numpy(), v.numpy())
        dtheta = (s @ f(0.8 + h) @ s - s @ f(0.8 - h) @ s) / (2 * h)
        dsoftplus = 1 - np.exp(-0.8)  # dθ/draw at θ = softplus(raw) = 0.8
        np.testing.assert_allclose(grads, [dtheta * dsoftplus] * 2, rtol=1e-6)


def test_krylov_warns_when_it_stops_early():
    graph, _ = _random_graph(300, 8, seed=13)
    k = DiffusionKernel(50.0, method="krylov", max_iter=3)
    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        k(graph) @ torch.randn(300, dtype=torch.float64)


# -- memory on a large sparse graph --------------------------------------------------

MEMORY = textwrap.dedent("""
    import json, resource, time, numpy as np, torch
    from torchkern.graphs import DiffusionKernel, RegularizedLaplacian
    torch.set_num_threads(1)  # measures memory; on oversubscribed cores 1 thread is faster
    n = 200_000
    rng = np.random.default_rng(0)
    ei = torch.as_tensor(rng.integers(0, n, (2, 5 * n)))       # average degree ~10
    V = torch.randn(n, 2, dtype=torch.float64)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.time()
    K = DiffusionKernel(1.0)((ei, n))                            # auto: operator form
    out = (K @ V).detach()
    idx = torch.arange(0, n, 7)
    sub = RegularizedLaplacian(1.0, graph=(ei, n))(idx) @ torch.ones(len(idx), dtype=torch.float64)
    sub = sub.detach()
    growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    # an exact identity: 1ᵀ e^{-L} = 1ᵀ (L1 = 0, L symmetric)
    err = float((out.sum(0) - V.sum(0)).abs().max() / V.norm(dim=0).max())
    print(json.dumps(dict(backend=K.backend, growth_mb=growth, seconds=time.time() - t,
                          err=err, finite=bool(torch.isfinite(out).all() and
                                               torch.isfinite(sub).all()))))
""")


def test_operator_path_on_200k_nodes_stays_sparse_in_memory():
    res = subprocess.run([sys.executable, "-c", MEMORY], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert r["backend"] == "operator" and r["finite"], r
    assert r["err"] < 1e-9, r
    # the dense 200k x 200k float64 matrix is 320 GB; the sparse Laplacian ~35 MB
    assert r["growth_mb"] < 500, r


# -- estimators on node indices ------------------------------------------------------

def _two_communities(n_per=40, seed=14):
    """A stochastic block model: dense inside two blocks, sparse across."""
    rng = np.random.default_rng(seed)
    n = 2 * n_per
    block = np.repeat([0, 1], n_per)
    p = np.where(block[:, None] == block[None, :], 0.25, 0.02)
    A = np.triu(rng.random((n, n)) < p, 1)
    u, v = np.nonzero(A)
    W = np.zeros((n, n))
    W[u, v] = 1
    return (torch.as_tensor(np.stack([u, v])), n), W + W.T, block


@pytest.mark.parametrize("method", METHODS)
def test_kernel_ridge_on_node_indices_matches_sklearn(method):
    from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
    from torchkern import KernelRidge
    graph, W, block = _two_communities()
    y = np.where(block == 1, 1.0, -1.0) + 0.1 * np.random.default_rng(0).standard_normal(len(block))
    train = np.arange(0, 80, 4)
    test = np.setdiff1d(np.arange(80), train)
    k = DiffusionKernel(0.5, graph=graph, method=method)
    model = KernelRidge(kernel=k, alpha=0.1).fit(train, torch.as_tensor(y[train]))
    pred = np.asarray(model.predict(test[:, None]))  # NumPy in, NumPy out
    K = sl.expm(-0.5 * _lap(W))
    ref = SkKernelRidge(kernel="precomputed", alpha=0.1).fit(K[np.ix_(train, train)], y[train])
    np.testing.assert_allclose(pred, ref.predict(K[np.ix_(test, train)]), atol=1e-7)
    assert (np.sign(pred) == np.where(block[test] == 1, 1, -1)).mean() > 0.9


def test_svc_on_node_indices_matches_sklearn():
    from sklearn.svm import SVC as SkSVC
    from torchkern import SVC
    graph, W, block = _two_communities()
    train = np.arange(0, 80, 3)
    test = np.setdiff1d(np.arange(80), train)
    k = RegularizedLaplacian(0.5, graph=graph)
    ours = SVC(kernel=k, C=2.0, tol=1e-6).fit(torch.as_tensor(train), block[train])
    K = np.linalg.inv(_lap(W) + 0.5 * np.eye(80))
    ref = SkSVC(kernel="precomputed", C=2.0, tol=1e-6).fit(K[np.ix_(train, train)], block[train])
    np.testing.assert_allclose(np.asarray(ours.decision_function(test)),
                               ref.decision_function(K[np.ix_(test, train)]), atol=1e-3)


def test_spectral_clustering_of_nodes_finds_the_communities():
    from sklearn.metrics import adjusted_rand_score
    from torchkern import SpectralClustering
    graph, _, block = _two_communities()
    model = SpectralClustering(kernel=DiffusionKernel(1.0, graph=graph), n_clusters=2,
                               random_state=0).fit(np.arange(80))
    assert adjusted_rand_score(block, np.asarray(model.labels_)) == 1.0


def test_grid_search_over_beta_on_node_indices():
    from sklearn.model_selection import GridSearchCV, KFold
    from torchkern import KernelRidge
    graph, W, block = _two_communities()
    y = np.where(block == 1, 1.0, -1.0)
    X = np.arange(80)[:, None]
    grid = GridSearchCV(KernelRidge(kernel=DiffusionKernel(1.0, graph=graph), alpha=0.1),
                        {"kernel__beta": [0.05, 1.0]}, cv=KFold(4, shuffle=True, random_state=0),
                        scoring="neg_mean_squared_error").fit(X, y)
    # reference: the same folds scored with sklearn's KernelRidge on precomputed blocks
    from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
    for i, beta in enumerate([0.05, 1.0]):
        K = sl.expm(-beta * _lap(W))
        errs = []
        for tr, te in KFold(4, shuffle=True, random_state=0).split(X):
            ref = SkKernelRidge(kernel="precomputed", alpha=0.1).fit(K[np.ix_(tr, tr)], y[tr])
            errs.append(-np.mean((ref.predict(K[np.ix_(te, tr)]) - y[te]) ** 2))
        np.testing.assert_allclose(grid.cv_results_["mean_test_score"][i], np.mean(errs),
                                   rtol=1e-6)
