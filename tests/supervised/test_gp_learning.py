"""GaussianProcessRegressor's hyperparameter learning: one likelihood implementation with
torchkern.learning, scikit-learn's optimum, and the one-thread small-fit path."""
import numpy as np
import pytest
import torch
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import RBF as SkRBF, ConstantKernel, WhiteKernel

import torchkern
from torchkern.learning import log_marginal_likelihood

F64 = torch.float64


def _data(n, seed=0):
    g = np.random.default_rng(seed)
    X = g.uniform(-3, 3, size=(n, 2))
    return X, np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * g.standard_normal(n)


def test_fit_optimize_reaches_sklearns_optimum_and_restores_threads():
    X, y = _data(150)
    sk = SkGPR(ConstantKernel() * SkRBF(1.0) + WhiteKernel(0.1), random_state=0).fit(X, y)
    threads = torch.get_num_threads()
    gp = torchkern.GaussianProcessRegressor(1.0 * torchkern.RBF(1.0), noise=0.1)
    gp.fit(X, y, optimize=True)
    assert torch.get_num_threads() == threads
    assert float(gp.log_marginal_likelihood()) == pytest.approx(
        sk.log_marginal_likelihood_value_, rel=1e-6)
    theta = np.exp(sk.kernel_.theta)  # constant, lengthscale, noise
    assert float(gp.kernel_.outputscale) == pytest.approx(theta[0], rel=1e-3)
    assert float(gp.kernel_.base.lengthscale) == pytest.approx(theta[1], rel=1e-3)
    assert gp.noise_ == pytest.approx(theta[2], rel=1e-3)
    # one implementation: the estimator's value is learning.log_marginal_likelihood's
    ours = log_marginal_likelihood(gp.kernel_, torch.tensor(X), torch.tensor(y), gp.noise_)
    assert float(ours.detach()) == pytest.approx(float(gp.log_marginal_likelihood()), rel=1e-13)


@pytest.mark.parametrize("mean", ["zero", "constant"])
def test_likelihood_gradient_in_noise_and_targets_against_finite_differences(mean):
    from torchkern.supervised.gp import lml_cholesky
    X, y = _data(12, seed=1)
    K = torchkern.RBF(0.8)(torch.tensor(X)).to_dense().detach()
    Y = torch.tensor(y + 2.0)[:, None].requires_grad_()
    s2 = torch.tensor(0.05, dtype=F64, requires_grad=True)
    Kp = K.clone().requires_grad_()

    def f(K_, s2_, Y_):  # K enters symmetrized, as a kernel's Gram matrix does
        return lml_cholesky((K_ + K_.T) / 2, Y_, s2_, constant_mean=mean == "constant")[0]

    assert torch.autograd.gradcheck(f, (Kp, s2, Y))
