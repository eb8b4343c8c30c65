"""fit(..., learn_kernel=...): the estimator API's learned kernels, against learn_kernel,
numpy leave-one-out / alignment and scikit-learn refits with the learned bandwidth."""
import numpy as np
import pytest
import torch
from sklearn.kernel_ridge import KernelRidge as SkKRR
from sklearn.metrics.pairwise import rbf_kernel

import torchkern
from torchkern.learning import learn_kernel

F64 = torch.float64


def _loo_numpy(X, y, ls, alpha):
    K = rbf_kernel(X, gamma=1 / (2 * ls * ls))
    H = K @ np.linalg.inv(K + alpha * np.eye(len(y)))
    return np.mean(((y - H @ y) / (1 - np.diag(H))) ** 2)


def _alignment(K, y):
    n = len(y)
    H = np.eye(n) - 1.0 / n
    Y = np.eye(y.max() + 1)[y]
    Kc, T = H @ K @ H, H @ Y @ Y.T @ H
    return (Kc * T).sum() / (np.linalg.norm(Kc) * np.linalg.norm(T))


def _wave(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 1, generator=g, dtype=F64) * 6
    return X, torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)


def test_fit_learn_kernel_loo_equals_learn_kernel_then_fit_and_beats_a_poor_bandwidth():
    X, y = _wave()
    Xte, yte = _wave(200, seed=1)
    est = torchkern.KernelRidge(torchkern.RBF(3.0), alpha=0.05)
    fitted = est.fit(X, y, learn_kernel={"objective": "loo", "n_iter": 60, "lr": 0.1})
    assert fitted is est
    assert float(est.kernel.lengthscale.detach()) == pytest.approx(3.0)  # parameter untouched
    ref = learn_kernel(torchkern.KernelRidge(torchkern.RBF(3.0), alpha=0.05), X, y, "loo",
                       n_iter=60, lr=0.1)
    ls = float(est.kernel_.lengthscale.detach())
    assert ls == pytest.approx(float(ref.kernel.lengthscale.detach()), rel=1e-12)
    assert est.kernel_learning_history_ == ref.kernel_learning_history_
    np.testing.assert_allclose(np.asarray(est.predict(Xte)), np.asarray(ref.predict(Xte)),
                               rtol=1e-12, atol=1e-12)
    # the learned model is scikit-learn's KRR at the learned bandwidth
    sk = SkKRR(alpha=0.05, kernel="rbf", gamma=1 / (2 * ls * ls)).fit(X.numpy(), y.numpy())
    np.testing.assert_allclose(np.asarray(est.predict(Xte)), sk.predict(Xte.numpy()),
                               rtol=1e-7, atol=1e-9)
    # and it is much better than the poor initial bandwidth: LOO (numpy) and test error
    Xn, yn = X.numpy(), y.numpy()
    assert _loo_numpy(Xn, yn, ls, 0.05) < 0.2 * _loo_numpy(Xn, yn, 3.0, 0.05)
    poor = torchkern.KernelRidge(torchkern.RBF(3.0), alpha=0.05).fit(X, y)
    assert est.score(Xte, yte) > 0.9 > poor.score(Xte, yte)


def test_fit_learn_kernel_holdout_uses_the_estimators_random_state():
    X, y = _wave()
    a = torchkern.KernelRidge(torchkern.RBF(3.0), alpha=0.05)
    a.fit(X, y, learn_kernel={"objective": "holdout", "n_iter": 30, "lr": 0.1, "random_state": 3})
    b = learn_kernel(torchkern.KernelRidge(torchkern.RBF(3.0), alpha=0.05), X, y, "holdout",
                     n_iter=30, lr=0.1, random_state=3)
    assert float(a.kernel_.lengthscale.detach()) == pytest.approx(
        float(b.kernel.lengthscale.detach()), rel=1e-12)
    assert float(a.kernel_.lengthscale.detach()) < 1.5


@pytest.mark.parametrize("make", [lambda: torchkern.SVC(torchkern.RBF(5.0)),
                                  lambda: torchkern.KernelLogisticRegression(torchkern.RBF(5.0))],
                         ids=["SVC", "KernelLogisticRegression"])
def test_classifiers_learn_kernel_by_alignment(make):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(80, 2, generator=g, dtype=F64)
    y = ((X ** 2).sum(1) > 1.4).long().numpy()
    est = make().fit(X, y, learn_kernel={"n_iter": 40, "lr": 0.1})  # "auto": alignment
    ls = float(est.kernel_.lengthscale.detach())
    ref = learn_kernel(make(), X, y, "alignment", n_iter=40, lr=0.1)
    assert ls == pytest.approx(float(ref.kernel.lengthscale.detach()), rel=1e-12)
    before = _alignment(rbf_kernel(X.numpy(), gamma=1 / 50), y)
    after = _alignment(rbf_kernel(X.numpy(), gamma=1 / (2 * ls * ls)), y)
    assert after > before + 0.05
    assert est.score(X, y) > make().fit(X, y).score(X, y)


def test_learn_kernel_argument_errors():
    X, y = _wave(20)
    with pytest.raises(TypeError, match="learn_kernel must be None"):
        torchkern.KernelRidge().fit(X, y, learn_kernel=3)
    with pytest.raises(ValueError, match="unknown options"):
        torchkern.KernelRidge().fit(X, y, learn_kernel={"objectiv": "loo"})
    with pytest.raises(ValueError, match="objective must be one of"):
        torchkern.KernelRidge().fit(X, y, learn_kernel="cv")
    with pytest.raises(ValueError, match="needs targets y"):
        torchkern.KernelPCA(torchkern.RBF()).fit(X, learn_kernel="loo")
    with pytest.raises(TypeError, match="must be a torchkern Kernel"):
        torchkern.KernelRidge("precomputed").fit(X @ X.T, y, learn_kernel="loo")


def test_fit_docstrings_document_learn_kernel():
    for est in (torchkern.KernelRidge, torchkern.SVC, torchkern.KernelLogisticRegression,
                torchkern.GaussianProcessRegressor):
        assert "learn_kernel" in est.fit.__doc__
