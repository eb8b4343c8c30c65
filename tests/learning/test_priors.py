"""Hyperparameter priors and the MAP objective, against GPyTorch's
ExactMarginalLogLikelihood with the same priors (GPyTorch divides its MLL, priors
included, by n; gpytorch is a dependency of torchkern's integrations)."""
import copy
import pickle
import warnings

import gpytorch
import numpy as np
import pytest
import torch
from sklearn.base import clone
from torch.distributions import Gamma, HalfCauchy, LogNormal

import torchkern
from torchkern.learning import learn_kernel, log_marginal_likelihood, log_posterior, log_prior


F64 = torch.float64
# lengthscale, outputscale, noise priors: (torch.distributions, GPyTorch's priors)
LS, OS, NOISE = (3.0, 6.0), 1.0, (-2.0, 1.0)


def _data(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=F64) * 3
    y = torch.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X, y


def _ours(lengthscale=0.7, outputscale=1.3):
    return torchkern.ScaleKernel(torchkern.RBF(lengthscale, lengthscale_prior=Gamma(*LS)),
                                 outputscale=outputscale, outputscale_prior=HalfCauchy(OS))


def _gpytorch(X, y, lengthscale=0.7, outputscale=1.3, noise=0.05):
    from gpytorch.priors import GammaPrior, HalfCauchyPrior, LogNormalPrior

    def f64(*args):  # GPyTorch's priors evaluate in their parameters' dtype (its
        return [torch.tensor(a, dtype=F64) for a in args]  # HalfCauchy ignores .double())

    class Model(gpytorch.models.ExactGP):
        def __init__(self, X, y, likelihood):
            super().__init__(X, y, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(lengthscale_prior=GammaPrior(*f64(*LS))),
                outputscale_prior=HalfCauchyPrior(*f64(OS)))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    likelihood = gpytorch.likelihoods.GaussianLikelihood(noise_prior=LogNormalPrior(*f64(*NOISE)))
    model = Model(X, y, likelihood).double()
    # float64 tensors: a Python float would be set through float32
    model.covar_module.base_kernel.lengthscale = torch.tensor(lengthscale, dtype=F64)
    model.covar_module.outputscale = torch.tensor(outputscale, dtype=F64)
    likelihood.noise = torch.tensor(noise, dtype=F64)
    model.train()
    likelihood.train()
    return model, likelihood, gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)


def _gpytorch_value_and_grads(X, y, **values):
    """GPyTorch's MLL and its derivatives in (lengthscale, outputscale, noise) — the raw
    parameters' gradients divided by d value / d raw = sigmoid(raw) (softplus constraints,
    the noise's with its 1e-4 offset)."""
    model, likelihood, mll = _gpytorch(X, y, **values)
    with gpytorch.settings.max_cholesky_size(10 ** 6), \
            gpytorch.settings.fast_computations(False, False, False):
        value = mll(model(X), y)
    raws = [model.covar_module.base_kernel.raw_lengthscale, model.covar_module.raw_outputscale,
            likelihood.noise_covar.raw_noise]
    grads = torch.autograd.grad(value, raws)
    return value, torch.stack([(g / torch.sigmoid(r)).reshape(()) for g, r in zip(grads, raws)])


def test_log_posterior_equals_gpytorch_mll_with_priors_values_and_gradients():
    X, y = _data()
    n = X.shape[0]
    for ls, os_, noise in [(0.7, 1.3, 0.05), (2.0, 0.4, 0.3)]:
        k = _ours(ls, os_)
        s2 = torch.tensor(noise, dtype=F64, requires_grad=True)
        ours = log_posterior(k, X, y, s2, noise_prior=LogNormal(*NOISE)) / n
        raws = [k.base.raw_lengthscale, k.raw_outputscale]
        g = torch.autograd.grad(ours, raws + [s2])
        ours_grad = torch.stack([(gi / torch.sigmoid(r)).reshape(()) for gi, r in
                                 zip(g[:2], raws)] + [g[2].reshape(())])
        ref, ref_grad = _gpytorch_value_and_grads(X, y, lengthscale=ls, outputscale=os_,
                                                  noise=noise)
        ours, ref = float(ours.detach()), float(ref.detach())
        assert abs(ours - ref) < 1e-8 * max(1.0, abs(ref))
        torch.testing.assert_close(ours_grad, ref_grad, rtol=1e-8, atol=1e-10)
        # the prior term is what differs from the likelihood (independent of GPyTorch)
        manual = (Gamma(*LS).log_prob(torch.tensor(ls)).double()
                  + HalfCauchy(OS).log_prob(torch.tensor(os_)).double()
                  + LogNormal(*NOISE).log_prob(torch.tensor(noise)).double())
        diff = log_posterior(k, X, y, noise, noise_prior=LogNormal(*NOISE)) \
            - log_marginal_likelihood(k, X, y, noise)
        assert abs(float(diff.detach()) - float(manual)) < 1e-5


def _gpytorch_map(X, y, start):
    """GPyTorch's MAP hyperparameters by torch.optim.LBFGS (strong Wolfe) run to a
    stationary point in its raw parameters."""
    model, likelihood, mll = _gpytorch(X, y, *start)
    opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=400, tolerance_grad=1e-11,
                            tolerance_change=1e-15, history_size=50,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        with gpytorch.settings.max_cholesky_size(10 ** 6), \
                gpytorch.settings.fast_computations(False, False, False):
            loss = -mll(model(X), y)
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
    with torch.no_grad():
        return np.array([float(model.covar_module.base_kernel.lengthscale),
                         float(model.covar_module.outputscale), float(likelihood.noise)])


def test_map_optimum_equals_gpytorch_lbfgs():
    X, y = _data(30, seed=1)
    ref = _gpytorch_map(X, y, (1.0, 1.0, 0.2))
    gp = torchkern.GaussianProcessRegressor(_ours(1.0, 1.0), noise=0.2,
                                            noise_prior=LogNormal(*NOISE))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # converged, no bound hit
        gp.fit(X, y, optimize=True)
    got = np.array([float(gp.kernel_.base.lengthscale.detach()),
                    float(gp.kernel_.outputscale.detach()),
                    gp.noise_])
    np.testing.assert_allclose(got, ref, rtol=5e-5)  # measured 1.1e-6
    # the priors moved the optimum: plain maximum likelihood lands elsewhere
    ml = torchkern.GaussianProcessRegressor(torchkern.ScaleKernel(torchkern.RBF(1.0)),
                                            noise=0.2).fit(X, y, optimize=True)
    ml_got = np.array([float(ml.kernel_.base.lengthscale.detach()),
                       float(ml.kernel_.outputscale.detach()), ml.noise_])
    assert np.abs(ml_got / ref - 1).max() > 1e-2
    # learn_kernel's "map" objective reaches the same point (its noise learned from 1)
    res = learn_kernel(torchkern.GaussianProcessRegressor(_ours(1.0, 1.0), noise=0.2,
                                                          noise_prior=LogNormal(*NOISE)),
                       X, y, "map").learn_kernel_result_
    hp = res.hyperparameters
    got = np.array([hp[k] for k in sorted(hp)])  # base.lengthscale, noise, outputscale
    np.testing.assert_allclose(got, ref[[0, 2, 1]], rtol=5e-5)  # measured 7.4e-6


def test_prior_api_forms_agree_and_survive_copies():
    a = torchkern.RBF(0.5, lengthscale_prior=Gamma(3.0, 6.0))
    b = torchkern.RBF(0.5).set_prior("lengthscale", Gamma(3.0, 6.0))
    c = torchkern.RBF(0.5)
    c.register_prior("lengthscale_prior", Gamma(3.0, 6.0), "lengthscale")
    d = torchkern.RBF(0.5)
    d.register_prior("log_ls", torch.distributions.Normal(0.0, 1.0), lambda m: m.lengthscale.log())
    # Gamma(3, 6) at 0.5, in float64 (the float32 prior is evaluated in the
    # hyperparameter's dtype): 3 log 6 - log 2 + 2 log 0.5 - 3
    exact = 3 * np.log(6.0) - np.log(2.0) + 2 * np.log(0.5) - 3.0
    for k in (a, b, c, clone(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert abs(float(k.log_prior().detach()) - exact) < 1e-14
        assert isinstance(k.lengthscale_prior, Gamma)
    assert abs(float(d.log_prior().detach()) - (-0.5 * np.log(2 * np.pi) - 0.5 * np.log(0.5) ** 2)) < 1e-14
    # ARD: the log densities of every entry add up
    ard = torchkern.RBF([0.5, 2.0], lengthscale_prior=LogNormal(0.0, 1.0))
    ref = sum(-np.log(v) - 0.5 * np.log(2 * np.pi) - 0.5 * np.log(v) ** 2 for v in (0.5, 2.0))
    assert abs(float(ard.log_prior().detach()) - ref) < 1e-13
    # sums and products collect their terms' priors; set_params keeps them
    s = a + torchkern.Laplacian(1.0, lengthscale_prior=Gamma(2.0, 1.0))
    assert [name for name, *_ in s.named_priors()] == ["kernels.0.lengthscale_prior",
                                                       "kernels.1.lengthscale_prior"]
    m = torchkern.Matern(lengthscale=1.0, nu=1.5, lengthscale_prior=Gamma(2.0, 1.0))
    m.set_params(nu=2.5)
    assert abs(float(m.log_prior().detach()) - (2 * np.log(1.0) - 1.0)) < 1e-14
    b.set_prior("lengthscale", None)
    assert float(b.log_prior().detach()) == 0.0
    # the gradient reaches the hyperparameter: d/dl log Gamma(l; 3, 6) = 2/l - 6
    (g,) = torch.autograd.grad(a.log_prior(), a.raw_lengthscale)
    assert abs(float((g / torch.sigmoid(a.raw_lengthscale)).detach()) - (2 / 0.5 - 6)) < 1e-12
    assert float((log_prior(a, 0.1, Gamma(1.0, 1.0)) - a.log_prior()).detach()) == pytest.approx(-0.1)


def test_bad_priors_are_named():
    with pytest.raises(TypeError, match="lenghtscale_prior"):
        torchkern.RBF(lenghtscale_prior=Gamma(3.0, 6.0))
    with pytest.raises(TypeError, match="prior must be"):
        torchkern.RBF(lengthscale_prior=3.0)
    with pytest.raises(ValueError, match="param_or_closure"):
        torchkern.RBF().register_prior("p", Gamma(1.0, 1.0), "outputscale")
    with pytest.raises(ValueError, match="taken"):
        torchkern.RBF().register_prior("lengthscale", Gamma(1.0, 1.0), "lengthscale")
    with pytest.raises(TypeError, match="noise_prior"):
        torchkern.GaussianProcessRegressor(noise_prior="gamma").fit(torch.zeros(3, 1),
                                                                   torch.zeros(3))
    X, y = _data(10)
    with pytest.raises(ValueError, match="'map' needs priors"):
        learn_kernel(torchkern.KernelRidge(torchkern.RBF()), X, y, "map")


def test_gpytorch_float32_priors_are_evaluated_in_float64():
    # GPyTorch's priors built from Python floats are float32; HalfCauchyPrior evaluates
    # with its base_dist's scale, which nn.Module.to does not convert (2.5e-8 off before)
    from gpytorch.priors import GammaPrior, HalfCauchyPrior, LogNormalPrior
    v = 0.3
    closed = {  # log densities at v, by hand
        HalfCauchyPrior(1.0): np.log(2 / np.pi) - np.log1p(v * v),
        GammaPrior(3.0, 6.0): 3 * np.log(6.0) - np.log(2.0) + 2 * np.log(v) - 6 * v,
        LogNormalPrior(0.0, 1.0): -np.log(v) - 0.5 * np.log(2 * np.pi) - 0.5 * np.log(v) ** 2,
    }
    for prior, ref in closed.items():
        k = torchkern.RBF(v).set_prior("lengthscale", prior)
        v64 = float(k.lengthscale.detach())  # softplus(raw): v to rounding
        assert abs(v64 - v) < 1e-15
        assert abs(float(k.log_prior().detach()) - ref) < 1e-14, type(prior).__name__
        assert abs(float(log_prior(torchkern.RBF(1.0), v, prior).detach())
                   - (ref + 0.0)) < 1e-14  # the noise prior path
