"""learn_kernel on estimators built with kernel=None: the default kernel fit would use
(RBF() with lengthscale 1) is learned, against numpy references of the objectives."""
import numpy as np
import pytest
import torch
from sklearn.kernel_ridge import KernelRidge as SkKRR
from sklearn.metrics.pairwise import rbf_kernel

import torchkern
from torchkern._estimator import resolve_kernel
from torchkern.learning import learn_kernel
from torchkern.learning.estimator import _kernel_to_learn

F64 = torch.float64


def _data(seed=0, n=40):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 1, generator=g, dtype=F64) * 6
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X, y


def _loo_numpy(X, y, ls, alpha):
    """Mean squared leave-one-out residual of kernel ridge, (y_i − ŷ_i)/(1 − H_ii)."""
    K = rbf_kernel(X, gamma=1 / (2 * ls * ls))
    H = K @ np.linalg.inv(K + alpha * np.eye(len(y)))
    return np.mean(((y - H @ y) / (1 - np.diag(H))) ** 2)


def test_the_learned_default_is_the_default_fit_uses():
    X, _ = _data()
    fit_default = resolve_kernel(None)
    learn_default = _kernel_to_learn(torchkern.KernelRidge())
    assert type(learn_default) is type(fit_default)
    torch.testing.assert_close(learn_default(X).to_dense(), fit_default(X).to_dense(),
                               rtol=0, atol=0)


def test_learn_kernel_learns_the_default_rbf_and_fits_with_it():
    X, y = _data()
    model = learn_kernel(torchkern.KernelRidge(alpha=0.05), X, y, "loo")
    assert isinstance(model.kernel, torchkern.RBF)
    ls = float(model.kernel.lengthscale.detach())
    x, t = X.numpy(), y.numpy()
    # the objective improves on the unlearned default (lengthscale 1: 0.0117 → 0.0076) and
    # reaches the minimum of a numpy grid search
    learned = _loo_numpy(x, t, ls, 0.05)
    assert learned < 0.9 * _loo_numpy(x, t, 1.0, 0.05)
    assert learned <= 1.001 * min(_loo_numpy(x, t, g, 0.05) for g in np.geomspace(0.1, 3, 60))
    assert model.learn_kernel_result_.converged
    # the fitted estimator is the one fitted with that kernel passed explicitly
    explicit = torchkern.KernelRidge(torchkern.RBF(ls), alpha=0.05).fit(X, y)
    torch.testing.assert_close(model.predict(X), explicit.predict(X), rtol=1e-10, atol=1e-12)
    sk = SkKRR(alpha=0.05, kernel="rbf", gamma=1 / (2 * ls * ls)).fit(x, t)
    np.testing.assert_allclose(np.asarray(model.predict(X)), sk.predict(x), rtol=1e-7, atol=1e-9)


def test_fit_learn_kernel_with_kernel_none_keeps_the_parameter():
    X, y = _data(1)
    model = torchkern.KernelRidge(alpha=0.05).fit(X, y, learn_kernel="loo")
    assert model.kernel is None  # the constructor parameter stays (scikit-learn's rule)
    ls = float(model.kernel_.lengthscale.detach())
    x, t = X.numpy(), y.numpy()
    assert _loo_numpy(x, t, ls, 0.05) < _loo_numpy(x, t, 1.0, 0.05)
    explicit = torchkern.KernelRidge(torchkern.RBF(ls), alpha=0.05).fit(X, y)
    torch.testing.assert_close(model.predict(X), explicit.predict(X), rtol=1e-10, atol=1e-12)


def test_kernels_without_hyperparameters_are_refused_by_name():
    X, y = _data()
    with pytest.raises(ValueError, match=r"estimator.kernel=Linear\(\) has no hyperparameters"):
        learn_kernel(torchkern.KernelRidge(torchkern.Linear()), X, y)
    with pytest.raises(TypeError, match=r"estimator.kernel='precomputed' has no hyperparameters"):
        learn_kernel(torchkern.KernelRidge("precomputed"), X @ X.T, y)
