"""learn_kernel: learned bandwidths through the estimator API, against numpy and sklearn."""
import numpy as np
import pytest
import torch
from sklearn.kernel_ridge import KernelRidge as SkKRR
from sklearn.metrics.pairwise import rbf_kernel

import torchkern
from torchkern.learning import learn_kernel

F64 = torch.float64


def _loo_numpy(X, y, ls, alpha):
    """Mean squared leave-one-out residual, (y_i − ŷ_i)/(1 − H_ii), in numpy."""
    K = rbf_kernel(X, gamma=1 / (2 * ls * ls))
    H = K @ np.linalg.inv(K + alpha * np.eye(len(y)))
    return np.mean(((y - H @ y) / (1 - np.diag(H))) ** 2)


def test_learn_kernel_loo_reaches_the_grid_minimum_and_fits_with_it():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(40, 1, generator=g, dtype=F64) * 6
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(40, generator=g, dtype=F64)
    model = learn_kernel(torchkern.KernelRidge(torchkern.RBF(2.0), alpha=0.05), X, y, "loo",
                         n_iter=100, lr=0.1)
    ls = float(model.kernel.lengthscale.detach())
    grid = np.geomspace(0.1, 3, 60)
    best = min(_loo_numpy(X.numpy(), y.numpy(), l, 0.05) for l in grid)
    assert _loo_numpy(X.numpy(), y.numpy(), ls, 0.05) <= best * 1.001
    sk = SkKRR(alpha=0.05, kernel="rbf", gamma=1 / (2 * ls * ls)).fit(X.numpy(), y.numpy())
    np.testing.assert_allclose(np.asarray(model.predict(X)), sk.predict(X.numpy()), rtol=1e-7, atol=1e-9)
    h = model.kernel_learning_history_
    assert h[-1] < h[0]


def _alignment(K, y):
    n = len(y)
    H = np.eye(n) - 1.0 / n
    Y = np.eye(2)[y]
    Kc, Yc = H @ K @ H, H @ Y
    T = Yc @ Yc.T
    return (Kc * T).sum() / (np.linalg.norm(Kc) * np.linalg.norm(T))


def test_learn_kernel_alignment_for_a_classifier():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(80, 2, generator=g, dtype=F64)
    y = ((X ** 2).sum(1) > 1.4).long().numpy()
    svc = learn_kernel(torchkern.SVC(torchkern.RBF(5.0)), X, y, n_iter=40, lr=0.1)
    ls = float(svc.kernel.lengthscale.detach())
    before = _alignment(rbf_kernel(X.numpy(), gamma=1 / 50), y)
    after = _alignment(rbf_kernel(X.numpy(), gamma=1 / (2 * ls * ls)), y)
    assert after > before + 0.05
    assert svc.score(X, y) > 0.9


def test_learn_kernel_rejects_bad_arguments():
    X = torch.randn(10, 2, dtype=F64)
    y = X[:, 0]
    with pytest.raises(ValueError, match="objective"):
        learn_kernel(torchkern.KernelRidge(torchkern.RBF()), X, y, "cv")
    with pytest.raises(TypeError, match="kernel"):
        learn_kernel(torchkern.KernelRidge("precomputed"), X, y)
