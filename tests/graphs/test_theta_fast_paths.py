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


@pytest.fixture(scope="module")
def er():
    """24 Erdős–Rényi graphs of 60–200 nodes, average degree 3–9, and their λ_min by
    dense eigvalsh."""
    rng = np.random.default_rng(17)
    graphs = [er_pairs(300 + i, int(n), degree=float(d))
              for i, (n, d) in enumerate(zip(rng.integers(60, 200, 24), rng.uniform(3, 9, 24)))]
    return graphs, np.array([np.linalg.eigvalsh(dense(n, e))[0] for n, e in graphs])


def test_alpha_lambda_tolerance_certified_and_alphas_are_grakels(er, monkeypatch):
    # λ_min for α is certified to _ALPHA_LAMBDA_TOL (a tenth of the float32 tie window),
    # against dense eigvalsh, or accepted earlier where 1/ρ's float32 is known; α
    # against GraKeL's own computation (dense eigvalsh, OneClassSVM), bit for bit
    graphs, ref = er
    assert theta_mod._ALPHA_LAMBDA_TOL <= theta_mod._TIE / 5
    lam, ok = _lambda_min_lanczos(graphs, tol=theta_mod._ALPHA_LAMBDA_TOL)
    assert ok.all()
    assert (np.abs(lam - ref) <= theta_mod._ALPHA_LAMBDA_TOL * np.abs(ref)).all()
    rounds_alike, said = theta_mod._rounds_alike, []

    def logged(theta, delta):
        said.append(rounds_alike(theta, delta))
        return said[-1]

    monkeypatch.setattr(theta_mod, "_rounds_alike", logged)
    alphas = _svm_theta_alphas_all(graphs)
    assert any(said)  # some graphs stopped on the looser certificate
    for (n, e), a in zip(graphs, alphas):
        assert np.array_equal(a, _calculate_svm_theta_(dense(n, e)))


def test_accepted_bound_holds_and_refused_graphs_reach_tol(er):
    # every (θ, δ) offered to ``accept`` brackets the dense λ_min (Kato–Temple:
    # θ − δ ≤ λ ≤ θ, to rounding); where accept refuses, the graph goes on to tol
    graphs, ref = er
    offered = {}

    def take(theta, delta):
        offered[theta] = delta
        return True

    lam, ok = _lambda_min_lanczos(graphs, tol=1e-11, accept=take, accept_tol=1e-8)
    assert ok.all() and len(offered) >= 3  # (the others were certified to tol at once)
    for t, r in zip(lam, ref):
        if t in offered:
            assert offered[t] <= 1e-8 * abs(t)
            assert t - offered[t] <= r + 1e-14 * abs(r) and r <= t + 1e-14 * abs(r)
        else:
            assert abs(t - r) <= 1e-11 * abs(r)
    lam, ok = _lambda_min_lanczos(graphs, tol=1e-11, accept=lambda t, d: False, accept_tol=1e-8)
    assert ok.all() and (np.abs(lam - ref) <= 1e-11 * np.abs(ref)).all()


def test_rounds_alike_against_float32_rounding_cells():
    # _rounds_alike(θ, δ) only where all of 1/ρ ∈ [1/(|θ| + δ), 1/|θ|], widened by the
    # tie window, lies in one float32 rounding cell (between the midpoints of the
    # float32 neighbours of float32(1/|θ|)), and for most small δ it does
    rng = np.random.default_rng(3)
    yes = 0
    for theta, rel in zip(-rng.uniform(1.0, 12.0, 3000), 10.0 ** rng.uniform(-12, -6, 3000)):
        delta = rel * -theta
        f = np.float32(-1.0 / theta)
        lo = (float(np.nextafter(f, np.float32(0))) + float(f)) / 2
        hi = (float(np.nextafter(f, np.float32(np.inf))) + float(f)) / 2
        inside = (lo < (1.0 / (delta - theta)) * (1 - theta_mod._TIE)
                  and (-1.0 / theta) * (1 + theta_mod._TIE) < hi)
        said = theta_mod._rounds_alike(float(theta), float(delta))
        assert not said or inside
        yes += said
    assert yes > 1500
    assert not theta_mod._rounds_alike(-0.0, 0.0) and not theta_mod._rounds_alike(-0.3, 1e-12)
