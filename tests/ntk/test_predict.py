"""infinite_width_predict against neural-tangents, kernel ridge regression and gradient
descent on a linearized network."""
import os

import numpy as np
import pytest
import torch

import torchkern
from torchkern.kernels import Linear
from torchkern.ntk import NTK, EmpiricalNTK, infinite_width_predict

from ._nets import autograd_jacobian, ntk_mlp

REF = np.load(os.path.join(os.path.dirname(__file__), "references.npz"))
X1, X2, Y1 = (torch.tensor(REF[k]) for k in ("X1", "X2", "Y1"))


@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_matches_neural_tangents_gradient_descent_mse_ensemble(backend):
    k = NTK(2, weight_std=float(REF["W_STD"]), bias_std=float(REF["B_STD"]))
    kw = dict(reg=1e-3, learning_rate=0.7, backend=backend, tol=1e-12)
    P = infinite_width_predict(k, X1, Y1, X2, t=[0.5, 3.0], **kw)
    assert P.shape == (2, 5, 2)
    for i, t in enumerate((0.5, 3.0)):
        ref = REF[f"pred_t{t}"]
        assert np.abs(P[i].numpy() - ref).max() < 1e-6 * np.abs(ref).max()
    P = infinite_width_predict(k, X1, Y1, X2, t=None, **kw)
    assert np.abs(P.numpy() - REF["pred_tNone"]).max() < 1e-6 * np.abs(REF["pred_tNone"]).max()


def test_infinite_time_is_kernel_ridge_regression_with_the_ntk():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(60, 3, dtype=torch.float64, generator=g)
    y = torch.sin(2 * X[:, 0]) + X[:, 1]
    Xt = torch.randn(9, 3, dtype=torch.float64, generator=g)
    k = NTK(3, weight_std=1.2, bias_std=0.1)
    for reg in (0.0, 1e-2):
        krr = torchkern.KernelRidge(k, alpha=max(reg, 1e-12), solver="cholesky").fit(X, y)
        expected = krr.predict(Xt)
        got = infinite_width_predict(k, X, y, Xt, reg=reg)
        torch.testing.assert_close(got, expected, rtol=1e-7, atol=1e-8)
        # Lazy Gram: preconditioned CG.
        lazy = infinite_width_predict(k, X, y, Xt, reg=reg, backend="blocked", tol=1e-10)
        torch.testing.assert_close(lazy, expected, rtol=1e-6, atol=1e-7)
    # A very long training time reaches the kernel regression solution.
    far = infinite_width_predict(k, X, y, Xt, t=1e9, reg=1e-2)
    torch.testing.assert_close(far, infinite_width_predict(k, X, y, Xt, reg=1e-2),
                               rtol=1e-6, atol=1e-8)
    assert infinite_width_predict(k, X, y, Xt, t=0.0).abs().max() == 0


def test_lanczos_matches_the_eigendecomposition():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(300, 4, dtype=torch.float64, generator=g)
    Y = torch.stack([X[:, 0] ** 2, X[:, 1]], 1)
    Xt = torch.randn(20, 4, dtype=torch.float64, generator=g)
    k = NTK(2, "erf", bias_std=0.5)
    ts = [1.0, 30.0, 1e3]
    dense = infinite_width_predict(k, X, Y, Xt, t=ts, reg=1e-4, backend="dense")
    lazy = infinite_width_predict(k, X, Y, Xt, t=ts, reg=1e-4, backend="blocked", tol=1e-10)
    torch.testing.assert_close(lazy, dense, rtol=1e-7, atol=1e-9)


def test_finite_time_matches_gradient_descent_on_the_linearized_network():
    # f_lin(x; θ) = f(x; θ₀) + J(x)(θ − θ₀) trained by plain gradient descent on
    # L = 1/(2N) Σ (f_lin − y)² (N = y.numel()) with a small step for time t = steps·η:
    # its predictions are f₀(x) + the infinite-width formula with the empirical NTK on the
    # residual targets y − f₀(X) (Lee et al. 2019), up to the O(η) time discretization.
    # The gradient descent runs in parameter space on autograd Jacobians.
    net = ntk_mlp(3, 32, 2, weight_std=1.3, bias_std=0.2, seed=3)
    g = torch.Generator().manual_seed(4)
    X = torch.randn(6, 3, dtype=torch.float64, generator=g)
    y = torch.randn(6, dtype=torch.float64, generator=g)
    Xt = torch.randn(4, 3, dtype=torch.float64, generator=g)
    J, Jt = autograd_jacobian(net, X)[:, 0], autograd_jacobian(net, Xt)[:, 0]
    with torch.no_grad():
        f0, f0t = net(X).reshape(-1), net(Xt).reshape(-1)
    lr, steps = 0.01, 20_000
    delta = torch.zeros(J.shape[1], dtype=torch.float64)
    for _ in range(steps):
        delta -= lr * J.T @ (f0 + J @ delta - y) / y.numel()
    gd = f0t + Jt @ delta
    pred = f0t + infinite_width_predict(EmpiricalNTK(net), X, y - f0, Xt, t=steps,
                                        learning_rate=lr)
    # Discretization: (1 − ηλ/N)^k against e^{−ηλk/N}, an error O(k(ηλ/N)²).
    # Measured 2e-6 with η = 0.01 (20,000 steps).
    torch.testing.assert_close(pred, gd, rtol=1e-5, atol=1e-5)
    # ... and the time matters: at half the time the prediction is elsewhere.
    half = f0t + infinite_width_predict(EmpiricalNTK(net), X, y - f0, Xt, t=steps / 2,
                                        learning_rate=lr)
    assert (half - gd).abs().max() > 1e-2


def test_bad_arguments():
    k = NTK(1)
    X = torch.randn(5, 2, dtype=torch.float64)
    y = torch.randn(5, dtype=torch.float64)
    with pytest.raises(TypeError, match="kernel"):
        infinite_width_predict("ntk", X, y)
    with pytest.raises(ValueError, match="reg"):
        infinite_width_predict(k, X, y, reg=-1.0)
    with pytest.raises(ValueError, match="learning_rate"):
        infinite_width_predict(k, X, y, learning_rate=0.0)
    with pytest.raises(ValueError, match="t must be"):
        infinite_width_predict(k, X, y, t=-1.0)
    with pytest.raises(ValueError, match="y_train"):
        infinite_width_predict(k, X, y[:3])
    with pytest.raises(ValueError, match="reg > 0"):
        infinite_width_predict(k, torch.cat([X, X]), torch.cat([y, y]))


def test_ensemble_covariance_matches_neural_tangents():
    # neural-tangents' gradient_descent_mse_ensemble(..., compute_cov=True) on a CNN
    # (make_conv_references.py): mean and covariance over initializations, trained with
    # the NTK (get="ntk", needs the NNGP too) or only the readout (get="nngp").
    from sklearn.datasets import load_digits

    from torchkern.ntk import infinite_width

    from ._conv_cases import CASES, torch_net
    ref = np.load(os.path.join(os.path.dirname(__file__), "conv_references.npz"))
    img = torch.tensor(load_digits().data[:15] / 16.0).reshape(-1, 1, 8, 8)
    XT, Xte, YT = img[7:15], img[4:7], torch.tensor(ref["YT"])
    net = torch_net(CASES["c1_relu_flat"][0], (1, 8, 8))
    kw = dict(weight_std=float(ref["W_STD"]), bias_std=float(ref["B_STD"]))
    ntk, nngp = infinite_width(net, kind="ntk", **kw), infinite_width(net, kind="nngp", **kw)
    for get, kernel, other in (("ntk", ntk, nngp), ("nngp", nngp, None)):
        for t in (0.5, 3.0, None):
            mean, cov = infinite_width_predict(kernel, XT, YT, Xte, t=t, reg=1e-3,
                                               learning_rate=0.7, compute_cov=True,
                                               nngp=other)
            m_ref, c_ref = ref[f"ens_{get}_t{t}_mean"], ref[f"ens_{get}_t{t}_cov"]
            assert cov.shape == (3, 3)
            # Measured: below 1e-12 relative for both.
            assert np.abs(mean.numpy() - m_ref).max() < 1e-8 * np.abs(m_ref).max(), (get, t)
            assert np.abs(cov.numpy() - c_ref).max() < 1e-8 * np.abs(c_ref).max(), (get, t)
    _, covs = infinite_width_predict(ntk, XT, YT, Xte, t=[0.5, 3.0], reg=1e-3,
                                     learning_rate=0.7, compute_cov=True, nngp=nngp)
    assert covs.shape == (2, 3, 3)
    np.testing.assert_allclose(covs[1].numpy(), ref["ens_ntk_t3.0_cov"], rtol=1e-8)
    with pytest.raises(TypeError, match="nngp"):
        infinite_width_predict(ntk, XT, YT, compute_cov=True, nngp="nngp")


def test_ensemble_covariance_evaluates_each_gram_once():
    # With several times, the NNGP's Gram matrices (train-train, train-test) are evaluated
    # once, not once per time; the covariances equal those of single-time calls.
    from torch import nn

    from torchkern.ntk import infinite_width

    g = torch.Generator().manual_seed(3)
    X, Xt, y = (torch.randn(*s, dtype=torch.float64, generator=g) for s in ((8, 4), (3, 4), (8,)))
    net = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 1))
    ntk = infinite_width(net, weight_std=1.2)
    nngp = infinite_width(net, kind="nngp", weight_std=1.2)
    calls = []
    forward = type(nngp).forward
    nngp.forward = lambda *a, **kw: calls.append(1) or forward(nngp, *a, **kw)
    ts = [0.5, 2.0, 7.0]
    _, covs = infinite_width_predict(ntk, X, y, Xt, t=ts, reg=1e-3, compute_cov=True,
                                     nngp=nngp)
    assert len(calls) == 3, len(calls)   # K(Xt, Xt), K(X, X), K(X, Xt)
    for t, c in zip(ts, covs):
        _, ref = infinite_width_predict(ntk, X, y, Xt, t=t, reg=1e-3, compute_cov=True,
                                        nngp=nngp)
        torch.testing.assert_close(c, ref, rtol=1e-12, atol=1e-14)


def test_infinite_time_covariance_of_a_singular_gram_is_refused():
    # a zero input row makes Θ = XXᵀ exactly singular; y in its range lets CG converge on
    # the lazy path, and the t = ∞ covariance, K_** − K_*X Θ⁻¹ K_X*, used to come out NaN
    X = torch.randn(6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    X[5] = 0
    k = Linear()
    y = k(X).to_dense() @ torch.linspace(-1, 1, 6, dtype=torch.float64)
    with pytest.raises(ValueError, match="singular.*pass reg > 0"):
        infinite_width_predict(k, X, y, X[:2], compute_cov=True, backend="blocked")
    mean, cov = infinite_width_predict(k, X, y, X[:2], compute_cov=True, backend="blocked",
                                       reg=1e-3)
    A = k(X).to_dense() + 1e-3 * torch.eye(6, dtype=torch.float64)
    Kt = k(X[:2], X).to_dense()
    torch.testing.assert_close(cov, k(X[:2]).to_dense() - Kt @ torch.linalg.solve(A, Kt.T),
                               rtol=1e-8, atol=1e-10)
