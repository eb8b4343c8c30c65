import numpy as np
import pytest
import torch

import torchkern
from torchkern import KernelCCA


def _classical_cca(X, Y):
    X, Y = X - X.mean(0), Y - Y.mean(0)

    def isqrt(C):
        w, V = np.linalg.eigh(C)
        return (V / np.sqrt(w)) @ V.T

    return np.linalg.svd(isqrt(X.T @ X) @ X.T @ Y @ isqrt(Y.T @ Y), compute_uv=False)


def _linear_views(n=300, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 2))
    X = np.c_[Z, rng.normal(size=(n, 2))] @ rng.normal(size=(4, 4))
    Y = np.c_[Z[:, :1] + 0.5 * rng.normal(size=(n, 1)), Z[:, 1:] + rng.normal(size=(n, 1)),
              rng.normal(size=(n, 1))] @ rng.normal(size=(3, 3))
    return X, Y


@pytest.mark.parametrize("n_centers", [None, 40])
def test_linear_kernels_recover_classical_cca(n_centers):
    X, Y = _linear_views()
    ref = _classical_cca(X, Y)
    m = KernelCCA(torchkern.Linear(), torchkern.Linear(), n_components=3, reg=1e-10,
                  n_centers=n_centers, random_state=0).fit(X, Y)
    np.testing.assert_allclose(np.asarray(m.canonical_correlations_), ref, rtol=1e-6)
    U, V = m.transform(X, Y)
    corr = [np.corrcoef(U[:, j], V[:, j])[0, 1] for j in range(3)]
    np.testing.assert_allclose(corr, ref, rtol=1e-6)


def test_regularized_correlations_solve_the_seed_eigenproblem():
    # Hardoon et al. 2004: max a'KaKb b s.t. (1-t) a'Ka^2 a + t a'Ka a = 1 (same for b); the values
    # rho^2 are the eigenvalues of Ra^+ Ka Kb Rb^+ Kb Ka, computed here with numpy pinv.
    rng = np.random.default_rng(1)
    n, tau = 50, 0.3
    z = rng.uniform(-1, 1, size=(n, 1))
    X = np.c_[np.cos(2 * z), np.sin(2 * z)] + 0.1 * rng.normal(size=(n, 2))
    Y = z ** 2 + 0.1 * rng.normal(size=(n, 1))
    kx, ky = torchkern.RBF(1.0), torchkern.RBF(0.7)
    H = np.eye(n) - 1.0 / n
    Ka = H @ np.asarray(kx(torch.tensor(X)).to_dense().detach()) @ H
    Kb = H @ np.asarray(ky(torch.tensor(Y)).to_dense().detach()) @ H
    Ra = (1 - tau) * Ka @ Ka + tau * Ka
    Rb = (1 - tau) * Kb @ Kb + tau * Kb
    M = np.linalg.pinv(Ra, rcond=1e-13, hermitian=True) @ Ka @ Kb @ np.linalg.pinv(
        Rb, rcond=1e-13, hermitian=True) @ Kb @ Ka
    ref = np.sqrt(np.sort(np.linalg.eigvals(M).real)[::-1][:2])
    m = KernelCCA(kx, ky, n_components=2, reg=tau).fit(X, Y)
    np.testing.assert_allclose(np.asarray(m.canonical_correlations_), ref, rtol=1e-5)


def test_nonlinear_views_held_out_correlation():
    rng = np.random.default_rng(2)
    n = 500
    z = rng.uniform(-1, 1, size=(n, 1))
    # views share z only through even functions: linear CCA sees (almost) nothing
    X = np.c_[z + 0.02 * rng.normal(size=(n, 1)), rng.uniform(-1, 1, size=(n, 1))]
    Y = np.c_[np.cos(3 * z), rng.uniform(-1, 1, size=(n, 1))] + 0.02 * rng.normal(size=(n, 2))
    tr, te = slice(0, 300), slice(300, None)
    for n_centers in (None, 60):
        m = KernelCCA(torchkern.RBF(0.5), torchkern.RBF(0.5), n_components=1, reg=0.1,
                      n_centers=n_centers, random_state=0).fit(X[tr], Y[tr])
        U, V = m.transform(X[te], Y[te])
        assert np.corrcoef(U[:, 0], V[:, 0])[0, 1] > 0.9
        assert m.score(X[te], Y[te]) > 0.9
    # a linear CCA of the same views is far worse: the shared latent is nonlinear
    assert _classical_cca(X[tr], Y[tr])[0] < 0.3


def test_bad_input():
    X, Y = _linear_views(n=20)
    with pytest.raises(ValueError, match="same number of samples"):
        KernelCCA().fit(X, Y[:10])
    with pytest.raises(ValueError, match="reg"):
        KernelCCA(reg=1.5).fit(X, Y)
    with pytest.raises(ValueError, match="n_components"):
        KernelCCA(torchkern.Linear(), torchkern.Linear(), n_components=4).fit(X, Y)
    with pytest.raises(ValueError, match="n_centers"):
        KernelCCA(n_centers=0).fit(X, Y)
