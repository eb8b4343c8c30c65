"""The dense, blocked and KeOps backends evaluate one formula: they must agree on K @ V
and on gradients with respect to the inputs and every hyperparameter."""
import pytest
import torch

import torchkern as tk

KERNELS = {
    "rbf-ard": lambda: tk.RBF([0.6, 1.1, 1.7]),
    "laplacian": lambda: tk.Laplacian(0.8),
    "matern15": lambda: tk.Matern(1.5, 0.9),
    "matern25": lambda: tk.Matern(2.5, [0.9, 1.2, 0.7]),
    "rq": lambda: tk.RationalQuadratic(0.9, alpha=1.7),
    "imq": lambda: tk.InverseMultiquadric(1.1, c=0.8),
    "periodic": lambda: tk.Periodic([0.9, 1.3, 1.0], period=1.7),
    "linear": lambda: tk.Linear(),
    "poly": lambda: tk.Polynomial(3, 0.7),
    "exponential": lambda: tk.Exponential(0.2),
    "arccos1": lambda: tk.ArcCosine(1),
    "arccos2": lambda: tk.ArcCosine(2),
    "min": lambda: tk.Min(),
    "hist": lambda: tk.HistogramIntersection(),
    "chi2": lambda: tk.Chi2(0.5),
    "sum-product-scale": lambda: 1.5 * tk.RBF(0.7) * tk.Linear() + tk.Matern(0.5, 1.3)
    + 0.3 * tk.Polynomial(2, 1.0),
}
NONNEG = {"min", "hist", "chi2"}


def _data(name, n, m, d=3):
    X, Y = torch.randn(n, d, dtype=torch.float64), torch.randn(m, d, dtype=torch.float64)
    if name in NONNEG:
        X, Y = X.abs(), Y.abs()
    return X, Y


def _grads(k, X, Y, V, backend):
    X = X.clone().requires_grad_(True)
    Y = Y.clone().requires_grad_(True)
    k.zero_grad()
    out = k(X, Y, backend=backend) @ V
    (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)).sum().backward()
    params = {n: p.grad.clone() for n, p in k.named_parameters()}
    return out.detach(), X.grad, Y.grad, params


def _assert_rel(a, b, tol=1e-6):
    err = (a - b).norm() / b.norm().clamp_min(1e-300)
    assert err < tol, f"relative error {err:.2e}"


@pytest.mark.parametrize("name", KERNELS)
def test_blocked_matches_dense_values_and_gradients(name, monkeypatch):
    # A small memory budget forces many row blocks (one row each here).
    monkeypatch.setattr(tk.config, "block_memory_mb", 0.002)
    k = KERNELS[name]().double()
    X, Y = _data(name, 37, 29)
    V = torch.randn(29, 2, dtype=torch.float64)
    ref = _grads(k, X, Y, V, "dense")
    got = _grads(k, X, Y, V, "blocked")
    for a, b in zip(got[:3], ref[:3]):
        _assert_rel(a, b)
    assert set(got[3]) == set(ref[3])
    for pname in ref[3]:
        _assert_rel(got[3][pname], ref[3][pname])


def test_linear_kernel_under_auto_is_factored_and_exact(monkeypatch):
    # Lazy Linear under "auto": K = X Yᵀ in factored form, products and gradients equal
    # to the dense evaluation; inside a sum it stays a term of its own only where the sum
    # is split (a native radial term), otherwise the sum is one formula.
    monkeypatch.setattr(tk.config, "dense_max_entries", 10)
    k = tk.Linear().double()
    X, Y = _data("linear", 37, 29)
    V = torch.randn(29, 2, dtype=torch.float64)
    assert isinstance(k(X, Y), tk.gram.FeatureKernelMatrix)
    got, ref = _grads(k, X, Y, V, "auto"), _grads(k, X, Y, V, "dense")
    for a, b in zip(got[:3], ref[:3]):
        _assert_rel(a, b, 1e-13)
    assert k(X, Y, backend="blocked").backend == "blocked"  # an explicit backend is kept
    k2 = (0.7 * tk.Linear()).double()  # a learnable variance keeps the factored form
    assert k2(X, Y).backend == "features"
    got, ref = _grads(k2, X, Y, V, "auto"), _grads(k2, X, Y, V, "dense")
    for a, b in zip(got[:3], ref[:3]):
        _assert_rel(a, b, 1e-13)
    _assert_rel(got[3]["raw_outputscale"], ref[3]["raw_outputscale"], 1e-13)
    assert type((tk.RationalQuadratic() + tk.Linear())(X)).__name__ == "FormulaKernelMatrix"


def test_blocked_gradient_with_respect_to_vector():
    k = tk.Matern(2.5, 0.9)
    X = torch.randn(50, 3, dtype=torch.float64)
    V = torch.randn(50, dtype=torch.float64, requires_grad=True)
    (k(X, backend="blocked") @ V).pow(2).sum().backward()
    g = V.grad.clone()
    V.grad = None
    (k(X, backend="dense").to_dense() @ V).pow(2).sum().backward()
    _assert_rel(g, V.grad, 1e-12)


def test_keops_matvec_matches_dense_for_every_kernel():
    # All kernels in one sum: one KeOps formula (one compilation) checks every term.
    ks = [f() for f in KERNELS.values()]
    k = ks[0]
    for other in ks[1:]:
        k = k + other
    X, Y = _data("hist", 300, 200)  # non-negative data suits every kernel
    V = torch.randn(200, 3, dtype=torch.float64)
    with torch.no_grad():
        _assert_rel(k(X, Y, backend="keops") @ V, k(X, Y, backend="dense").to_dense() @ V, 1e-10)


@pytest.mark.parametrize("name", ["rbf-ard", "rq"])
def test_keops_gradients_match_dense(name):
    # RBF with ARD: gradients through the input scaling; RQ: a KeOps parameter (alpha).
    k = KERNELS[name]().double()
    X, Y = _data(name, 120, 90)
    V = torch.randn(90, 2, dtype=torch.float64)
    ref = _grads(k, X, Y, V, "dense")
    got = _grads(k, X, Y, V, "keops")
    for a, b in zip(got[:3], ref[:3]):
        _assert_rel(a, b)
    for pname in ref[3]:
        _assert_rel(got[3][pname], ref[3][pname])
