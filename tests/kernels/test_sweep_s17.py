"""Radial kernels where x − y or its square overflows, and NaN through the compiled
backend's C++ loops: every backend against closed forms.

At an overflowed distance a decaying kernel's value is its limit, 0, and so is its
gradient; a NaN reaching the C++ reduction comes out NaN (and K @ V then refuses it),
never as a finite number.
"""
import math
import warnings

import numpy as np
import pytest
import torch

import torchkern as tk
from torchkern._compiled import native
from torchkern.learning.mkl import MultipleKernel

BACKENDS = ["dense", "blocked", "compiled"]


@pytest.fixture
def triton_engine(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("TORCHKERN_TRITON_AUTOTUNE", "0")
    from torchkern._compiled import triton as engine
    return engine


def _matmul(k, X, V, backend, engine=None):
    if backend == "triton":
        f = k.formula(X)
        return engine.matmul(f.fn, f.xs, f.ys, f.ps, V)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return k(X, backend=backend) @ V


# ---- values at an overflowed distance: the limit 0 ------------------------------------

def _far(big, dtype):
    # 1e200: the squared distance overflows; 1e308: the difference itself
    return torch.tensor([[big], [-big], [0.3]], dtype=dtype)


@pytest.mark.parametrize("big", [1e200, 1e308])
def test_rational_quadratic_triton_overflowed_distance_is_the_limit(big, triton_engine):
    # (1 + ∞)^-α = 0 off the diagonal: K V = V (before: NaN, log1p's correction ∞ − ∞)
    k = tk.RationalQuadratic(alpha=0.7).double()
    V = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    out = _matmul(k, _far(big, torch.float64), V, "triton", triton_engine)
    torch.testing.assert_close(out, V, rtol=0, atol=1e-15)


def test_rational_quadratic_keops_overflowed_distance_is_the_limit():
    pytest.importorskip("pykeops")
    k = tk.RationalQuadratic(alpha=0.7).double()
    X = torch.tensor([[1e200], [-1e200], [0.3], [1.1]], dtype=torch.float64)
    V = torch.tensor([[1.0], [2.0], [3.0], [4.0]], dtype=torch.float64)
    u = 0.8 ** 2 / (2 * 0.7)
    c = (1 + u) ** -0.7  # the pair (0.3, 1.1); every pair with a far point: 0
    want = torch.tensor([[1.0], [2.0], [3.0 + 4.0 * c], [4.0 + 3.0 * c]], dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = k(X, backend="keops") @ V
    torch.testing.assert_close(got, want, rtol=1e-13, atol=0)


@pytest.mark.parametrize("backend", ["dense", "compiled", "triton"])
@pytest.mark.parametrize("big", [1e200, 1e308])
def test_periodic_far_inputs_exact_phase(backend, big, request):
    # every double of magnitude ≥ 2^53 is an integer, so with period 1 the pair (N, −N)
    # is one period apart (k = 1) and (±N, 0.3) has phase 0.3: k = exp(−2 sin²(0.3π)).
    # Before: sin of the rounded π(x − y) (any value; NaN where x − y overflowed)
    engine = request.getfixturevalue("triton_engine") if backend == "triton" else None
    k = tk.Periodic(lengthscale=1.0, period=1.0).double()
    X = _far(big, torch.float64)
    e = math.exp(-2 * math.sin(0.3 * math.pi) ** 2)
    want = torch.tensor([2 + e, 2 + e, 1 + 2 * e], dtype=torch.float64)
    X.requires_grad_(True)
    out = _matmul(k, X, torch.ones(3, 1, dtype=torch.float64), backend, engine)
    torch.testing.assert_close(out[:, 0].detach(), want, rtol=1e-12, atol=0)
    # the gradient to X: that of the closed form at the phases 0, 0, 0.3
    (gx,) = torch.autograd.grad(out.sum(), [X])
    d = 2 * (-2 * 2 * math.pi * math.sin(0.3 * math.pi) * math.cos(0.3 * math.pi) * e)
    want_g = torch.tensor([[-d], [-d], [2 * d]], dtype=torch.float64)
    torch.testing.assert_close(gx, want_g, rtol=1e-10, atol=1e-12)


# ---- Matérn gradients where x − y overflows: 0, not NaN --------------------------------

def _matern_ref(nu, x, ls):
    """Σ_i G_i Σ_j K_ij V_j over the off-diagonal pairs of the finite points x (d = 1), by
    the closed form; the diagonal is constant and pairs with far points are 0."""
    u = (x[:, None] - x[None, :]) / ls
    off = ~torch.eye(len(x), dtype=torch.bool)
    r = u[off].abs()
    if nu == 0.5:
        k = torch.exp(-r)
    elif nu == 1.5:
        k = (1 + math.sqrt(3) * r) * torch.exp(-math.sqrt(3) * r)
    else:
        k = (1 + math.sqrt(5) * r + 5 * r * r / 3) * torch.exp(-math.sqrt(5) * r)
    K = torch.zeros(len(x), len(x), dtype=x.dtype)
    K[off] = k
    return K


def _matern_far_case(nu, dtype, big, backend, engine=None):
    k = tk.Matern(nu, lengthscale=0.8).to(dtype)
    X = torch.tensor([[0.3], [big], [1.1], [-big], [-0.4]], dtype=dtype, requires_grad=True)
    V = torch.tensor([[1.0], [-2.0], [0.5], [3.0], [1.5]], dtype=dtype)
    G = torch.tensor([[0.7], [1.3], [-1.0], [2.0], [0.4]], dtype=dtype)
    out = _matmul(k, X, V, backend, engine)
    gx, gl = torch.autograd.grad((out * G).sum(), [X, k.raw_lengthscale])
    # the reference on the finite points 0.3, 1.1, -0.4 (rows 0, 2, 4)
    fin = [0, 2, 4]
    xf = X.detach()[fin, 0].double().requires_grad_(True)
    ls = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    K = _matern_ref(nu, xf, ls)
    Vf, Gf = V[fin].double(), G[fin].double()
    diag = float(k.diag(X.detach()[:1]).detach().double())
    ref = ((K @ Vf) * Gf).sum() + diag * (Vf * Gf).sum()
    rx, rl = torch.autograd.grad(ref, [xf, ls])
    want_x = torch.zeros(5, dtype=torch.float64)
    want_x[fin] = rx
    want_l = rl * torch.sigmoid(k.raw_lengthscale.detach().double())
    tol = dict(rtol=1e-9, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(gx[:, 0].double(), want_x, **tol)
    torch.testing.assert_close(gl.double(), want_l, **tol)


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
@pytest.mark.parametrize("dtype,big", [(torch.float64, 1e308), (torch.float32, 2e38)])
@pytest.mark.parametrize("backend", BACKENDS + ["triton"])
def test_matern_gradient_where_the_difference_overflows(nu, dtype, big, backend, request):
    engine = request.getfixturevalue("triton_engine") if backend == "triton" else None
    _matern_far_case(nu, dtype, big, backend, engine)


def test_matern_gradient_where_the_difference_overflows_keops():
    pytest.importorskip("pykeops")
    _matern_far_case(1.5, torch.float64, 1e308, "keops")


def test_laplacian_gradient_where_the_difference_overflows():
    k = tk.Laplacian().double()
    X = torch.tensor([[1e308], [-1e308], [0.3]], dtype=torch.float64, requires_grad=True)
    for backend in BACKENDS:
        out = _matmul(k, X, torch.ones(3, 1, dtype=torch.float64), backend)
        gx, gl = torch.autograd.grad(out.sum(), [X, k.raw_lengthscale])
        assert float(gx.abs().max()) == 0.0 and float(gl.abs()) == 0.0, backend


# ---- NaN through the C++ loops: NaN out ------------------------------------------------

@pytest.mark.parametrize("profile", ["laplace", "matern32", "matern52"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_native_nan_in_nan_out(profile, dtype):
    x = torch.tensor([[0.1, 0.2], [float("nan"), 0.0], [1.0, -1.0]], dtype=dtype)
    y = torch.tensor([[0.0, 0.0], [0.5, 0.5]], dtype=dtype)
    K = native.radial_gram(profile, x, y)  # built on first use, as in tests/test_compiled.py
    assert bool(K[1].isnan().all()) and bool(K[[0, 2]].isfinite().all())
    out = native.radial_matmul(profile, x, y, torch.ones(2, 1, dtype=dtype))
    assert bool(out[1].isnan().all()) and bool(out[[0, 2]].isfinite().all())
    xg = x.clone().requires_grad_(True)
    out = native.radial_matmul(profile, xg, y, torch.ones(2, 1, dtype=dtype))
    (g,) = torch.autograd.grad(out[[0, 2]].sum(), [xg])
    assert bool(g[[0, 2]].isfinite().all())  # rows 0 and 2 do not see the NaN row


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
def test_compiled_nan_lengthscale_refused(nu):
    # a NaN lengthscale loaded after construction (load_state_dict bypasses the setter):
    # the compiled backend gave K @ V = 0 (its cap) where dense raised
    k = tk.Matern(nu)
    state = k.state_dict()
    state["raw_lengthscale"] = torch.tensor(float("nan"))
    k.load_state_dict(state)
    X = torch.randn(6, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="not finite"):
        k.double()(X, backend="compiled") @ torch.ones(6, dtype=torch.float64)


# ---- bad inputs at the kernels' public boundary ----------------------------------------

@pytest.mark.parametrize("make,name", [
    (lambda v: tk.RationalQuadratic(alpha=v), "alpha"),
    (lambda v: tk.InverseMultiquadric(c=v), "c"),
    (lambda v: tk.Polynomial(offset=v), "offset"),
    (lambda v: tk.Exponential(scale=v), "scale"),
    (lambda v: tk.Chi2(gamma=v), "gamma"),
    (lambda v: tk.ScaleKernel(tk.RBF(), outputscale=v), "outputscale"),
])
def test_scalar_hyperparameter_given_a_vector(make, name):
    # accepted, then a RuntimeError from torch's expand when the kernel was evaluated
    with pytest.raises(ValueError, match=f"{name} must be a single number"):
        make(torch.tensor([1.0, 2.0]))
    make(torch.tensor([1.5]))  # one entry is one number


def test_periodic_period_per_feature():
    X = torch.tensor([[0.1, 0.7, -0.3], [0.4, -1.2, 2.0]], dtype=torch.float64)
    p = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    with pytest.raises(ValueError, match="X has 3 features but Periodic has 2 periods"):
        tk.Periodic(period=p[:2])(X)  # was torch's "size of tensor a (3) must match"
    k = tk.Periodic(period=p).double()
    s = torch.sin(math.pi * (X[0] - X[1]) / p)
    want = math.exp(-2 * float((s * s).sum()))
    torch.testing.assert_close(k(X).to_dense()[0, 1], torch.tensor(want, dtype=torch.float64))


def test_pairs_checks_widths_and_dtypes():
    X = torch.randn(4, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="X has 3 features but Y has 2"):
        tk.RBF().pairs(X, X[:, :2])  # was a RuntimeError from broadcasting
    with pytest.raises(TypeError, match="same dtype"):
        tk.RBF().pairs(X, X.float())  # was computed silently (k(X, Y) refuses it)
    want = torch.exp(-((X - X.flip(0)) ** 2).sum(1) / 2)
    torch.testing.assert_close(tk.RBF().pairs(X, X.flip(0)), want)


@pytest.mark.parametrize("method", ["diag", "pairs", "matrix_diag"])
def test_diag_with_a_nan_hyperparameter_refused(method):
    # a NaN lengthscale loaded after construction: K @ V refused it, diag returned NaN
    k = tk.Matern(2.5)
    with torch.no_grad():
        k.raw_lengthscale.fill_(float("nan"))
    X = torch.randn(5, 2, dtype=torch.float64)
    call = {"diag": lambda: k.diag(X), "pairs": lambda: k.pairs(X, X),
            "matrix_diag": lambda: k(X, backend="blocked").diag()}[method]
    with pytest.raises(ValueError, match="not finite"):
        call()


def test_empty_lengthscale_refused():
    # was torch's "shape '[]' is invalid for input of size 0"
    with pytest.raises(ValueError, match="lengthscale must be a float or a non-empty"):
        tk.RBF(lengthscale=torch.ones(0))
    with pytest.raises(ValueError, match="lengthscale must be a float or a non-empty"):
        tk.Periodic(lengthscale=[])


# ---- NaN through the Triton engine's clamps: NaN out -----------------------------------

@pytest.mark.parametrize("name", ["matern32", "laplacian", "periodic"])
def test_triton_nan_hyperparameter_gives_nan(name, triton_engine):
    # Triton's maximum/minimum return the other operand at NaN: the clamps that formulas
    # write (√max(t, ε), the Matérn cap, the sine's reduction) turned a NaN lengthscale or
    # period into a finite product (0 for Matérn and Laplacian), where torch gives NaN
    k = {"matern32": tk.Matern(1.5), "laplacian": tk.Laplacian(),
         "periodic": tk.Periodic()}[name].double()
    raw = k.raw_period if name == "periodic" else k.raw_lengthscale
    with torch.no_grad():
        raw.fill_(float("nan"))
    X = torch.randn(6, 2, dtype=torch.float64)
    f = k.formula(X)
    out = triton_engine.matmul(f.fn, f.xs, f.ys, f.ps, torch.ones(6, 1, dtype=torch.float64))
    assert bool(out.isnan().all()), out
    assert bool(triton_engine.gram(f.fn, f.xs, f.ys, f.ps).isnan().all())


# ---- RBF, RationalQuadratic, IMQ gradients where 2(x − y) overflows: 0, not NaN ---------

@pytest.mark.parametrize("name", ["rbf", "rq", "imq"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_decaying_kernel_gradients_where_the_difference_overflows(name, backend):
    # the gradient of (x − y)², 2(x − y), overflowed against the kernel's zero derivative
    # at an infinite distance: ∞·0 = NaN, summed into every point's gradient
    k = {"rbf": tk.RBF(lengthscale=0.9), "rq": tk.RationalQuadratic(lengthscale=0.9, alpha=0.6),
         "imq": tk.InverseMultiquadric(lengthscale=0.9, c=1.3)}[name].double()
    X = torch.tensor([[0.3], [1e308], [1.1], [-1e308]], dtype=torch.float64, requires_grad=True)
    V = torch.tensor([[1.0], [2.0], [-0.5], [3.0]], dtype=torch.float64)
    out = _matmul(k, X, V, backend)
    (gx,) = torch.autograd.grad(out.sum(), [X])
    # the closed form on the finite pair (0.3, 1.1): d/dx_0 Σ_ij K_ij V_j
    u = torch.tensor(0.3 - 1.1, dtype=torch.float64, requires_grad=True)
    t = (u / 0.9) ** 2
    kk = {"rbf": torch.exp(-t / 2), "rq": (1 + t / (2 * 0.6)) ** -0.6,
          "imq": (t + 1.3 ** 2) ** -0.5}[name]
    (dk,) = torch.autograd.grad(kk, [u])
    want = torch.tensor([[float(dk) * (-0.5 + 1.0)], [0.0], [-float(dk) * (1.0 - 0.5)], [0.0]],
                        dtype=torch.float64)
    torch.testing.assert_close(gx, want, rtol=1e-12, atol=1e-14)


# ---- pairs of sums, products and scales of structured kernels ---------------------------

def _small_graphs():
    from torch_geometric.data import Data

    def graph(n, edges, labels):
        e = edges + [(b, a) for a, b in edges]
        return Data(edge_index=torch.tensor(e, dtype=torch.long).T.reshape(2, -1),
                    num_nodes=n, x=torch.tensor(labels)[:, None])

    return [graph(3, [(0, 1), (1, 2), (2, 0)], [0, 1, 0]),
            graph(4, [(0, 1), (1, 2), (2, 3)], [1, 1, 0, 2]),
            graph(4, [(0, 1), (0, 2), (0, 3)], [0, 0, 1, 1])]


@pytest.mark.parametrize("make", [
    lambda wl: 2.0 * wl(n_iter=2),
    lambda wl: wl(n_iter=1) + wl(n_iter=2),
    lambda wl: 3.0 * (wl(n_iter=1) + wl(n_iter=2)),
    lambda wl: MultipleKernel([wl(n_iter=1), wl(n_iter=2)], init=[0.3, 0.7]),
])
def test_structured_sum_and_scale_pairs(make):
    # sums, scales and multiple-kernel combinations of graph kernels: were IndexError: tuple index out of range (the vector width check read X.shape[1]
    # of a GraphSet); k(x_i, y_i) is the diagonal of the Gram k(X, Y)
    from torchkern.graphs import WeisfeilerLehman
    k = make(WeisfeilerLehman)
    X = _small_graphs()
    Y = [X[1], X[2], X[1]]
    want = k(X, Y, backend="dense").to_dense().diagonal()
    torch.testing.assert_close(k.pairs(X, Y), want, rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="same number of samples"):
        k.pairs(X, Y[:2])
    with pytest.raises(TypeError, match="Y: graphs must be torch_geometric Data"):
        k.pairs(X, [1, 2, 3])


@pytest.mark.parametrize("c", [np.array([2.5]), np.array(2.5), np.float32(2.5)])
def test_kernel_scaled_by_numpy(c):
    # NumPy's operator went first: np.array([2.5]) * k was an object array holding 2.5 * k
    # (not a kernel); both orders are now the ScaleKernel c · k
    X = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    D = tk.RBF()(X, backend="dense").to_dense()
    for k in (c * tk.RBF(), tk.RBF() * c):
        assert isinstance(k, tk.ScaleKernel)
        torch.testing.assert_close(k(X, backend="dense").to_dense(), 2.5 * D)
    with pytest.raises(ValueError, match="outputscale must be a single number"):
        np.array([2.0, 3.0]) * tk.RBF()
