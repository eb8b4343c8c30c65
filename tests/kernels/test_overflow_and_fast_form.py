"""Two silent-accuracy limits of the kernel formulas, on every backend the CPU runs.

1. Matérn kernels at ‖x − y‖/ℓ past the dtype's range: the kernel is 0 there, with zero
   gradients, where (1 + s)e^{-s} evaluated as ∞·0 = NaN (and the native loop's exp, which
   stopped at the smallest normal, scaled by the polynomial). Reference: scikit-learn's
   Matern on the near points, 0 on the far ones, and the closed form with autograd.
2. The fast form ‖x‖² + ‖y‖² − 2⟨x, y⟩ on two clusters far apart (after centring the
   points sit far from the origin while pairs in one cluster are close): float64 Grams
   and products must keep float64 accuracy. Reference: brute-force float64 differences.
"""
import math
import warnings

import numpy as np
import pytest
import torch
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import Matern as SkMatern

import torchkern as tk
from torchkern import gram

LS = [0.9, 1.3]
FAR = {torch.float32: 1e30, torch.float64: 1e300}
TOL = {torch.float32: 2e-6, torch.float64: 1e-12}
BACKENDS = ["dense", "blocked", "keops", "native", "inductor", "triton"]


def _far_data(dtype):
    """Near points (standard normal) with one far point appended to X and to Y: every
    pair with a far point is ≥ 1e30 apart (its squared distance overflows)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(6, 2, generator=g, dtype=torch.float64)
    Y = torch.randn(5, 2, generator=g, dtype=torch.float64)
    far = FAR[dtype]
    X = torch.cat([X, torch.tensor([[far, 0.0]], dtype=torch.float64)])
    Y = torch.cat([Y, torch.tensor([[-far, far]], dtype=torch.float64)])
    return X.to(dtype), Y.to(dtype)


def _matern(nu, X, Y):
    """Closed form (Rasmussen and Williams 2006, eq. 4.17), plain torch, for autograd."""
    r = (((X[:, None, :] - Y[None]) / torch.tensor(LS, dtype=X.dtype)) ** 2).sum(-1).sqrt()
    if nu == 0.5:
        return torch.exp(-r)
    s = math.sqrt(2 * nu) * r
    poly = 1 + s if nu == 1.5 else 1 + s + s * s / 3
    return poly * torch.exp(-s)


def _product(kernel, X, Y, V, backend, monkeypatch):
    if backend in ("dense", "blocked", "keops"):
        return kernel(X, Y, backend=backend) @ V
    if backend == "triton":
        pytest.importorskip("triton")
        monkeypatch.setenv("TRITON_INTERPRET", "1")  # the CPU runs Triton interpreted
        monkeypatch.setenv("TORCHKERN_TRITON_AUTOTUNE", "0")
        K = kernel(X, Y, backend="triton")
    else:  # the compiled backend's two engines: the C++ radial loop, torch.compile tiles
        state = dict(gram._COMPILED_STATE)  # this test's engine states stay its own
        if backend == "inductor":
            state["native"] = "off in this test"
        monkeypatch.setattr(gram, "_COMPILED_STATE", state)
        K = kernel(X, Y, backend="compiled")
    with warnings.catch_warnings():  # no fallback to another backend
        warnings.simplefilter("error", gram.CompiledFallbackWarning)
        return K @ V


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_matern_is_zero_with_zero_gradients_past_the_dtypes_range(dtype, backend, monkeypatch):
    # The three smoothnesses in one sum: one formula per backend and dtype (KeOps and
    # torch.compile compile it once); the compiled backend runs each term natively.
    kernel = (tk.Matern(0.5, LS) + tk.Matern(1.5, LS) + tk.Matern(2.5, LS)).to(dtype)
    X, Y = _far_data(dtype)
    V = torch.randn(Y.shape[0], 2, generator=torch.Generator().manual_seed(1), dtype=dtype)
    G = torch.randn(X.shape[0], 2, generator=torch.Generator().manual_seed(2), dtype=dtype)
    Xg, Yg, Vg = (t.clone().requires_grad_(True) for t in (X, Y, V))
    out = _product(kernel, Xg, Yg, Vg, backend, monkeypatch)
    gX, gY, gV = torch.autograd.grad((out * G).sum(), [Xg, Yg, Vg])

    # values: scikit-learn on the near points (float64), 0 in the far row and column
    K = np.zeros((X.shape[0], Y.shape[0]))
    K[:-1, :-1] = sum(SkMatern(length_scale=LS, nu=nu)(X[:-1].double().numpy(),
                                                        Y[:-1].double().numpy())
                      for nu in (0.5, 1.5, 2.5))
    ref = torch.from_numpy(K) @ V.double()
    tol = TOL[dtype]
    assert torch.isfinite(out).all(), backend
    assert float((out.detach().double() - ref).abs().max()) <= tol * 10

    # gradients: autograd through the closed form on the near points; the far ones get 0
    Xn, Yn = (t[:-1].double().requires_grad_(True) for t in (X, Y))
    Vn = V.double().requires_grad_(True)
    Kn = sum(_matern(nu, Xn, Yn) for nu in (0.5, 1.5, 2.5))
    rX, rY, rVn = torch.autograd.grad(((Kn @ Vn[:-1]) * G[:-1].double()).sum(), [Xn, Yn, Vn])
    for got, want in ((gX[:-1], rX), (gY[:-1], rY), (gV, rVn)):
        assert torch.isfinite(got).all(), backend
        assert float((got.double() - want).abs().max()) <= tol * 100, backend
    assert float(gX[-1].abs().max()) == 0.0 and float(gY[-1].abs().max()) == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("nu", [1.5, 2.5])
def test_matern_dense_gram_past_the_dtypes_range_is_zero_not_refused(nu, dtype):
    # The dense pieces refuse values that are not finite (gram._finite_gram): before, this
    # raised (NaN); the far row and column are 0.
    X, Y = _far_data(dtype)
    kernel = tk.Matern(nu, LS).to(dtype)
    for backend in ("dense", "blocked"):
        K = kernel(X, Y, backend=backend).to_dense().detach()
        assert float(K[-1].abs().max()) == 0.0 and float(K[:, -1].abs().max()) == 0.0
        ref = SkMatern(length_scale=LS, nu=nu)(X[:-1].double().numpy(), Y[:-1].double().numpy())
        assert float((K[:-1, :-1].double() - torch.from_numpy(ref)).abs().max()) <= TOL[dtype]


@pytest.mark.parametrize("nu", [1.5, 2.5])
def test_native_matern_is_zero_where_exp_is_below_the_smallest_normal(nu, monkeypatch):
    # Points 3e18 apart in float32: t = r² = 9e36 is finite. The C++ loop's exp stopped at
    # e^-87.3 (the smallest normal), which (1 + s + s²/3) scaled up: K = 0.18 and a
    # gradient of 0.41 for Matérn 5/2 (6e-20 and 1e-19 for 3/2); the kernel is 0.
    X = torch.zeros(1, 2, requires_grad=True)
    Y = torch.tensor([[3e18, 0.0]])
    out = _product(tk.Matern(nu), X, Y, torch.ones(1, 1), "native", monkeypatch)
    (g,) = torch.autograd.grad(out.sum(), X)
    assert float(out) == 0.0 and float(g.abs().max()) == 0.0


def test_nan_inputs_are_still_refused():
    X = torch.randn(4, 2, dtype=torch.float64)
    X[1, 0] = float("nan")
    with pytest.raises(ValueError, match="X"):
        tk.Matern(1.5)(X, backend="dense").to_dense()


# -- 2. the fast form on two far clusters ---------------------------------------------

def _clusters(n, dtype, seed, dist=2e4, d=5):
    """Two normal clusters (σ = 2) ``dist`` apart along the first axis, ``dist`` / 2 =
    1e4 lengthscales (ℓ = 2: the division by ℓ is exact, as is each dtype's data):
    centred at their joint mean, the points are ~dist/2 from the origin (the fast form's
    round-off ε·S has S ≈ dist²/2) while pairs in one cluster are ~1 apart."""
    g = torch.Generator().manual_seed(seed)
    Z = 2 * torch.randn(n, d, generator=g, dtype=torch.float64)
    Z[n // 2:, 0] += dist
    return Z.to(dtype)


def _brute_force(X, Y, ls=2.0, alpha=0.7, c=0.8):
    """RBF + RQ + IMQ by their closed forms on float64 differences summed in extended
    precision (np.longdouble) — not the fast form."""
    x = X.double().numpy().astype(np.longdouble)
    y = Y.double().numpy().astype(np.longdouble)
    t = ((x[:, None, :] - y[None]) ** 2).sum(-1) / np.longdouble(ls) ** 2
    K = np.exp(-t / 2) + (1 + t / (2 * alpha)) ** -alpha + 1 / np.sqrt(t + c * c)
    return torch.from_numpy(K.astype(np.float64))


@pytest.mark.parametrize("backend", ["dense", "blocked", "inductor", "triton"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_fast_form_keeps_the_dtypes_accuracy_on_far_clusters(dtype, backend, monkeypatch):
    # Before, float64 used float32's round-off bound 2^-16: the Gram of clusters 1e4
    # lengthscales apart was off by 5e-8 (3e4 apart: 3e-7), the float64 product likewise
    # (Triton, whose fast form starts at d = 16: 4.2e-8).
    kernel = (tk.RBF(2.0) + tk.RationalQuadratic(2.0, alpha=0.7)
              + tk.InverseMultiquadric(2.0, c=0.8)).to(dtype)
    d = 16 if backend == "triton" else 5
    X, Y = _clusters(80, dtype, 0, d=d), _clusters(70, dtype, 1, d=d)
    V = torch.randn(70, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ref_xy, ref_xx = _brute_force(X, Y), _brute_force(X, X)
    out = _product(kernel, X, Y, V.to(dtype), backend, monkeypatch).double()
    scale = float((ref_xy.abs() @ V.abs()).max())  # the product's round-off scale
    tol = {torch.float32: 1e-6, torch.float64: 1e-13}[dtype]
    assert float((out - ref_xy @ V).abs().max()) <= tol * scale
    if backend != "inductor":  # stored Grams: entry by entry
        for K, ref in ((kernel(X, Y, backend=backend).to_dense(), ref_xy),
                       (kernel(X, backend=backend).to_dense(), ref_xx)):
            assert float((K.double() - ref).abs().max()) <= tol * 3
