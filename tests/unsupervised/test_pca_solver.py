"""KernelPCA's randomized solver (Nyström start, one-pass centering) against scikit-learn's
ARPACK, and its verbose progress bar."""
import numpy as np
import pytest
import torch
from sklearn.decomposition import KernelPCA as SkKernelPCA

import torchkern
from torchkern import KernelPCA


def _mixture(n, d=5, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=2.0, size=(8, d))
    return centers[rng.integers(0, 8, size=n)] + rng.normal(size=(n, d))


def _last_line(err):
    return err.replace("\r", "\n").strip().splitlines()[-1]


@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_randomized_equals_sklearn_arpack(backend):
    X = _mixture(1200)
    sk = SkKernelPCA(10, kernel="rbf", gamma=1 / 8, eigen_solver="arpack", tol=0,
                     random_state=0).fit(X)
    m = KernelPCA(torchkern.RBF(2.0), 10, eigen_solver="randomized", backend=backend,
                  random_state=0).fit(torch.tensor(X))
    np.testing.assert_allclose(np.asarray(m.eigenvalues_), sk.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(np.abs((np.asarray(m.eigenvectors_) * sk.eigenvectors_).sum(0)),
                               1.0, atol=1e-8)
    # one-pass centering statistics: the column means are the row means of the Gram
    K = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / 8)
    np.testing.assert_allclose(np.asarray(m._col_mean), K.mean(0), rtol=1e-12)
    np.testing.assert_allclose(float(m._mean), K.mean(), rtol=1e-12)


def test_nystrom_start_saves_block_products():
    from torchkern.linalg.eig import block_krylov_eigsh
    from torchkern.unsupervised.pca import _centered_symmetric, _nystrom_start
    X = torch.tensor(_mixture(1500, seed=1))
    Kc = _centered_symmetric(torchkern.RBF(2.0)(X, backend="dense"))
    start = _nystrom_start(Kc, 24, 0)
    assert start.shape == (1500, 24)
    cold = block_krylov_eigsh(Kc, 10, tol=1e-8, random_state=0)
    warm = block_krylov_eigsh(Kc, 10, tol=1e-8, random_state=0, start=start)
    assert cold[2] and warm[2] and warm[3] < cold[3]
    ref = torch.linalg.eigvalsh(Kc.to_dense()).flip(0)[:10]
    torch.testing.assert_close(warm[0], ref, rtol=1e-10, atol=0)


def test_kernel_pca_verbose_shows_progress(capsys):
    X = torch.tensor(_mixture(1100, seed=2))
    quiet = KernelPCA(torchkern.RBF(2.0), 4, random_state=0).fit(X)
    capsys.readouterr()
    loud = KernelPCA(torchkern.RBF(2.0), 4, random_state=0, verbose=True).fit(X)
    torch.testing.assert_close(loud.eigenvalues_, quiet.eigenvalues_, rtol=0, atol=0)
    last = _last_line(capsys.readouterr().err)
    # the bar stays on screen, full, with the final residual below the default tol 1e-8
    assert last.startswith("KernelPCA (randomized)") and "100%" in last
    assert float(last.split("residual ")[1].split(",")[0]) <= 1e-8
    KernelPCA(torchkern.RBF(2.0), 4, eigen_solver="dense", verbose=True).fit(X[:200])
    assert "KernelPCA (dense): 100%" in capsys.readouterr().err
