"""KernelRidge's Nyström solver at scale: stored K_nm, float32 convergence, the whitening;
and the Cholesky path's progress line. References: dense float64 normal equations."""
import warnings

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import rbf_kernel

import torchkern.gram as gram
from torchkern import RBF, KernelRidge, config
from torchkern.approx.nystroem import nystrom_whitening
from torchkern.linalg import ConvergenceWarning

LS = 1.0
GAMMA = 1 / (2 * LS**2)


def _data(n, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=n)
    return X, y


def _normal_equations(X, y, idx, alpha):
    """β of (K_mn K_nm + α K_mm) β = K_mn y, dense float64."""
    Knm, Kmm = rbf_kernel(X, X[idx], gamma=GAMMA), rbf_kernel(X[idx], gamma=GAMMA)
    return np.linalg.solve(Knm.T @ Knm + alpha * Kmm, Knm.T @ y)


def _count_evaluations(monkeypatch):
    """Rows of kernel formulas evaluated, recorded per call."""
    calls = []
    rows = gram.FormulaKernelMatrix.rows

    def counting(self, idx):
        calls.append(len(idx))
        return rows(self, idx)

    monkeypatch.setattr(gram.FormulaKernelMatrix, "rows", counting)
    return calls


def test_stored_knm_is_evaluated_once_and_equals_the_recomputed_path(monkeypatch):
    X, y = _data(3000)
    n, m, alpha = len(X), 150, 3.0
    kw = dict(alpha=alpha, solver="nystrom", n_centers=m, random_state=0, tol=1e-10)
    calls = _count_evaluations(monkeypatch)
    stored = KernelRidge(RBF(LS), **kw).fit(X, y)
    assert calls == [n]  # K_nm once, all n rows (K_mm is a dense m × m evaluation)
    calls.clear()
    lazy = KernelRidge(RBF(LS), backend="blocked", **kw).fit(X, y)
    assert sum(calls) >= n * lazy.n_iter_  # one evaluation of K_nm per iteration
    beta = _normal_equations(X, y, np.asarray(stored.center_indices_), alpha)
    for est in (stored, lazy):
        assert np.abs(est.dual_coef_ - beta).max() / np.abs(beta).max() < 1e-7


def test_knm_is_stored_only_within_the_memory_budget(monkeypatch):
    X, y = _data(1000)
    n, m = len(X), 100
    calls = _count_evaluations(monkeypatch)
    for budget, stored in [(n * m * 8, True), (n * m * 8 - 1, False)]:
        monkeypatch.setattr(config, "materialize_max_bytes", budget)
        calls.clear()
        est = KernelRidge(RBF(LS), alpha=1.0, solver="nystrom", n_centers=m,
                          random_state=0).fit(X, y)
        assert (calls == [n]) == stored, (budget, calls, est.n_iter_)


def test_float32_nystrom_reaches_default_tol_without_warning():
    # The first-hour defect: float32 Nyström KRR with λ = 10⁻³ (α = λn) ran max_iter CG
    # iterations without converging. It must reach tol = 1e-6 in a few iterations, and
    # its β must be that of the float64 normal equations up to float32 kernel rounding.
    X, y = _data(4000)
    n, m = len(X), 200
    X32, y32 = (torch.as_tensor(a, dtype=torch.float32) for a in (X, y))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = KernelRidge(RBF(LS), alpha=1e-3 * n, solver="nystrom", n_centers=m,
                          random_state=0).fit(X32, y32)
    assert est.n_iter_ <= 40
    beta = _normal_equations(X, y, np.asarray(est.center_indices_), 1e-3 * n)
    Xt, _ = _data(300, seed=1)
    ref = rbf_kernel(Xt, X[np.asarray(est.center_indices_)], gamma=GAMMA) @ beta
    pred = est.predict(torch.as_tensor(Xt, dtype=torch.float32)).double().numpy()
    assert np.abs(pred - ref).max() / np.abs(ref).max() < 1e-4


def test_nystrom_whitening_whitens_the_center_gram():
    X, _ = _data(300)
    K = torch.as_tensor(rbf_kernel(X[:60], gamma=2.0))  # well conditioned: Cholesky
    M = nystrom_whitening(K)
    assert M.shape == (60, 60) and torch.equal(M, torch.triu(M))  # inverse Cholesky factor
    assert (M.T @ K @ M - torch.eye(60, dtype=torch.float64)).abs().max() < 1e-8
    # Indefinite (a negative eigenvalue beyond the jitter): the eigenbasis of the
    # positive part, Mᵀ K M = I on the r kept directions.
    w, U = torch.linalg.eigh(K)
    K_bad = K - 2 * w[-1] * U[:, -1:] @ U[:, -1:].T
    M = nystrom_whitening(K_bad)
    assert M.shape == (60, 59)
    assert (M.T @ K_bad @ M - torch.eye(59, dtype=torch.float64)).abs().max() < 1e-8


def test_cholesky_verbose_says_what_it_does(capsys):
    X, y = _data(200)
    Y = np.stack([y, y], 1)
    KernelRidge(RBF(LS), alpha=[0.1, 1.0], solver="cholesky", verbose=True).fit(X, Y)
    err = capsys.readouterr().err
    assert "KernelRidge (cholesky, n=200, float64)" in err
    assert "2/2" in err and "factorization" in err  # one factorization per distinct α
    KernelRidge(RBF(LS), alpha=0.1, solver="cholesky").fit(X, y)
    assert capsys.readouterr().err == ""
