"""KernelPCA copies its Gram as K − c11ᵀ only where products with K would round off the
centered spectrum. Reference: float64 scipy.linalg.eigh of the centered Gram formed
without cancellation, H·expm1(−D/2ℓ²)·H (K − 11ᵀ = expm1(−D/2ℓ²) and H1 = 0)."""
import numpy as np
import pytest
import scipy.linalg
import torch

import torchkern
import torchkern.unsupervised.pca as pca_module
from torchkern import KernelPCA


def _reference(X, ell, k):
    X = X.double().numpy()
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    n = len(X)
    H = np.eye(n) - 1.0 / n
    w = scipy.linalg.eigh(H @ np.expm1(-D / (2 * ell**2)) @ H, eigvals_only=True)
    return w[::-1][:k].copy()


@pytest.mark.parametrize("dtype, ell, copied, rtol, k", [
    # float64, ℓ = 10 on unit-variance data (tr K / tr K̃ ≈ 30): products lose nothing;
    # the old rule (mean > 90 % of tr K) copied the n × n Gram anyway
    (torch.float64, 10.0, False, 1e-9, 3),
    # float32, ℓ = 1000 (tr K / tr K̃ ≈ 3e5): unshifted the top eigenvalues were 1 % off;
    # the shifted copy keeps them to 1e-4
    (torch.float32, 1000.0, True, 1e-3, 3),
    # float64, ℓ = 10⁴ (tr K / tr K̃ ≈ 3e7, ε·tr K just under tol·tr K̃): the rule without
    # its margin √n left it unshifted, the 4th and 5th eigenvalues then 12 and 6.5 times
    # off (2.6e-7 of the first); shifted 1e-4 and 4e-4
    (torch.float64, 1e4, True, 1e-3, 5),
])
def test_mean_shift_copies_only_where_accuracy_needs_it(dtype, ell, copied, rtol, k,
                                                        monkeypatch):
    X = torch.randn(1100, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    made, solved = [], []
    kernel_matrix = pca_module.kernel_matrix
    top = KernelPCA._top_eigenpairs

    def record_gram(*args, **kw):
        K = kernel_matrix(*args, **kw)
        made.append(K.tensor.data_ptr())
        return K

    def record_solve(self, Kc, k, solver):
        solved.append(Kc.base.tensor.data_ptr())
        return top(self, Kc, k, solver)

    monkeypatch.setattr(pca_module, "kernel_matrix", record_gram)
    monkeypatch.setattr(KernelPCA, "_top_eigenpairs", record_solve)
    m = KernelPCA(torchkern.RBF(ell), k, eigen_solver="randomized", random_state=0)
    m.fit(X.to(dtype))
    assert (solved[0] != made[0]) == copied
    np.testing.assert_allclose(m.eigenvalues_.double().numpy(), _reference(X, ell, k),
                               rtol=rtol, atol=0)


def test_randomized_solver_stopped_early_warns_with_its_residual():
    # the warning said only "did not reach tol in 1 steps"; it gives the residual now,
    # checked against ‖K̃u − θu‖ / θ₁ of the returned pairs on the dense centered Gram
    import re
    import warnings as w
    X = np.random.default_rng(1).normal(size=(1100, 3))
    with w.catch_warnings(record=True) as rec:
        w.simplefilter("always")
        m = KernelPCA(torchkern.RBF(1.0), 3, eigen_solver="randomized", max_iter=1,
                      random_state=0).fit(torch.tensor(X))
    text = " ".join(str(r.message) for r in rec if "randomized eigensolver" in str(r.message))
    found = re.search(r"largest relative residual ([0-9.e+-]+) > tol=1\.0e-08", text)
    assert found, text
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 2)
    H = np.eye(len(X)) - 1.0 / len(X)
    Kc = H @ K @ H
    U, lam = np.asarray(m.eigenvectors_), np.asarray(m.eigenvalues_)
    ref = (np.linalg.norm(Kc @ U - U * lam, axis=0) / lam.max()).max()
    assert ref > 1e-8
    np.testing.assert_allclose(float(found.group(1)), ref, rtol=2e-3)


@pytest.mark.parametrize("solver", ["auto", "lanczos", "randomized"])
def test_more_components_than_samples_as_scikit_learn(solver):
    # scikit-learn's KernelPCA takes min(n, n_components); torchkern refused (ValueError)
    from sklearn.decomposition import KernelPCA as SkKernelPCA
    X = np.random.default_rng(0).normal(size=(30, 3))
    sk = SkKernelPCA(n_components=40, kernel="rbf", gamma=0.5).fit(X)
    with pytest.warns(UserWarning, match="n_components=40 is larger than the number of "
                                         "samples n=30"):
        m = KernelPCA(torchkern.RBF(1.0), n_components=40, eigen_solver=solver,
                      random_state=0).fit(X)
    assert m.eigenvalues_.shape == sk.eigenvalues_.shape == (30,)
    np.testing.assert_allclose(m.eigenvalues_, sk.eigenvalues_, rtol=1e-9, atol=1e-12)
    Z, Zs = m.transform(X), sk.transform(X)
    assert Z.shape == Zs.shape == (30, 30)
    np.testing.assert_allclose(np.abs(Z[:, :10]), np.abs(Zs[:, :10]), atol=1e-8)
