"""GaussianProcessRegressor's hyperparameter learning: one likelihood implementation with
torchkern.learning, scikit-learn's optimum (from poor starts and with restarts), the
warnings on early stops and optima on a bound, and the one-thread small-fit path."""
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning as SkConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import RBF as SkRBF, ConstantKernel, WhiteKernel
from threadpoolctl import threadpool_limits

import torchkern
from torchkern.learning import log_marginal_likelihood
from torchkern.linalg import ConvergenceWarning

F64 = torch.float64


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """scikit-learn's reference fits run SciPy's L-BFGS-B, whose tiny BLAS calls wait for
    OpenBLAS threads on a busy machine (torchkern limits them itself)."""
    with threadpool_limits(1, user_api="blas"):
        yield


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


# -- poor starts, restarts, and the warnings (issue 21) ---------------------------------
def _sine(n=100):
    g = np.random.default_rng(0)
    X = np.sort(g.uniform(0, 10, size=(n, 1)), 0)
    return X, np.sin(X[:, 0]) + 0.1 * g.standard_normal(n)


def _sk(length_scale, noise, **kw):
    kernel = ConstantKernel(1.0) * SkRBF(length_scale) + WhiteKernel(noise)
    return SkGPR(kernel, **kw)


def _assert_same_optimum(gp, sk):
    assert float(gp.log_marginal_likelihood()) == pytest.approx(
        sk.log_marginal_likelihood_value_, rel=1e-9)
    constant, length_scale, noise = np.exp(sk.kernel_.theta)
    assert float(gp.kernel_.outputscale.detach()) == pytest.approx(constant, rel=1e-5)
    assert float(gp.kernel_.base.lengthscale.detach()) == pytest.approx(length_scale, rel=1e-5)
    assert gp.noise_ == pytest.approx(noise, rel=1e-5)


def test_poor_start_noise_100_reaches_sklearns_optimum():
    # From noise = 100 the raw softplus coordinates stalled after 3 iterations at
    # log p(y) = -247 (signal variance 1.5e-11); log coordinates reach scikit-learn's 67.64.
    X, y = _sine()
    sk = _sk(1.0, 100.0).fit(X, y)
    gp = torchkern.GaussianProcessRegressor(1.0 * torchkern.RBF(1.0), noise=100.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        gp.fit(X, y, optimize=True)
    _assert_same_optimum(gp, sk)
    assert sk.log_marginal_likelihood_value_ > 60  # the fit, not a noise-only optimum
    assert gp.n_iter_ < 100 and gp.loss_history_[-1] == pytest.approx(
        -float(gp.log_marginal_likelihood()) / len(y), rel=1e-12)


def test_restarts_reach_the_best_of_sklearns_restarts():
    # From lengthscale 1e3 both optimizers stop in the same local optimum (a near-constant
    # fit, log p(y) = -98.8); log-uniform restarts within the bounds find the better one.
    X, y = _sine()
    local = _sk(1e3, 1.0).fit(X, y)
    gp = torchkern.GaussianProcessRegressor(1.0 * torchkern.RBF(1e3), noise=1.0).fit(
        X, y, optimize=True)
    _assert_same_optimum(gp, local)
    sk = _sk(1e3, 1.0, n_restarts_optimizer=2, random_state=0).fit(X, y)
    assert sk.log_marginal_likelihood_value_ > local.log_marginal_likelihood_value_ + 100
    gp = torchkern.GaussianProcessRegressor(1.0 * torchkern.RBF(1e3), noise=1.0,
                                            n_restarts_optimizer=2, random_state=0)
    gp.fit(X, y, optimize=True)
    _assert_same_optimum(gp, sk)
    assert float(gp.kernel.base.lengthscale) == pytest.approx(1e3, rel=1e-12)  # untouched


def test_optimum_on_a_bound_warns_like_sklearn():
    # Pure noise: the signal variance goes to its lower bound 1e-5 (scikit-learn warns too).
    X = np.linspace(0, 10, 50)[:, None]
    y = np.random.default_rng(2).standard_normal(50)
    with pytest.warns(SkConvergenceWarning, match="constant_value is close to the specified "
                                                  "lower bound"):
        sk = _sk(1.0, 1.0).fit(X, y)
    gp = torchkern.GaussianProcessRegressor(1.0 * torchkern.RBF(1.0), noise=1.0)
    with pytest.warns(ConvergenceWarning, match=r"degenerate optimum: outputscale = 1e-05 at "
                                                r"its lower bound \(hyperparameter_bounds = "
                                                r"\(1e-05, 100000\)\)") as caught:
        gp.fit(X, y, optimize=True)
    assert float(gp.kernel_.outputscale.detach()) == pytest.approx(1e-5, rel=1e-9)
    assert float(gp.log_marginal_likelihood()) == pytest.approx(
        sk.log_marginal_likelihood_value_, rel=1e-9)
    assert gp.noise_ == pytest.approx(np.exp(sk.kernel_.theta[2]), rel=1e-5)
    assert f"noise = {gp.noise_:.6g}" in str(caught[-1].message)
    # the bounds are the user's: the same warning, and scikit-learn's optimum, at (1e-5, 1)
    X, y = _sine()
    sk = SkGPR(ConstantKernel(1.0, (1e-5, 1.0)) * SkRBF(1.0, (1e-5, 1.0))
               + WhiteKernel(0.5, (1e-5, 1.0))).fit(X, y)
    gp = torchkern.GaussianProcessRegressor(1.0 * torchkern.RBF(1.0), noise=0.5,
                                            hyperparameter_bounds=(1e-5, 1.0))
    with pytest.warns(ConvergenceWarning, match="base.lengthscale = 1 at its upper bound"):
        gp.fit(X, y, optimize=True)
    _assert_same_optimum(gp, sk)


def test_early_stop_warns_with_the_values():
    X, y = _sine()
    gp = torchkern.GaussianProcessRegressor(1.0 * torchkern.RBF(1.0), noise=100.0)
    with pytest.warns(ConvergenceWarning, match="stopped after 1 iterations.*raise n_iter") as w:
        gp.fit(X, y, optimize=True, n_iter=1)
    message = str(w[-1].message)
    assert gp.n_iter_ == 1 and len(gp.loss_history_) == 2
    assert f"log p(y) = {float(gp.log_marginal_likelihood()):.6g}" in message
    assert f"noise = {gp.noise_:.6g}" in message
    assert f"base.lengthscale = {float(gp.kernel_.base.lengthscale.detach()):.6g}" in message


def test_restart_and_bound_arguments_are_checked():
    X, y = _sine(20)
    for kw in (dict(n_restarts_optimizer=-1), dict(n_restarts_optimizer=1.5),
               dict(hyperparameter_bounds=(1.0, 0.1)), dict(hyperparameter_bounds=(0, 1)),
               dict(hyperparameter_bounds=1.0)):
        with pytest.raises(ValueError, match=next(iter(kw))):
            torchkern.GaussianProcessRegressor(**kw).fit(X, y)
    gp = torchkern.GaussianProcessRegressor(n_restarts_optimizer=1, hyperparameter_bounds=None)
    with pytest.raises(ValueError, match="hyperparameter_bounds"):
        gp.fit(X, y, optimize=True)
