"""SVM-θ's fast paths: the subset draws (all S permutations of a graph from one
``Generator.permuted`` call) against NumPy's ``RandomState.shuffle`` row by row and
against GraKeL, with the row-by-row fallback; λ_min certified to the accuracy α needs,
against dense eigvalsh and GraKeL."""

import numpy as np
import pytest

from torchkern.graphs import SVMTheta
from torchkern.graphs import theta as theta_mod

from tests.graphs.test_theta import graph_draws_reference
from torchkern.graphs.theta import _lambda_min_lanczos, _svm_theta_alphas_all

from tests.graphs.test_theta_lanczos import data, dense, er_pairs

from grakel import kernels as gk  # noqa: E402  (the test extra installs it: never skipped)
from grakel.kernels.svm_theta import _calculate_svm_theta_  # noqa: E402


@pytest.fixture
def graphs():
    g = [data(*er_pairs(90 + i, n)) for i, n in enumerate([12, 60, 9, 31, 64, 18])]
    return g[:4] + [data(1, np.zeros((0, 2), np.int64))] + g[4:]  # one node: φ = 0


@pytest.mark.parametrize("n", [2, 7, 33, 100, 257])
def test_permuted_rows_are_legacy_shuffles(n):
    # the fact the fast path rests on, on this NumPy: one permuted call = S shuffles
    bits = np.random.MT19937()
    np.random.RandomState(bits).seed([11, n])
    ref = np.random.RandomState([11, n])
    X = np.tile(np.arange(n, dtype=np.int64), (9, 1))
    Y = X.copy()
    for row in X:
        ref.shuffle(row)
    np.random.Generator(bits).permuted(Y, axis=1, out=Y)
    assert np.array_equal(X, Y)
    assert theta_mod._permuted_is_legacy()


def test_permuted_check_rejects_other_draws(monkeypatch):
    class Reversing:  # a Generator whose permuted is not the legacy shuffle
        def __init__(self, bits):
            pass

        def permuted(self, x, axis=None, out=None):
            out[:] = x[:, ::-1]
            return out

    monkeypatch.setattr(theta_mod, "_PERMUTED", {})
    monkeypatch.setattr(np.random, "Generator", Reversing)
    assert not theta_mod._permuted_is_legacy()


@pytest.mark.parametrize("fast", [True, False])
def test_graph_and_shared_draws_both_paths(graphs, monkeypatch, fast):
    # draws="graph" against RandomState([seed, n, crc32]).choice per subset and GraKeL's
    # α; draws="grakel" against GraKeL's SvmTheta itself (one stream for the set)
    monkeypatch.setattr(theta_mod, "_PERMUTED", {"ok": fast})
    lo, hi, S, seed = 2, 7, 20, 3
    f = SVMTheta(n_samples=S, subsets_size_range=(lo, hi), random_state=seed).features(graphs)
    assert np.array_equal(f.numpy(), graph_draws_reference(graphs, lo, hi, S, seed))
    keep = [d for d in graphs if d.num_nodes > 1]  # GraKeL fails on one-node graphs
    adj = []
    for d in keep:
        A = np.zeros((d.num_nodes, d.num_nodes))
        A[d.edge_index[0].numpy(), d.edge_index[1].numpy()] = 1.0
        adj.append([A])
    ref = gk.SvmTheta(random_state=seed, n_samples=S, subsets_size_range=(lo, hi)).fit(adj).X
    f = SVMTheta(random_state=seed, n_samples=S, subsets_size_range=(lo, hi),
                 draws="grakel").features(keep).numpy()
    assert np.array_equal(f, np.hstack(ref).T)


def test_alpha_lambda_tolerance_certified_and_alphas_are_grakels():
    # λ_min for α is certified to _ALPHA_LAMBDA_TOL (a tenth of the float32 tie window),
    # against dense eigvalsh; α of 24 Erdős–Rényi graphs of 60–200 nodes against
    # GraKeL's own computation (dense eigvalsh, OneClassSVM), bit for bit
    assert theta_mod._ALPHA_LAMBDA_TOL <= theta_mod._TIE / 5
    rng = np.random.default_rng(17)
    graphs = [er_pairs(300 + i, int(n), degree=float(d))
              for i, (n, d) in enumerate(zip(rng.integers(60, 200, 24), rng.uniform(3, 9, 24)))]
    lam, ok = _lambda_min_lanczos(graphs, tol=theta_mod._ALPHA_LAMBDA_TOL)
    ref = np.array([np.linalg.eigvalsh(dense(n, e))[0] for n, e in graphs])
    assert ok.all()
    assert (np.abs(lam - ref) <= theta_mod._ALPHA_LAMBDA_TOL * np.abs(ref)).all()
    for (n, e), a in zip(graphs, _svm_theta_alphas_all(graphs)):
        assert np.array_equal(a, _calculate_svm_theta_(dense(n, e)))
