"""ApproximateKernel: a feature map used as a torchkern kernel."""
import copy

import pytest
import torch

import torchkern as tk
from torchkern.approx import ApproximateKernel, Nystroem, RandomFourierFeatures
from torchkern.gram import FeatureKernelMatrix


def _data(n, d=3, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_gram_diag_and_algebra_match_the_features():
    X, Y = _data(60), _data(25, seed=1)
    rff = RandomFourierFeatures(tk.RBF(lengthscale=1.3), 128, random_state=0)
    ak = rff.as_kernel()
    P, Q = rff(X).detach(), rff(Y).detach()
    K = ak(X, Y)
    assert isinstance(K, FeatureKernelMatrix) and K.shape == (60, 25)
    torch.testing.assert_close(K.to_dense().detach(), P @ Q.T)
    torch.testing.assert_close(ak.diag(X).detach(), (P * P).sum(1))
    # In kernel algebra the features enter through a formula (blocked backend here).
    S = (2.0 * ak + tk.Linear())(X, Y, backend="blocked")
    v = torch.randn(25, dtype=torch.float64)
    torch.testing.assert_close((S @ v).detach(), 2 * P @ (Q.T @ v) + X @ (Y.T @ v))
    # The RFF kernel's hyperparameters are the approximate kernel's parameters.
    assert any(p is rff.kernel.raw_lengthscale for p in ak.parameters())


def test_estimators_accept_it_primal_equals_dual():
    # Ridge regression on Nyström features two ways: torchkern's KernelRidge on the
    # approximate kernel (dual, n × n) and the primal normal equations on Ψ (m × m).
    X = _data(150)
    y = torch.sin(X).sum(1)
    ny = Nystroem(tk.Matern(nu=1.5), 30, random_state=0).fit(X)
    lam = 0.1
    model = tk.KernelRidge(kernel=ny.as_kernel(), alpha=lam, solver="cholesky").fit(X, y)
    Xt = _data(20, seed=2)
    Psi, Psi_t = ny.transform(X), ny.transform(Xt)
    w = torch.linalg.solve(Psi.T @ Psi + lam * torch.eye(30, dtype=torch.float64), Psi.T @ y)
    torch.testing.assert_close(model.predict(Xt).detach(), Psi_t @ w, rtol=1e-6, atol=1e-8)


def test_deepcopy_keeps_the_features_and_bad_map():
    X = _data(10)
    ak = RandomFourierFeatures(tk.Laplacian(), 20, random_state=0).as_kernel()
    torch.testing.assert_close(copy.deepcopy(ak)(X).to_dense(), ak(X).to_dense())
    with pytest.raises(TypeError, match="feature_map"):
        ApproximateKernel(lambda x: x)
    with pytest.raises(ValueError, match="X has 3 features but Y has 2"):
        ak(X, torch.randn(4, 2, dtype=torch.float64))
