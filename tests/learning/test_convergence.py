"""Kernel learning converges, or says so (issue 22 §1): L-BFGS-B on log-hyperparameters
against dense grids of the objectives in numpy, max_iter warnings, Adam and other
torch.optim optimizers, restarts, the "gcv" objective, the result on the estimator."""
import math
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_diabetes
from sklearn.metrics.pairwise import rbf_kernel

import torchkern
from torchkern.learning import KernelLearningResult, fit_kernel, gcv, learn_kernel
from torchkern.linalg import ConvergenceWarning

F64 = torch.float64
ALPHA = 0.3


def _diabetes(n=150):
    """The first n rows of scikit-learn's diabetes, features and target standardized."""
    X, y = load_diabetes(return_X_y=True)
    X, y = X[:n], y[:n]
    X = (X - X.mean(0)) / X.std(0)
    return X, (y - y.mean()) / y.std()


def _loo_numpy(X, y, ls, alpha=ALPHA):
    """Mean squared leave-one-out residual c_i / [(K + αI)⁻¹]_ii in numpy."""
    A = np.linalg.inv(rbf_kernel(X, gamma=1 / (2 * ls * ls)) + alpha * np.eye(len(y)))
    return np.mean((A @ y / np.diag(A)) ** 2)


def _gcv_numpy(X, y, ls, alpha=ALPHA):
    """n ‖(K + αI)⁻¹y‖² / (tr (K + αI)⁻¹)² in numpy."""
    A = np.linalg.inv(rbf_kernel(X, gamma=1 / (2 * ls * ls)) + alpha * np.eye(len(y)))
    return len(y) * np.sum((A @ y) ** 2) / np.trace(A) ** 2


def _grid_argmin(f, lo=0.1, hi=100.0):
    """The minimizer of f(ℓ) on a dense grid: 121 log-spaced points over [lo, hi], then 401
    over the two cells around the best (relative spacing 2.9e-4)."""
    coarse = np.geomspace(lo, hi, 121)
    i = int(np.argmin([f(v) for v in coarse]))
    fine = np.geomspace(coarse[max(i - 1, 0)], coarse[min(i + 1, 120)], 401)
    return fine[int(np.argmin([f(v) for v in fine]))]


@pytest.fixture(scope="module")
def diabetes():
    from threadpoolctl import threadpool_limits
    X, y = _diabetes()
    with threadpool_limits(1):  # 150 x 150 inverses: threads only wait on a busy machine
        return X, y, _grid_argmin(lambda v: _loo_numpy(X, y, v))


@pytest.mark.parametrize("start", [0.1, 100.0])
def test_loo_from_far_starts_reaches_the_grid_optimum(diabetes, start):
    X, y, best = diabetes
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # converged: no warning
        est = torchkern.KernelRidge(torchkern.RBF(start), alpha=ALPHA).fit(
            torch.tensor(X), torch.tensor(y), learn_kernel="loo")
    ls = float(est.kernel_.lengthscale.detach())
    assert ls == pytest.approx(best, rel=1e-3)
    assert float(est.kernel.lengthscale.detach()) == pytest.approx(start)  # param untouched
    res = est.learn_kernel_result_
    assert isinstance(res, KernelLearningResult) and res.converged and res.optimizer == "lbfgs"
    assert res.loss == pytest.approx(_loo_numpy(X, y, ls), rel=1e-10)
    assert res.loss <= _loo_numpy(X, y, best) * (1 + 1e-9)
    assert len(res.history) == res.n_iter + 1 and res.history[-1] == pytest.approx(res.loss)
    assert est.kernel_learning_history_ == res.history
    assert res.hyperparameters["lengthscale"] == pytest.approx(ls, rel=1e-12)
    if start == 0.1:
        # ℓ = 0.1 is far below the data's distances: K = I to 1e-12, gradient ~ 1e-12, a
        # plateau that SciPy's test alone calls converged; the probe steps leave it
        assert res.history[0] == pytest.approx(np.mean(y ** 2), rel=1e-6)  # LOO of K = I
        assert "probe" in res.reason


def test_gcv_objective_reaches_the_minimum_of_learning_gcv(diabetes):
    from threadpoolctl import threadpool_limits
    X, y, _ = diabetes
    with threadpool_limits(1):
        best = _grid_argmin(lambda v: _gcv_numpy(X, y, v))
    Xt, yt = torch.tensor(X), torch.tensor(y)
    model = learn_kernel(torchkern.KernelRidge(torchkern.RBF(1.0), alpha=ALPHA), Xt, yt, "gcv")
    ls = float(model.kernel.lengthscale.detach())
    assert ls == pytest.approx(best, rel=1e-3)
    # the objective is learning.gcv itself: its value there, and no lower on the grid
    ref = float(gcv(torchkern.RBF(ls), Xt, yt, ALPHA).detach())
    assert model.learn_kernel_result_.loss == pytest.approx(ref, rel=1e-12)
    assert ref == pytest.approx(_gcv_numpy(X, y, ls), rel=1e-10)
    assert ref <= float(gcv(torchkern.RBF(best), Xt, yt, ALPHA).detach()) * (1 + 1e-9)


def test_max_iter_1_warns_with_the_last_change(diabetes):
    X, y, _ = diabetes
    with pytest.warns(ConvergenceWarning, match=r"max_iter = 1 iterations reached without "
                      r"converging \(last relative change of the objective [0-9.e+-]+"):
        est = torchkern.KernelRidge(torchkern.RBF(1.0), alpha=ALPHA).fit(
            X, y, learn_kernel={"objective": "loo", "max_iter": 1})
    res = est.learn_kernel_result_
    assert not res.converged and res.n_iter == 1 and "max_iter" in res.reason
    # the change it names is the last iteration's relative decrease of the LOO error, in
    # numpy (L-BFGS-B minimizes log LOO: its tests are relative to the LOO's value)
    h = res.history
    change = float(res.reason.split("objective ")[1].split(",")[0])
    assert change == pytest.approx((h[0] - h[1]) / max(h[0], h[1]), rel=1e-2)
    ls = float(est.kernel_.lengthscale.detach())
    assert h[1] == pytest.approx(_loo_numpy(X, y, ls), rel=1e-10)


def test_adam_and_other_torch_optimizers_as_options(diabetes):
    X, y, best = diabetes
    est = torchkern.KernelRidge(torchkern.RBF(3.0), alpha=ALPHA).fit(
        X, y, learn_kernel={"objective": "loo", "optimizer": "adam", "lr": 0.1,
                            "max_iter": 150})
    res = est.learn_kernel_result_
    assert res.optimizer == "adam" and res.n_iter <= 150
    ls = float(est.kernel_.lengthscale.detach())
    # Adam in the raw parameters gets near the optimum, not onto it
    assert _loo_numpy(X, y, ls) <= _loo_numpy(X, y, best) * 1.005
    assert res.loss == pytest.approx(_loo_numpy(X, y, ls), rel=1e-10)
    # a torch.optim class (built with lr) and a factory
    for opt in (torch.optim.Rprop, lambda ps: torch.optim.SGD(ps, lr=0.5)):
        res = learn_kernel(torchkern.KernelRidge(torchkern.RBF(3.0), alpha=ALPHA), X, y, "loo",
                           optimizer=opt, lr=0.1, max_iter=100).learn_kernel_result_
        assert res.history[-1] < res.history[0] and res.n_iter <= 100
    # too few steps to get there: says the loss was still falling
    with pytest.warns(ConvergenceWarning, match="still falling"):
        learn_kernel(torchkern.KernelRidge(torchkern.RBF(1.0), alpha=ALPHA), X, y, "loo",
                     optimizer="adam", lr=0.01, max_iter=20)


def test_n_restarts_keeps_the_best_run():
    # two minima in θ = log ℓ: a local one at θ ≈ 0 (the start's basin), the global one
    # at θ ≈ 3
    k = torchkern.RBF(1.0)

    def objective():
        t = k.lengthscale.log()
        return t ** 2 * (t - 3) ** 2 - 0.5 * t

    alone = fit_kernel(objective, k)
    local = float(k.lengthscale.detach())
    assert alone.converged and abs(math.log(local)) < 0.2
    k.lengthscale = 1.0
    res = fit_kernel(objective, k, n_restarts=4, random_state=0, bounds=(1e-3, 1e3))
    ls = float(k.lengthscale.detach())
    assert len(res.run_losses) == 5 and res.run_losses[0] == pytest.approx(alone.loss)
    assert res.loss == min(res.run_losses) < alone.loss
    assert res.start.startswith("restart")
    assert ls > math.exp(2.8)  # the global minimum
    t = np.linspace(-7, 7, 200001)  # its value on a dense grid
    grid = np.min(t ** 2 * (t - 3) ** 2 - 0.5 * t)
    assert grid - 1e-7 < res.loss <= grid + 1e-12
    k.lengthscale = 1.0
    again = fit_kernel(objective, k, n_restarts=4, random_state=0, bounds=(1e-3, 1e3))
    assert again.run_losses == res.run_losses  # random_state fixes the starts


def test_a_start_with_zero_gradient_warns_and_restarts_leave_it(diabetes):
    X, y, best = diabetes
    # ℓ = 0.01: the Gram matrix is the identity exactly, the gradient exactly 0
    with pytest.warns(ConvergenceWarning, match="flat at the start"):
        est = torchkern.KernelRidge(torchkern.RBF(0.01), alpha=ALPHA).fit(
            X, y, learn_kernel="loo")
    res = est.learn_kernel_result_
    assert not res.converged and "flat at the start" in res.reason and res.n_iter == 0
    assert float(est.kernel_.lengthscale.detach()) == pytest.approx(0.01)
    est = torchkern.KernelRidge(torchkern.RBF(0.01), alpha=ALPHA).fit(
        X, y, learn_kernel={"objective": "loo", "n_restarts": 3, "random_state": 0,
                            "bounds": (1e-2, 1e3)})
    assert float(est.kernel_.lengthscale.detach()) == pytest.approx(best, rel=1e-3)


def test_lml_objective_learns_the_noise_to_the_gp_optimum():
    # "lml": −log p(y)/n over the lengthscale and the noise, the GP's own objective
    X, y = _diabetes(80)
    est = torchkern.KernelRidge(torchkern.RBF(1.0), alpha=ALPHA).fit(X, y, learn_kernel="lml")
    gp = torchkern.GaussianProcessRegressor(torchkern.RBF(1.0), noise=1.0).fit(
        X, y, optimize=True)
    assert float(est.kernel_.lengthscale.detach()) == pytest.approx(
        float(gp.kernel_.lengthscale.detach()), rel=1e-3)
    assert est.learn_kernel_result_.hyperparameters["noise"] == pytest.approx(gp.noise_, rel=1e-3)


def test_learning_arguments_are_checked():
    X, y = _diabetes(20)
    k = torchkern.RBF(1.0)
    with pytest.raises(ValueError, match="max_iter"):
        fit_kernel(lambda: k.lengthscale.sum(), k, max_iter=0)
    with pytest.raises(ValueError, match="n_restarts"):
        fit_kernel(lambda: k.lengthscale.sum(), k, n_restarts=-1)
    with pytest.raises(ValueError, match="bounds"):
        fit_kernel(lambda: k.lengthscale.sum(), k, bounds=(1.0, 0.1))
    w = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="n_restarts > 0"):
        fit_kernel(lambda: (w ** 2).sum(), w, n_restarts=2)
    with pytest.raises(ValueError, match="optimizer"):
        learn_kernel(torchkern.KernelRidge(torchkern.RBF()), X, y, "loo", optimizer="newton")
    with pytest.raises(ValueError, match="unknown options"):
        torchkern.KernelRidge().fit(X, y, learn_kernel={"objective": "loo", "optimiser": "adam"})


def test_gp_adam_is_the_learning_loop():
    # GaussianProcessRegressor(optimizer="adam") runs fit_kernel's torch.optim loop: the
    # same steps on the same objective give the same hyperparameters and losses
    X, y = _diabetes(60)
    gp = torchkern.GaussianProcessRegressor(torchkern.RBF(1.0), noise=1.0, optimizer="adam")
    gp.fit(X, y, optimize=True, n_iter=25, lr=0.05)
    k = torchkern.RBF(1.0)
    raw = torch.tensor(math.log(math.expm1(1.0)), dtype=F64, requires_grad=True)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    res = fit_kernel(lambda: -torchkern.learning.log_marginal_likelihood(
        k, Xt, yt, torch.nn.functional.softplus(raw)) / len(y), [k, raw], optimizer="adam",
        lr=0.05, max_iter=25, patience=None)
    assert float(gp.kernel_.lengthscale.detach()) == pytest.approx(
        float(k.lengthscale.detach()), rel=1e-10)
    assert gp.noise_ == pytest.approx(float(torch.nn.functional.softplus(raw.detach())), rel=1e-10)
    np.testing.assert_allclose(gp.loss_history_, res.history, rtol=1e-10)
    assert res.history[-1] < res.history[0] - 0.05


def test_callback_stops_during_the_probes_of_a_flat_start():
    # gradient 1e-6 < gtol at ℓ = 1: the start is probed, and a callback returning True
    # there stops the run like any other step (it raised StopIteration out of fit_kernel)
    k = torchkern.RBF(1.0)
    res = fit_kernel(lambda: 1e-7 * (k.lengthscale.log() - 5) ** 2, k,
                     callback=lambda i, loss: True)
    assert res.n_iter == 1 and not res.converged and "callback" in res.reason
    assert "probe" in res.reason and float(k.lengthscale.detach()) > 1.0
