"""KernelRidge on float32 data agrees with the float64 fit, or says why not (issue 21)."""
import warnings

import numpy as np
import pytest
import torch
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge

from torchkern import RBF, KernelRidge
from torchkern.linalg import ConvergenceWarning

GAMMA = 1 / (2 * 0.5**2)  # RBF(0.5) in scikit-learn's parametrization


def _data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g)
    y = X.sin().sum(1) + 0.1 * torch.randn(n, generator=g)
    return X, y, torch.randn(300, 3, generator=g)


def _sklearn(X, y, alpha, Xt):
    """float64 KRR predictions on the float32 points themselves (exactly representable)."""
    ref = SkKernelRidge(alpha=alpha, kernel="rbf", gamma=GAMMA).fit(X.double().numpy(),
                                                                     y.double().numpy())
    return ref.predict(X.double().numpy()), ref.predict(Xt.double().numpy())


def _gap(pred, ref):
    pred = np.asarray(pred.detach().double())
    return np.linalg.norm(pred - ref) / np.linalg.norm(ref)


def test_float32_cg_default_fit_agrees_with_float64_without_warning():
    X, y, Xt = _data(3000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelRidge(RBF(0.5), alpha=0.1, solver="cg").fit(X, y)
    assert model.dual_coef_.dtype == torch.float32
    ref_train, ref_test = _sklearn(X, y, 0.1, Xt)
    assert _gap(model.predict(X), ref_train) <= 1e-4
    assert _gap(model.predict(Xt), ref_test) <= 1e-4
    # a tolerance below what float32 resolves still warns
    with pytest.warns(ConvergenceWarning, match="float32"):
        KernelRidge(RBF(0.5), alpha=0.1, solver="cg", tol=1e-9).fit(X, y)


@pytest.mark.parametrize("alpha", [1e-1, 1e-5])
def test_float32_nystrom_with_all_points_as_centers_is_float64_krr(alpha):
    # m = n: Nyström KRR is exact KRR. float32 kernel values move K by ~1e-7·‖K‖, which
    # moved the fit by up to ‖E‖/α (0.3 relative at α = 1e-5 before the float64 path).
    X, y, Xt = _data(1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = KernelRidge(RBF(0.5), alpha=alpha, solver="nystrom", n_centers=1000,
                            random_state=0).fit(X, y)
    ref_train, _ = _sklearn(X, y, alpha, Xt)
    pred = model.predict(X)
    assert pred.dtype == torch.float32
    assert _gap(pred, ref_train) <= 1e-6


def test_float32_nystrom_tiny_alpha_agrees_or_warns():
    X, y, Xt = _data(1000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = KernelRidge(RBF(0.5), alpha=1e-8, solver="nystrom", n_centers=1000,
                            random_state=0).fit(X, y)
    ref_train, _ = _sklearn(X, y, 1e-8, Xt)
    warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    assert warned or _gap(model.predict(X), ref_train) <= 1e-4
    assert _gap(model.predict(X), ref_train) <= 1e-3


@pytest.mark.parametrize("alpha", [1e-1, 1e-5])
def test_float32_cholesky_is_float64_krr(alpha):
    X, y, Xt = _data(1000)
    model = KernelRidge(RBF(0.5), alpha=alpha, solver="cholesky").fit(X, y)
    ref_train, ref_test = _sklearn(X, y, alpha, Xt)
    pred = model.predict(X)
    assert pred.dtype == torch.float32
    assert _gap(pred, ref_train) <= 1e-6
    assert _gap(model.predict(Xt), ref_test) <= 1e-5
