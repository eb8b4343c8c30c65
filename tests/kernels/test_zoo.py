"""Every kernel's Gram matrix against an independent reference: scikit-learn's kernels
or a brute-force double loop written from the formula."""
import math

import numpy as np
import pytest
import torch
from sklearn.gaussian_process import kernels as skk
from sklearn.metrics.pairwise import chi2_kernel, linear_kernel, polynomial_kernel, rbf_kernel

import torchkern as tk

rng = np.random.default_rng(0)
X = rng.normal(size=(40, 3))
Y = rng.normal(size=(30, 3))
P = rng.uniform(0.0, 2.0, size=(40, 3))  # non-negative data for histogram kernels
Q = rng.uniform(0.0, 2.0, size=(30, 3))
P[0, 1] = Q[0, 1] = 0.0  # 0/0 in the chi² sum


def brute(f, A, B):
    return np.array([[f(a, b) for b in B] for a in A])


def arccos_ref(order):
    def f(x, y):
        nx, ny = np.linalg.norm(x), np.linalg.norm(y)
        t = math.atan2(np.linalg.norm(np.cross(x, y)), x @ y)  # the angle, accurate near 0
        J = [math.pi - t,
             math.sin(t) + (math.pi - t) * math.cos(t),
             3 * math.sin(t) * math.cos(t) + (math.pi - t) * (1 + 2 * math.cos(t) ** 2)][order]
        return (nx * ny) ** order * J / math.pi
    return f


CASES = [
    ("rbf", lambda: tk.RBF(0.7), lambda A, B: rbf_kernel(A, B, gamma=1 / (2 * 0.7 ** 2)), False),
    ("rbf-ard", lambda: tk.RBF(torch.tensor([0.5, 1.0, 2.0])),
     lambda A, B: skk.RBF([0.5, 1.0, 2.0])(A, B), False),
    ("laplacian", lambda: tk.Laplacian(1.3), lambda A, B: skk.Matern(1.3, nu=0.5)(A, B), False),
    ("matern05", lambda: tk.Matern(0.5, 0.8), lambda A, B: skk.Matern(0.8, nu=0.5)(A, B), False),
    ("matern15", lambda: tk.Matern(1.5, 0.8), lambda A, B: skk.Matern(0.8, nu=1.5)(A, B), False),
    ("matern25-ard", lambda: tk.Matern(2.5, [0.7, 1.1, 1.9], ard_dims=3),
     lambda A, B: skk.Matern([0.7, 1.1, 1.9], nu=2.5)(A, B), False),
    ("rq", lambda: tk.RationalQuadratic(0.9, alpha=2.5),
     lambda A, B: skk.RationalQuadratic(0.9, alpha=2.5)(A, B), False),
    ("periodic-1d", lambda: tk.Periodic(1.2, period=2.0),
     lambda A, B: skk.ExpSineSquared(1.2, periodicity=2.0)(A[:, :1], B[:, :1]), "1d"),
    ("periodic-ard", lambda: tk.Periodic([1.2, 0.7, 2.0], period=1.5),
     lambda A, B: brute(lambda x, y: math.exp(-2 * (np.sin(np.pi * (x - y) / 1.5) ** 2
                                                    / np.array([1.2, 0.7, 2.0]) ** 2).sum()),
                        A, B), False),
    ("linear", lambda: tk.Linear(), linear_kernel, False),
    ("poly", lambda: tk.Polynomial(3, 0.5),
     lambda A, B: polynomial_kernel(A, B, degree=3, gamma=1.0, coef0=0.5), False),
    ("poly-homogeneous", lambda: tk.Polynomial(2, 0.0),
     lambda A, B: polynomial_kernel(A, B, degree=2, gamma=1.0, coef0=0.0), False),
    ("exponential", lambda: tk.Exponential(0.3),
     lambda A, B: brute(lambda x, y: math.exp(0.3 * x @ y), A, B), False),
    ("arccos0", lambda: tk.ArcCosine(0), lambda A, B: brute(arccos_ref(0), A, B), False),
    ("arccos1", lambda: tk.ArcCosine(1), lambda A, B: brute(arccos_ref(1), A, B), False),
    ("arccos2", lambda: tk.ArcCosine(2), lambda A, B: brute(arccos_ref(2), A, B), False),
    ("imq", lambda: tk.InverseMultiquadric(1.5, c=0.7),
     lambda A, B: brute(lambda x, y: 1 / math.sqrt(((x - y) ** 2).sum() / 1.5 ** 2 + 0.49), A, B),
     False),
    ("min", lambda: tk.Min(), lambda A, B: brute(lambda x, y: np.prod(np.minimum(x, y)), A, B), True),
    ("hist", lambda: tk.HistogramIntersection(),
     lambda A, B: brute(lambda x, y: np.minimum(x, y).sum(), A, B), True),
    ("chi2", lambda: tk.Chi2(0.4), lambda A, B: chi2_kernel(A, B, gamma=0.4), True),
    ("sum", lambda: 2.0 * tk.RBF(0.7) + tk.Linear(),
     lambda A, B: 2 * rbf_kernel(A, B, gamma=1 / 0.98) + A @ B.T, False),
    ("product", lambda: tk.RBF(0.7) * tk.Polynomial(2, 1.0),
     lambda A, B: rbf_kernel(A, B, gamma=1 / 0.98) * (A @ B.T + 1) ** 2, False),
]
IDS = [c[0] for c in CASES]


def data(domain):
    if domain == "1d":
        return X[:, :1], Y[:, :1]
    return (P, Q) if domain else (X, Y)


@pytest.mark.parametrize("name,make,ref,nonneg", CASES, ids=IDS)
def test_gram_matches_reference(name, make, ref, nonneg):
    A, B = data(nonneg)
    k = make()
    K = k(torch.from_numpy(A), torch.from_numpy(B), backend="dense").to_dense().detach()
    np.testing.assert_allclose(K.numpy(), ref(A, B), rtol=1e-10, atol=1e-12)
    # diag without the matrix
    d = k.diag(torch.from_numpy(A)).detach()
    np.testing.assert_allclose(d.numpy(), np.diag(ref(A, A)), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,make,ref,nonneg", CASES, ids=IDS)
def test_symmetric_positive_semidefinite(name, make, ref, nonneg):
    A = torch.from_numpy(data(nonneg)[0])
    K = make()(A, backend="dense").to_dense().detach()
    torch.testing.assert_close(K, K.T, rtol=0, atol=1e-12)
    lam_min = torch.linalg.eigvalsh(K).min()
    assert lam_min >= -1e-6 * K.trace()


def test_float32_matches_float64():
    k = tk.Matern(2.5, 0.8)
    K64 = k(torch.from_numpy(X)).to_dense()
    K32 = k(torch.from_numpy(X).float()).to_dense()
    assert K32.dtype == torch.float32
    torch.testing.assert_close(K32.double(), K64, rtol=1e-5, atol=1e-6)


def test_feature_kernel_is_base_kernel_on_features():
    phi = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh()).double()
    base = tk.RBF(0.9)
    k = tk.FeatureKernel(phi, base)
    A, B = torch.from_numpy(X), torch.from_numpy(Y)
    with torch.no_grad():
        ref = rbf_kernel(phi(A).numpy(), phi(B).numpy(), gamma=1 / (2 * 0.81))
    np.testing.assert_allclose(k(A, B).to_dense().detach().numpy(), ref, rtol=1e-10)
    # gradients reach the feature map and the base kernel
    V = torch.randn(30, dtype=torch.float64)
    (k(A, B, backend="blocked") @ V).sum().backward()
    grads_lazy = [p.grad.clone() for p in k.parameters()]
    k.zero_grad()
    (k(A, B, backend="dense").to_dense() @ V).sum().backward()
    for g_lazy, p in zip(grads_lazy, k.parameters()):
        assert p.grad.abs().sum() > 0
        torch.testing.assert_close(g_lazy, p.grad, rtol=1e-9, atol=1e-12)


def test_repr_shows_hyperparameters():
    assert repr(tk.RBF(0.5)) == "RBF(lengthscale=0.5)"
    assert "alpha=2" in repr(tk.RationalQuadratic(1.0, alpha=2.0))
    assert "[0.5, 2]" in repr(tk.RBF([0.5, 2.0]))


def test_hyperparameters_are_positive_parameters():
    k = tk.RBF(0.5)
    assert isinstance(k.raw_lengthscale, torch.nn.Parameter)
    with torch.no_grad():
        k.raw_lengthscale.fill_(-30.0)  # any raw value is a valid (positive) lengthscale
    assert k.lengthscale.item() > 0
    k.lengthscale = 2.0
    assert k.lengthscale.item() == pytest.approx(2.0, rel=1e-12)
    assert tk.Polynomial(2, 0.0).offset.item() == 0.0
    assert [n for n, _ in tk.Polynomial(2, 0.0).named_parameters()] == []


def test_sum_is_one_formula_with_shared_variables():
    X_ = torch.randn(5, 2)
    f = (tk.Linear() + tk.Polynomial(2) + tk.ArcCosine(1)).formula(X_)
    assert len(f.xs) == 1  # the three terms read the same variable once
    f = (tk.RBF(0.5) + tk.RBF(2.0)).formula(X_)
    assert len(f.xs) == 2  # different lengthscales scale the inputs differently
