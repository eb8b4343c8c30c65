import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from sklearn.datasets import make_circles
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.exceptions import NotFittedError

import torchkern
from torchkern import KernelPCA

from tests._invariants import assert_close_up_to_sign, match_signs


def _data(n=150, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=(40, d))


def _match_signs(a, b):
    s = np.sign((a * b).sum(0))
    s[s == 0] = 1
    return a * s


@pytest.mark.parametrize("k", [1, 4])
def test_equals_sklearn(k):
    X, Xt = _data()
    ls = 1.3
    sk = SkKernelPCA(n_components=k, kernel="rbf", gamma=1 / (2 * ls**2),
                     eigen_solver="dense").fit(X)
    m = KernelPCA(torchkern.RBF(ls), n_components=k)
    Z = np.asarray(m.fit_transform(torch.tensor(X)))
    np.testing.assert_allclose(np.asarray(m.eigenvalues_), sk.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(np.abs((np.asarray(m.eigenvectors_) * sk.eigenvectors_).sum(0)),
                               1.0, atol=1e-10)
    np.testing.assert_allclose(_match_signs(Z, sk.transform(X)), sk.transform(X), atol=1e-6)
    Zt = np.asarray(m.transform(torch.tensor(Xt)))
    np.testing.assert_allclose(_match_signs(Zt, sk.transform(Xt)), sk.transform(Xt), atol=1e-6)
    # fit_transform equals transform of the training points
    np.testing.assert_allclose(Z, np.asarray(m.transform(torch.tensor(X))), atol=1e-8)


def test_all_components_remove_zero_eigenvalues():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 2))
    sk = SkKernelPCA(kernel="linear").fit(X)  # n_components=None: zero eigenvalues dropped
    m = KernelPCA(torchkern.Linear()).fit(torch.tensor(X))
    assert m.eigenvalues_.shape == (2,)
    np.testing.assert_allclose(np.asarray(m.eigenvalues_), sk.eigenvalues_, rtol=1e-10)


@pytest.mark.parametrize("solver", ["lanczos", "randomized"])
def test_lazy_iterative_equals_dense(solver):
    X, Xt = _data(n=600, d=2, seed=2)
    kern = torchkern.RBF(0.8)
    dense = KernelPCA(kern, n_components=5, eigen_solver="dense", backend="dense").fit(X)
    lazy = KernelPCA(kern, n_components=5, eigen_solver=solver, backend="blocked",
                     random_state=0).fit(X)
    np.testing.assert_allclose(np.asarray(lazy.eigenvalues_), np.asarray(dense.eigenvalues_),
                               rtol=1e-9)
    a, b = np.asarray(lazy.transform(Xt)), np.asarray(dense.transform(Xt))
    np.testing.assert_allclose(_match_signs(a, b), b, atol=1e-6)


def test_auto_on_materialized_gram_equals_dense(monkeypatch):
    # n > 1000: "auto" takes the randomized block Krylov solver on the materialized Gram,
    # whose products run in tiles of its upper triangle (made small here so that the
    # Krylov blocks span several tiles both ways, threads sharing them).
    from torchkern.linalg import tiled
    from torchkern.unsupervised import pca
    monkeypatch.setattr(tiled, "TILE_ROWS", 96)
    monkeypatch.setattr(tiled, "TILE_COLS", 160)
    used = []
    orig = pca._TiledDense._matmul
    monkeypatch.setattr(pca._TiledDense, "_matmul", lambda self, V: used.append(
        (self.symmetric, self.threads, torch.get_num_threads())) or orig(self, V))
    X, Xt = _data(n=1100, d=3, seed=7)
    kern = torchkern.RBF(1.2)
    dense = KernelPCA(kern, n_components=6, eigen_solver="dense", backend="dense").fit(X)
    torch.set_num_threads(2)  # (the autouse fixture restores the count)
    auto = KernelPCA(kern, n_components=6, backend="dense", random_state=0).fit(X)
    # products over the caller's 2 threads, called from the one-thread scope
    assert used and all(u == (True, 2, 1) for u in used)
    # the fit ran its bookkeeping on one thread and its products on two: the caller's
    # count is back, also as the default of a new thread
    assert torch.get_num_threads() == 2
    seen = []
    t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    t.start()
    t.join()
    assert seen == [2]
    np.testing.assert_allclose(np.asarray(auto.eigenvalues_), np.asarray(dense.eigenvalues_),
                               rtol=1e-9)
    a, b = np.asarray(auto.transform(Xt)), np.asarray(dense.transform(Xt))
    np.testing.assert_allclose(_match_signs(a, b), b, atol=1e-6)


def test_lanczos_on_materialized_gram_equals_dense():
    # one-column products on the tiled Gram (row panels shared by 2 threads)
    X, Xt = _data(n=400, d=3, seed=9)
    kern = torchkern.RBF(1.1)
    dense = KernelPCA(kern, n_components=4, eigen_solver="dense", backend="dense").fit(X)
    torch.set_num_threads(2)  # (the autouse fixture restores the count)
    lz = KernelPCA(kern, n_components=4, eigen_solver="lanczos", backend="dense",
                   random_state=0).fit(X)
    np.testing.assert_allclose(np.asarray(lz.eigenvalues_), np.asarray(dense.eigenvalues_),
                               rtol=1e-9)
    a, b = np.asarray(lz.transform(Xt)), np.asarray(dense.transform(Xt))
    np.testing.assert_allclose(_match_signs(a, b), b, atol=1e-6)


def test_tiled_products_equal_one_product():
    from torchkern.unsupervised.pca import _TiledDense
    g = torch.Generator().manual_seed(0)
    T = torch.randn(300, 300, generator=g, dtype=torch.float64)
    S = T + T.T
    for r in (1, 8, 24):
        V = torch.randn(300, r, generator=g, dtype=torch.float64)
        torch.testing.assert_close(_TiledDense(T, symmetric=False) @ V, T @ V,
                                   rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(_TiledDense(S, symmetric=True) @ V, S @ V,
                                   rtol=1e-12, atol=1e-12)


def test_precomputed_gram_is_not_assumed_symmetric(monkeypatch):
    # a precomputed Gram's products read all of it (the iterative solvers see the matrix
    # the user gave), a kernel's Gram only its upper triangle
    from torchkern.unsupervised import pca
    X, _ = _data(n=1100, d=3, seed=8)
    G = torchkern.RBF(1.0)(torch.tensor(X)).to_dense()
    ref = KernelPCA("precomputed", n_components=3, eigen_solver="dense").fit(G)
    m = KernelPCA("precomputed", n_components=3, eigen_solver="randomized", random_state=0)
    seen = []
    orig = pca._TiledDense._matmul
    monkeypatch.setattr(pca._TiledDense, "_matmul",
                        lambda self, V: seen.append(self.symmetric) or orig(self, V))
    m.fit(G)
    assert seen and not any(seen)
    np.testing.assert_allclose(np.asarray(m.eigenvalues_), np.asarray(ref.eigenvalues_),
                               rtol=1e-9)


def test_randomized_helper_on_dense_matrix():
    from torchkern.unsupervised.pca import _randomized_eigsh
    g = torch.Generator().manual_seed(0)
    Q = torch.linalg.qr(torch.randn(300, 300, generator=g, dtype=torch.float64)).Q
    lam = 0.8 ** torch.arange(300, dtype=torch.float64)
    A = (Q * lam) @ Q.T
    evals, evecs, ok, _ = _randomized_eigsh(A, 6, random_state=1)
    assert ok
    torch.testing.assert_close(evals, lam[:6], rtol=1e-12, atol=1e-12)
    assert torch.allclose((evecs * Q[:, :6]).sum(0).abs(), torch.ones(6, dtype=torch.float64),
                          atol=1e-7)


def test_circles_separated_by_first_component():
    X, y = make_circles(n_samples=400, factor=0.3, noise=0.05, random_state=0)
    z = np.asarray(KernelPCA(torchkern.RBF(lengthscale=0.5), n_components=2).fit_transform(
        torch.tensor(X))[:, 0])
    # best single threshold on the first component
    order = np.argsort(z)
    ys = y[order]
    left1 = np.concatenate([[0], np.cumsum(ys == 1)])
    left0 = np.concatenate([[0], np.cumsum(ys == 0)])
    acc = np.maximum(left0 + (ys == 1).sum() - left1, left1 + (ys == 0).sum() - left0) / len(y)
    assert acc.max() >= 0.99


def test_inverse_transform_equals_sklearn():
    X, _ = _data(n=120, d=3, seed=3)
    ls = 1.5
    sk = SkKernelPCA(n_components=3, kernel="rbf", gamma=1 / (2 * ls**2),
                     fit_inverse_transform=True, alpha=0.1).fit(X)
    m = KernelPCA(torchkern.RBF(ls), n_components=3, fit_inverse_transform=True,
                  alpha=0.1).fit(X)
    Z = sk.transform(X)
    s = np.sign((np.asarray(m.transform(X)) * Z).sum(0))
    # our components may have other signs: feed our own representation of the same points
    ours = np.asarray(m.inverse_transform(torch.tensor(Z * s)))
    np.testing.assert_allclose(ours, sk.inverse_transform(Z), atol=1e-8)


def test_inverse_transform_lazy_cg_equals_dense():
    X, _ = _data(n=550, d=2, seed=4)
    a = KernelPCA(torchkern.RBF(1.0), n_components=3, fit_inverse_transform=True,
                  alpha=0.5, backend="dense").fit(X)
    b = KernelPCA(torchkern.RBF(1.0), n_components=3, eigen_solver="dense",
                  fit_inverse_transform=True, alpha=0.5, backend="blocked").fit(X)
    Z = a.transform(X[:20])
    # b's components may have other signs than a's: feed b its own coordinates of the points
    Zb = match_signs(Z, b.transform(X[:20]))
    np.testing.assert_allclose(np.asarray(b.inverse_transform(Zb)),
                               np.asarray(a.inverse_transform(Z)), atol=1e-7)


def test_precomputed_equals_kernel():
    X, Xt = _data(n=80, d=2, seed=5)
    k = torchkern.RBF(1.0)
    Xt_, X_ = torch.tensor(Xt), torch.tensor(X)
    a = KernelPCA(k, n_components=3).fit(X_)
    b = KernelPCA("precomputed", n_components=3).fit(k(X_).to_dense().detach())
    np.testing.assert_allclose(np.asarray(b.eigenvalues_), np.asarray(a.eigenvalues_), rtol=1e-10)
    # components up to sign (two paths to one Gram matrix may round it differently)
    assert_close_up_to_sign(b.transform(k(Xt_, X_).to_dense().detach()), a.transform(Xt_),
                            rtol=0, atol=1e-10)


def test_float32():
    X, Xt = _data(n=100, d=2, seed=6)
    a = KernelPCA(torchkern.RBF(1.0), n_components=3).fit(torch.tensor(X))
    b = KernelPCA(torchkern.RBF(1.0), n_components=3).fit(torch.tensor(X, dtype=torch.float32))
    assert b.eigenvalues_.dtype == torch.float32
    out = b.transform(torch.tensor(Xt, dtype=torch.float32))
    assert out.dtype == torch.float32
    np.testing.assert_allclose(np.asarray(b.eigenvalues_), np.asarray(a.eigenvalues_), rtol=1e-4)
    ref = np.asarray(a.transform(torch.tensor(Xt)))
    np.testing.assert_allclose(_match_signs(np.asarray(out), ref), ref, atol=1e-3)


def test_bad_input():
    X = torch.randn(10, 2, dtype=torch.float64)
    with pytest.warns(UserWarning, match="n_components=11"):  # as scikit-learn: min(n, 11)
        assert KernelPCA(n_components=11).fit(X).eigenvalues_.shape[0] <= 10
    with pytest.raises(ValueError, match="n_components"):
        KernelPCA(n_components=0).fit(X)
    with pytest.raises(ValueError, match="eigen_solver"):
        KernelPCA(n_components=2, eigen_solver="svd").fit(X)
    with pytest.raises(ValueError, match="alpha"):
        KernelPCA(n_components=2, alpha=-1.0).fit(X)
    with pytest.raises(NotFittedError):
        KernelPCA(n_components=2).transform(X)
    m = KernelPCA(n_components=2).fit(X)
    assert not hasattr(m, "inverse_transform")  # sklearn's available_if convention
    with pytest.raises(AttributeError, match="inverse_transform") as err:
        m.inverse_transform(torch.zeros(3, 2, dtype=torch.float64))
    assert "fit_inverse_transform=True" in str(err.value.__cause__)
    with pytest.raises(ValueError, match="X"):
        KernelPCA(n_components=2).fit(torch.full((5, 2), float("nan")))


def test_lazy_path_memory():
    n = 4000
    code = f"""
import resource, torch, torchkern
torchkern.config.block_memory_mb = 8
torch.set_num_threads(1)
X = torch.randn({n}, 2, dtype=torch.float64)
m = torchkern.KernelPCA(torchkern.RBF(1.0), n_components=3, eigen_solver="randomized",
                        backend="blocked", tol=1e-6, random_state=0)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
m.fit(X)
m.transform(X[:100])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((peak - base) * 1024)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    grown = int(out.stdout.strip().splitlines()[-1])
    assert grown < n * n * 8 / 4  # an n x n float64 matrix would be 128 MB
