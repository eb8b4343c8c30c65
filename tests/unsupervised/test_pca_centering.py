"""KernelPCA on a Gram matrix that is nearly its mean (nearly constant data): the centered
Gram's eigenvalues sit ~1e-11 below entries of size 1.

Reference: the centered Gram formed without the cancellation, H·expm1(−D/2ℓ²)·H with D the
squared differences (K − 11ᵀ = expm1(−D/2ℓ²) and H1 = 0), by dense ``eigvalsh``.
"""
import warnings

import numpy as np
import pytest
import torch
from sklearn.decomposition import KernelPCA as SkKernelPCA

import torchkern
from torchkern import KernelPCA

f64 = torch.float64


def _nearly_constant(n=1200, spread=1e-7, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 3.0 + spread * torch.randn(n, 3, generator=g, dtype=f64)


def _reference(X, k):
    D = (X[:, None, :] - X[None, :, :]).pow(2).sum(-1)
    n = X.shape[0]
    H = torch.eye(n, dtype=f64) - 1.0 / n
    return torch.linalg.eigvalsh(H @ torch.expm1(-D / 2) @ H).flip(0)[:k]


@pytest.mark.parametrize("solver", ["randomized", "lanczos"])
def test_iterative_solvers_reach_the_uncancelled_eigenvalues(solver):
    # the old lazy centering products rounded at ‖K‖ ≈ n: 1.1 % (randomized) and 2 %
    # (lanczos) off, 1.5 and 14 times off at spread 2e-8; K − mean(K) first: 6e-6
    X = _nearly_constant()
    ref = _reference(X, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the entries' own precision warning
        m = KernelPCA(torchkern.RBF(1.0), 3, eigen_solver=solver, random_state=0).fit(X)
    torch.testing.assert_close(m.eigenvalues_, ref, rtol=1e-4, atol=0)


def test_smaller_spread_still_within_the_entries_precision():
    X = _nearly_constant(spread=2e-8, seed=1)
    ref = _reference(X, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        m = KernelPCA(torchkern.RBF(1.0), 3, eigen_solver="randomized", random_state=0).fit(X)
    torch.testing.assert_close(m.eigenvalues_, ref, rtol=2e-3, atol=0)


def test_shifted_fit_keeps_the_statistics_of_k_itself():
    # a wide RBF (ℓ = 10, mean entry 0.96: shifted) on ordinary data: transform centers new
    # rows with the training means of K itself, not of K − c; the training projections
    # equal fit_transform's, the eigenvalues scikit-learn's
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1100, 4))
    m = KernelPCA(torchkern.RBF(10.0), 4, eigen_solver="randomized", random_state=0)
    Z = m.fit_transform(torch.tensor(X))
    K = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 200)
    assert np.trace(K) > 10 * (np.trace(K) - K.sum() / len(X))  # the shift applies
    np.testing.assert_allclose(np.asarray(m._col_mean), K.mean(0), rtol=1e-12)
    np.testing.assert_allclose(float(m._mean), K.mean(), rtol=1e-12)
    torch.testing.assert_close(m.transform(torch.tensor(X)), Z, rtol=1e-6, atol=1e-8)
    sk = SkKernelPCA(4, kernel="rbf", gamma=1 / 200, eigen_solver="dense").fit(X)
    np.testing.assert_allclose(np.asarray(m.eigenvalues_), sk.eigenvalues_, rtol=1e-9)


def test_precomputed_gram_is_shifted_on_a_copy():
    X = _nearly_constant(n=1100, seed=2)
    G = torchkern.RBF(1.0)(X, backend="dense").to_dense().detach()
    before = G.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        m = KernelPCA("precomputed", 3, eigen_solver="randomized", random_state=0).fit(G)
    assert torch.equal(G, before)
    torch.testing.assert_close(m.eigenvalues_, _reference(X, 3), rtol=1e-4, atol=0)
