"""learn_kernel / fit(learn_kernel=) under the "lml" objective: the noise variance learned
with the kernel is the one the estimator is fitted with (GaussianProcessRegressor's
noise, KernelRidge's alpha). Checked against the dense GP in NumPy: the learned
(lengthscale, σ²) is a stationary point of the exact log marginal likelihood (central
differences) and the predictions are K*(K + σ²I)⁻¹y there. Before, the learned σ² was
dropped and the model fitted with the constructor's (here 0.5 against a learned ~0.01)."""
import numpy as np
import pytest
import torch

import torchkern
from torchkern.learning import learn_kernel


def _data():
    g = torch.Generator().manual_seed(3)
    X = torch.randn(60, 2, generator=g, dtype=torch.float64)
    y = torch.sin(3 * X[:, 0]) + 0.1 * torch.randn(60, generator=g, dtype=torch.float64)
    Xt = torch.randn(7, 2, generator=g, dtype=torch.float64)
    return X, y, Xt


def _rbf(A, B, ell):
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    return np.exp(-0.5 * d2 / ell ** 2)


def _lml(X, y, ell, noise):
    K = _rbf(X, X, ell) + noise * np.eye(len(X))
    L = np.linalg.cholesky(K)
    a = np.linalg.solve(L.T, np.linalg.solve(L, y))
    return -0.5 * y @ a - np.log(np.diag(L)).sum() - 0.5 * len(X) * np.log(2 * np.pi)


def _check_against_dense(model, noise, X, y, Xt):
    Xn, yn, Xtn = X.numpy(), y.numpy(), Xt.numpy()
    ell = float(model.kernel_.lengthscale.detach())
    # a stationary point of the exact LML in (log ell, log noise)
    for i in range(2):
        h = np.zeros(2)
        h[i] = 1e-4
        up = _lml(Xn, yn, *np.exp(np.log([ell, noise]) + h))
        down = _lml(Xn, yn, *np.exp(np.log([ell, noise]) - h))
        assert abs(up - down) / 2e-4 < 1e-3
    K = _rbf(Xn, Xn, ell) + noise * np.eye(len(Xn))
    ref = _rbf(Xtn, Xn, ell) @ np.linalg.solve(K, yn)
    np.testing.assert_allclose(np.asarray(model.predict(Xt)), ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("make, param", [
    (lambda: torchkern.GaussianProcessRegressor(torchkern.RBF(1.0), noise=0.5), "noise"),
    (lambda: torchkern.KernelRidge(torchkern.RBF(1.0), alpha=0.5), "alpha")])
def test_learn_kernel_lml_sets_the_noise_parameter(make, param):
    X, y, Xt = _data()
    model = learn_kernel(make(), X, y, "lml")
    learned = model.learn_kernel_result_.hyperparameters["noise"]
    assert 1e-3 < learned < 0.05  # the data's 0.01, far from the start
    assert getattr(model, param) == pytest.approx(learned, rel=1e-12)
    if param == "noise":
        assert model.noise_ == pytest.approx(learned, rel=1e-12)
    _check_against_dense(model, learned, X, y, Xt)


def test_fit_learn_kernel_lml_fits_with_the_learned_noise():
    X, y, Xt = _data()
    gp = torchkern.GaussianProcessRegressor(torchkern.RBF(1.0), noise=0.5)
    gp.fit(X, y, learn_kernel="lml")
    assert gp.noise == 0.5  # the constructor's parameter is left as it was
    learned = gp.learn_kernel_result_.hyperparameters["noise"]
    assert gp.noise_ == pytest.approx(learned, rel=1e-12)
    _check_against_dense(gp, learned, X, y, Xt)


def test_loo_objective_leaves_the_noise_parameter():
    X, y, _ = _data()
    krr = learn_kernel(torchkern.KernelRidge(torchkern.RBF(1.0), alpha=0.5), X, y, "loo")
    assert krr.alpha == 0.5
