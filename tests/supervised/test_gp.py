"""GaussianProcessRegressor against scikit-learn's GPR, dense Gaussian algebra and KRR."""
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel
from sklearn.model_selection import KFold, cross_val_score

from torchkern import RBF, GaussianProcessRegressor, KernelRidge
from torchkern._estimator import NotFittedError

LS, NOISE = 0.7, 0.05


def _data(n=120, d=2, offset=0.0, r=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = np.sin(2 * X).sum(1) + offset
    y = f + 0.1 * rng.normal(size=n)
    if r is not None:
        y = np.stack([y * (j + 1) + j for j in range(r)], 1)
    return X, y, rng.normal(size=(25, d))


def _close(a, b, tol=1e-6):
    a = np.asarray(a.detach()) if isinstance(a, torch.Tensor) else np.asarray(a)
    return np.abs(a - b).max() <= tol * max(1.0, np.abs(b).max())


@pytest.mark.parametrize("normalize_y", [False, True])
def test_posterior_and_log_marginal_likelihood_equal_sklearn(normalize_y):
    X, y, Xt = _data(offset=2.0)
    sk = SkGPR(SkRBF(LS), alpha=NOISE, optimizer=None, normalize_y=normalize_y).fit(X, y)
    gp = GaussianProcessRegressor(RBF(LS), noise=NOISE, normalize_y=normalize_y).fit(X, y)
    m_ref, s_ref = sk.predict(Xt, return_std=True)
    _, c_ref = sk.predict(Xt, return_cov=True)
    m, s = gp.predict(Xt, return_std=True)
    _, c = gp.predict(Xt, return_cov=True)
    assert m.shape == (25,) and s.shape == (25,) and c.shape == (25, 25)
    assert _close(m, m_ref) and _close(s, s_ref) and _close(c, c_ref)
    assert _close(gp.log_marginal_likelihood(), sk.log_marginal_likelihood_value_)
    assert _close(gp.alpha_, sk.alpha_)


def test_multi_target_and_scaled_kernel_equal_sklearn():
    X, Y, Xt = _data(r=2)
    sk = SkGPR(ConstantKernel(2.0) * SkRBF(LS), alpha=NOISE, optimizer=None,
               normalize_y=True).fit(X, Y)
    gp = GaussianProcessRegressor(2.0 * RBF(LS), noise=NOISE, normalize_y=True).fit(X, Y)
    m_ref, s_ref = sk.predict(Xt, return_std=True)
    m, s = gp.predict(Xt, return_std=True)
    assert m.shape == (25, 2) and s.shape == (25, 2)
    assert _close(m, m_ref) and _close(s, s_ref)
    assert _close(gp.log_marginal_likelihood(), sk.log_marginal_likelihood_value_)


def test_constant_mean_is_the_maximum_likelihood_constant():
    X, y, Xt = _data(offset=3.0)
    gp = GaussianProcessRegressor(RBF(LS), noise=NOISE, mean="constant").fit(X, y)
    # Generalized least squares: μ = 1ᵀA⁻¹y / 1ᵀA⁻¹1 with A = K + σ²I (dense).
    A = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / (2 * LS**2)) + NOISE * np.eye(len(X))
    Ai1, Aiy = np.linalg.solve(A, np.ones(len(X))), np.linalg.solve(A, y)
    mu = Ai1 @ y / Ai1.sum()
    assert abs(float(gp.mean_) - mu) < 1e-8
    # ... which is the zero-mean GP on y − μ, shifted by μ.
    sk = SkGPR(SkRBF(LS), alpha=NOISE, optimizer=None).fit(X, y - mu)
    m_ref, s_ref = sk.predict(Xt, return_std=True)
    m, s = gp.predict(Xt, return_std=True)
    assert _close(m, m_ref + mu) and _close(s, s_ref)
    assert _close(gp.log_marginal_likelihood(), sk.log_marginal_likelihood_value_)
    # μ maximizes the likelihood: any other constant does worse.
    for shift in (-0.1, 0.1):
        other = SkGPR(SkRBF(LS), alpha=NOISE, optimizer=None).fit(X, y - mu - shift)
        assert other.log_marginal_likelihood_value_ < float(gp.log_marginal_likelihood())
    del Aiy


def test_posterior_mean_is_kernel_ridge_with_alpha_equal_noise():
    # Rasmussen & Williams 2006, §6.2: the GP posterior mean is KRR with α = σ² (= nλ).
    X, y, Xt = _data()
    gp = GaussianProcessRegressor(RBF(LS), noise=0.3).fit(X, y)
    krr = KernelRidge(RBF(LS), alpha=0.3).fit(X, y)
    assert _close(gp.predict(Xt), np.asarray(krr.predict(Xt)), 1e-10)


@pytest.mark.parametrize("mean", ["zero", "constant"])
def test_cg_method_matches_cholesky(mean):
    X, y, Xt = _data(n=150, offset=1.0)
    ref = GaussianProcessRegressor(RBF(LS), noise=NOISE, mean=mean).fit(X, y)
    gp = GaussianProcessRegressor(RBF(LS), noise=NOISE, mean=mean, method="cg", tol=1e-10,
                                  random_state=0, backend="blocked").fit(X, y)
    assert gp.method_ == "cg" and gp.L_ is None
    m_ref, s_ref = ref.predict(Xt, return_std=True)
    m, s = gp.predict(Xt, return_std=True)
    assert _close(m, np.asarray(m_ref)) and _close(s, np.asarray(s_ref))
    # log det by SLQ on the preconditioned matrix: stochastic, but its Hutchinson variance
    # is tiny once the rank-100 pivoted Cholesky factor is taken out exactly.
    lml, lml_ref = float(gp.log_marginal_likelihood()), float(ref.log_marginal_likelihood())
    assert abs(lml - lml_ref) < 1e-3 * abs(lml_ref) + 1e-2


def _gp_sample(n, ls, noise, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 1, generator=g, dtype=torch.float64) * 10
    K = RBF(ls)(X, backend="dense").to_dense().detach() + noise * torch.eye(n, dtype=torch.float64)
    y = torch.linalg.cholesky(K) @ torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


def test_learning_recovers_lengthscale_and_noise():
    X, y = _gp_sample(150, 0.8, 0.01, seed=1)
    gp = GaussianProcessRegressor(RBF(2.0), noise=0.1).fit(X, y, optimize=True, n_iter=100, lr=0.1)
    assert abs(gp.kernel_.lengthscale.item() - 0.8) < 0.2 * 0.8
    assert 0.002 < gp.noise_ < 0.05
    assert gp.loss_history_[-1] < gp.loss_history_[0]
    # The stored likelihood is that of the learned hyperparameters, which beat the start.
    start = GaussianProcessRegressor(RBF(2.0), noise=0.1).fit(X, y)
    assert float(gp.log_marginal_likelihood()) > float(start.log_marginal_likelihood())
    ref = SkGPR(SkRBF(float(gp.kernel_.lengthscale)), alpha=gp.noise_, optimizer=None).fit(np.asarray(X), np.asarray(y))
    assert _close(gp.log_marginal_likelihood(), ref.log_marginal_likelihood_value_)
    # The user's kernel is untouched.
    assert gp.kernel is not gp.kernel_ and abs(float(gp.kernel.lengthscale) - 2.0) < 1e-12


def test_learning_with_cg_follows_cholesky():
    # The CG path's gradients (CG surrogate of yᵀA⁻¹y, Hutchinson estimate of tr(A⁻¹∂A)
    # on the preconditioned matrix) drive Adam along the same path as exact autograd.
    X, y = _gp_sample(60, 0.8, 0.01, seed=2)
    kw = dict(optimize=True, n_iter=12, lr=0.15)
    a = GaussianProcessRegressor(RBF(1.5), noise=0.1).fit(X, y, **kw)
    b = GaussianProcessRegressor(RBF(1.5), noise=0.1, method="cg", random_state=0,
                                 tol=1e-8).fit(X, y, **kw)
    assert abs(float(b.kernel_.lengthscale) / float(a.kernel_.lengthscale) - 1) < 0.02
    assert abs(b.noise_ / a.noise_ - 1) < 0.05


def test_sample_y_has_the_posterior_mean_and_covariance():
    X, y, Xt = _data()
    gp = GaussianProcessRegressor(RBF(LS), noise=NOISE).fit(X, y)
    Xq = Xt[:4]
    mean, cov = map(torch.as_tensor, gp.predict(Xq, return_cov=True))
    S = torch.as_tensor(gp.sample_y(Xq, n_samples=20000, random_state=0))
    assert S.shape == (4, 20000)
    sd = cov.diagonal().sqrt()
    # Standard errors of the sample mean (sd/√N) and covariance (≲ 2·var/√N).
    assert (S.mean(1) - mean).abs().max() < 5 * sd.max() / np.sqrt(20000)
    assert (torch.cov(S) - cov).abs().max() < 10 * sd.max() ** 2 / np.sqrt(20000)
    assert np.array_equal(S.numpy(), gp.sample_y(Xq, n_samples=20000, random_state=0))
    Y2 = GaussianProcessRegressor(RBF(LS), noise=NOISE).fit(X, np.stack([y, 2 * y], 1))
    assert Y2.sample_y(Xq, n_samples=3).shape == (4, 2, 3)


def test_float32_input():
    X, y, Xt = _data()
    ref = SkGPR(SkRBF(LS), alpha=NOISE, optimizer=None).fit(X, y)
    gp = GaussianProcessRegressor(RBF(LS), noise=NOISE).fit(torch.tensor(X, dtype=torch.float32),
                                                            torch.tensor(y, dtype=torch.float32))
    m, s = gp.predict(torch.tensor(Xt, dtype=torch.float32), return_std=True)
    assert m.dtype == torch.float32 and s.dtype == torch.float32
    m_ref, s_ref = ref.predict(Xt, return_std=True)
    assert _close(m.double(), m_ref, 1e-4) and _close(s.double(), s_ref, 1e-4)


def test_sklearn_interop():
    X, y, _ = _data(n=60)
    gp = GaussianProcessRegressor(RBF(LS), noise=NOISE)
    assert clone(gp).get_params()["kernel__lengthscale"] == pytest.approx(LS)
    cv = KFold(3, shuffle=True, random_state=0)
    ours = cross_val_score(gp, X, y, cv=cv)
    theirs = cross_val_score(SkGPR(SkRBF(LS), alpha=NOISE, optimizer=None), X, y, cv=cv)
    assert np.allclose(ours, theirs, atol=1e-8)


def test_bad_input():
    X, y, Xt = _data(n=30)
    with pytest.raises(ValueError, match="y"):
        GaussianProcessRegressor().fit(X, y[:-2])
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="X"):
        GaussianProcessRegressor().fit(Xn, y)
    with pytest.raises(NotFittedError):
        GaussianProcessRegressor().log_marginal_likelihood()  # predict before fit: the prior
    with pytest.raises(ValueError, match="noise"):
        GaussianProcessRegressor(noise=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="method"):
        GaussianProcessRegressor(method="svd").fit(X, y)
    with pytest.raises(ValueError, match="mean"):
        GaussianProcessRegressor(mean="linear").fit(X, y)
    with pytest.raises(ValueError, match="noise"):
        GaussianProcessRegressor(noise=0.0).fit(X, y, optimize=True)
    gp = GaussianProcessRegressor().fit(X, y)
    with pytest.raises(ValueError, match="return_std"):
        gp.predict(Xt, return_std=True, return_cov=True)
    with pytest.raises(ValueError, match="features"):
        gp.predict(Xt[:, :1])
