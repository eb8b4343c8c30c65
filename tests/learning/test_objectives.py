"""Objectives of torchkern.learning against scikit-learn, numpy and brute force."""
import numpy as np
import pytest
import torch
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import RBF as SkRBF, ConstantKernel, WhiteKernel

import torchkern
from torchkern.learning import (fit_kernel, gcv, kernel_alignment, kernel_ridge_predict,
                                log_marginal_likelihood, loo_error, mmd_test_power, sgpr_bound)

F64 = torch.float64


def _data(n=40, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=F64)
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X, y


def _dlog(p, value):
    """d/d log(value) from the gradient wrt the softplus raw parameter p."""
    return p.grad / torch.sigmoid(p.detach()) * value.detach()


def test_log_marginal_likelihood_and_gradient_match_sklearn():
    X, y = _data()
    c, ls, s2 = 1.7, np.array([0.8, 1.9]), 0.05
    sk = SkGPR(ConstantKernel(c) * SkRBF(ls) + WhiteKernel(s2), optimizer=None, alpha=0.0)
    sk.fit(X.numpy(), y.numpy())
    theta = np.log([c, *ls, s2])
    ref, ref_grad = sk.log_marginal_likelihood(theta, eval_gradient=True)

    k = c * torchkern.RBF(lengthscale=torch.tensor(ls))
    raw_noise = torch.tensor(np.log(s2), dtype=F64, requires_grad=True)
    lml = log_marginal_likelihood(k, X, y, raw_noise.exp())
    lml.backward()
    grad = torch.cat([_dlog(k.raw_outputscale, k.outputscale).reshape(1),
                      _dlog(k.base.raw_lengthscale, k.base.lengthscale), raw_noise.grad.reshape(1)])
    assert float(lml) == pytest.approx(ref, rel=1e-10)
    np.testing.assert_allclose(grad.numpy(), ref_grad, rtol=1e-7)


def test_log_marginal_likelihood_two_targets_is_the_sum():
    X, y = _data()
    Y = torch.stack([y, y.flip(0)], 1)
    k = torchkern.RBF(0.9)
    total = log_marginal_likelihood(k, X, Y, 0.1)
    sk = SkGPR(SkRBF(0.9) + WhiteKernel(0.1), optimizer=None, alpha=0.0).fit(X.numpy(), Y.numpy())
    assert float(total) == pytest.approx(sk.log_marginal_likelihood_value_, rel=1e-10)
    # first derivatives in y and X (the exact path differentiates a surrogate)
    assert torch.autograd.gradcheck(lambda Yv, Xv: log_marginal_likelihood(k, Xv, Yv, 0.1),
                                    (Y[:12].clone().requires_grad_(), X[:12].clone().requires_grad_()))


def test_log_marginal_likelihood_cg_path_within_its_tolerance():
    # Stated: SLQ with a rank-200 pivoted-Cholesky preconditioner, relative error of the
    # log-determinant ~1e-3; the quadratic term is a converged CG solve.
    X, y = _data(300)
    k = torchkern.RBF(torch.tensor([0.7, 1.4]))
    noise = torch.tensor(0.1, dtype=F64, requires_grad=True)
    ex = log_marginal_likelihood(k, X, y, noise, method="exact")
    g_ex = torch.autograd.grad(ex, [k.raw_lengthscale, noise])
    it = log_marginal_likelihood(k, X, y, noise, method="cg", num_probes=20, random_state=0)
    g_it = torch.autograd.grad(it, [k.raw_lengthscale, noise])
    logdet = torch.linalg.slogdet(k(X).to_dense() + 0.1 * torch.eye(300, dtype=F64))[1]
    assert abs(float(it) - float(ex)) < 5e-3 * abs(float(logdet))
    g_ex, g_it = torch.cat([g.reshape(-1) for g in g_ex]), torch.cat([g.reshape(-1) for g in g_it])
    assert float((g_it - g_ex).norm() / g_ex.norm()) < 0.1


def test_marginal_likelihood_learning_recovers_lengthscale_and_noise():
    # 8 independent GP draws on the same inputs: their log-likelihoods add up.
    g = torch.Generator().manual_seed(3)
    n, ls, s2 = 200, 0.6, 0.04
    X = torch.rand(n, 1, generator=g, dtype=F64) * 10
    K = torchkern.RBF(ls)(X).to_dense().detach() + s2 * torch.eye(n, dtype=F64)
    y = torch.linalg.cholesky(K) @ torch.randn(n, 8, generator=g, dtype=F64)
    k = torchkern.RBF(1.5)
    raw = torch.tensor(np.log(0.3), dtype=F64, requires_grad=True)
    res = fit_kernel(lambda: -log_marginal_likelihood(k, X, y, raw.exp()) / n, [k, raw])
    assert res.converged and res.history[-1] < res.history[0]
    assert float(k.lengthscale) == pytest.approx(ls, rel=0.1)
    assert float(raw.exp()) == pytest.approx(s2, rel=0.1)


def _centered_alignment_numpy(K, Y):
    n = K.shape[0]
    H = np.eye(n) - 1.0 / n
    Kc, Yc = H @ K @ H, H @ Y
    T = Yc @ Yc.T
    return (Kc * T).sum() / (np.linalg.norm(Kc) * np.linalg.norm(T))


def test_kernel_alignment_against_numpy():
    X, y = _data(50)
    k = torchkern.Matern(2.5, lengthscale=0.8)
    K = k(X).to_dense().detach().numpy()
    assert float(kernel_alignment(k, X, y)) == pytest.approx(
        _centered_alignment_numpy(K, y.numpy()[:, None]), rel=1e-10)
    labels = np.array([0, 2, 1, 1, 2] * 10)
    onehot = np.eye(3)[labels]
    assert float(kernel_alignment(k, X, labels)) == pytest.approx(
        _centered_alignment_numpy(K, onehot), rel=1e-10)
    yy = np.outer(y.numpy(), y.numpy())
    uncentered = (K * yy).sum() / (np.linalg.norm(K) * np.linalg.norm(yy))
    assert float(kernel_alignment(k, X, y, centered=False)) == pytest.approx(uncentered, rel=1e-10)
    # lazy (blocked) Gram matrix: same value
    assert float(kernel_alignment(k, X, labels, backend="blocked")) == pytest.approx(
        _centered_alignment_numpy(K, onehot), rel=1e-10)


def test_kernel_alignment_gradient_against_finite_differences():
    X, y = _data(30)
    ls = torch.tensor([0.7, 1.3], dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda ls: kernel_alignment(_Fixed(ls), X, y), (ls,))
    assert torch.autograd.gradcheck(lambda Xv: kernel_alignment(torchkern.RBF(1.0), Xv, y),
                                    (X.clone().requires_grad_(),))


class _Fixed(torchkern.RBF):
    """An ARD RBF whose lengthscale is a given tensor (for gradcheck)."""

    def __init__(self, ls):
        super().__init__(lengthscale=ls.detach())
        self._ls = ls

    def _inputs(self, X):
        return X / self._ls


def test_loo_error_against_explicit_refits():
    X, y = _data(30)
    k = torchkern.RBF(0.9)
    alpha = 0.3
    K = k(X).to_dense().detach().numpy()
    res = []
    for i in range(30):
        keep = np.arange(30) != i
        c = np.linalg.solve(K[np.ix_(keep, keep)] + alpha * np.eye(29), y.numpy()[keep])
        res.append(y.numpy()[i] - K[i, keep] @ c)
    assert float(loo_error(k, X, y, alpha)) == pytest.approx(np.mean(np.square(res)), rel=1e-10)
    a = torch.tensor(alpha, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, ls: loo_error(_Fixed(ls), X, y, a),
                                    (a, torch.tensor([0.9, 0.9], dtype=F64, requires_grad=True)))


def test_gcv_against_numpy():
    X, y = _data(40)
    k = torchkern.RBF(0.9)
    K = k(X).to_dense().detach().numpy()
    H = K @ np.linalg.inv(K + 0.2 * np.eye(40))
    r = y.numpy() - H @ y.numpy()
    ref = np.mean(r ** 2) / np.mean(1 - np.diag(H)) ** 2
    assert float(gcv(k, X, y, 0.2)) == pytest.approx(ref, rel=1e-10)


def test_loo_and_gcv_cg_paths_within_their_tolerance():
    # Stated: Hutchinson estimates of diag / trace of (K + αI)⁻¹ with p probes.
    X, y = _data(300)
    k = torchkern.RBF(1.0)
    ex_loo, ex_gcv = loo_error(k, X, y, 0.5), gcv(k, X, y, 0.5)
    it_loo = loo_error(k, X, y, 0.5, method="cg", num_probes=128, random_state=1)
    it_gcv = gcv(k, X, y, 0.5, method="cg", num_probes=32, random_state=1)
    assert float(it_loo) == pytest.approx(float(ex_loo), rel=0.05)
    assert float(it_gcv) == pytest.approx(float(ex_gcv), rel=0.02)


def test_kernel_ridge_predict_gradients_finite_differences():
    X, y = _data(25)
    Xt = _data(5, seed=1)[0]
    args = (torch.tensor([0.8, 1.2], dtype=F64, requires_grad=True),
            torch.tensor(0.1, dtype=F64, requires_grad=True),
            X.clone().requires_grad_(), y.clone().requires_grad_())
    for solver in ("cholesky", "cg"):
        assert torch.autograd.gradcheck(
            lambda ls, a, Xv, yv: kernel_ridge_predict(_Fixed(ls), Xv, yv, Xt, a, solver=solver,
                                                       tol=1e-12), args, atol=1e-6)
    # against scikit-learn's KernelRidge (gamma = 1 / (2 ℓ²))
    from sklearn.kernel_ridge import KernelRidge
    sk = KernelRidge(alpha=0.1, kernel="rbf", gamma=0.5).fit(X.numpy(), y.numpy())
    out = kernel_ridge_predict(torchkern.RBF(1.0), X, y, Xt, 0.1)
    np.testing.assert_allclose(out.detach().numpy(), sk.predict(Xt.numpy()), rtol=1e-9)


def test_mmd_test_power_against_brute_force():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(20, 2, generator=g, dtype=F64)
    Y = torch.randn(20, 2, generator=g, dtype=F64) * 1.3 + 0.2
    k = torchkern.RBF(1.1)
    Kx, Ky, Kxy = (k(A, B).to_dense().detach().numpy() for A, B in ((X, X), (Y, Y), (X, Y)))
    n = 20
    H = Kx + Ky - Kxy - Kxy.T
    off = ~np.eye(n, dtype=bool)
    mmd2 = Kx[off].mean() + Ky[off].mean() - 2 * Kxy.mean()
    var = 4 * (np.sum(H.sum(1) ** 2) / n ** 3 - (H.sum() / n ** 2) ** 2)
    ref = mmd2 / np.sqrt(var + 1e-8)
    assert float(mmd_test_power(k, X, Y)) == pytest.approx(ref, rel=1e-10)
    assert torch.autograd.gradcheck(lambda ls: mmd_test_power(_Fixed(ls), X, Y),
                                    (torch.tensor([1.1, 0.7], dtype=F64, requires_grad=True),))


def test_sgpr_bound_exact_at_full_centers_and_against_dense_formula():
    X, y = _data(60)
    k = torchkern.RBF(0.8)
    full = sgpr_bound(k, X, y, X, 0.1, jitter=0.0)
    assert float(full) == pytest.approx(float(log_marginal_likelihood(k, X, y, 0.1)), rel=1e-6)
    Z = _data(10, seed=4)[0]
    Knm, Kmm = k(X, Z).to_dense().detach().numpy(), k(Z).to_dense().detach().numpy()
    Kmm = Kmm + 1e-6 * np.eye(10)
    Q = Knm @ np.linalg.solve(Kmm, Knm.T)
    C = Q + 0.1 * np.eye(60)
    yy = y.numpy()
    ref = (-0.5 * yy @ np.linalg.solve(C, yy) - 0.5 * np.linalg.slogdet(C)[1]
           - 30 * np.log(2 * np.pi) - 0.5 * (60 - np.trace(Q)) / 0.1)
    bound = sgpr_bound(k, X, y, Z, 0.1)
    assert float(bound) == pytest.approx(ref, rel=1e-8)
    assert float(bound) < float(full)
    Zp = Z.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda Zv: sgpr_bound(k, X, y, Zv, 0.1), (Zp,))


def test_objectives_reject_bad_input():
    X, y = _data(10)
    k = torchkern.RBF()
    with pytest.raises(ValueError, match="noise"):
        log_marginal_likelihood(k, X, y, -1.0)
    with pytest.raises(ValueError, match="y"):
        loo_error(k, X, y[:5], 1.0)
    with pytest.raises(ValueError, match="method"):
        gcv(k, X, y, 1.0, method="svd")
    with pytest.raises(TypeError, match="kernel"):
        kernel_alignment("rbf", X, y)
    with pytest.raises(ValueError, match="solver"):
        kernel_ridge_predict(k, X, y, X, 1.0, solver="lu")
    with pytest.raises(ValueError, match="as many samples"):
        mmd_test_power(k, X, X[:5])
