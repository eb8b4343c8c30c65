"""Kernel algebra's bad operands, and float32 Grams whose scaled inputs overflow."""
import math

import numpy as np
import pytest
import torch

import torchkern as tk


@pytest.mark.parametrize("expr, op", [
    (lambda k: k * "a", r"\*"), (lambda k: "a" * k, r"\*"), (lambda k: k * [1], r"\*"),
    (lambda k: [1] * k, r"\*"), (lambda k: k * None, r"\*"), (lambda k: k * 2j, r"\*"),
    (lambda k: k + "a", r"\+"), (lambda k: k + None, r"\+"), (lambda k: None + k, r"\+"),
    (lambda k: k + 1.5, r"\+"), (lambda k: k + torch.zeros(2), r"\+"),
])
def test_kernel_algebra_names_what_it_accepts(expr, op):
    # Python's own messages ("can't multiply sequence by non-int of type 'RBF'",
    # "unsupported operand type(s)") said neither what a kernel combines with nor which side
    with pytest.raises(TypeError, match=rf"kernel {op} .*: expected a Kernel"):
        expr(tk.RBF())


def test_kernel_algebra_keeps_numbers_zero_and_sum():
    X = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    k = tk.RBF(lengthscale=0.7)
    D = k(X, backend="dense").to_dense()
    L = tk.Linear()(X, backend="dense").to_dense()
    for c in (2, 2.0, np.float32(2.0), np.array(2.0), torch.tensor(2.0)):
        for s in (c * k, k * c):
            torch.testing.assert_close(s(X, backend="dense").to_dense(), 2 * D)
    # 0 in any real 0-d form is the start of a sum
    for z in (0, 0.0, np.int64(0), np.array(0.0), torch.tensor(0.0)):
        assert (z + k) is k and (k + z) is k
    s = sum([k, tk.Linear()], torch.tensor(0.0))
    torch.testing.assert_close(s(X, backend="dense").to_dense(), D + L)


# -- float32 Grams whose intermediates leave float32's range -----------------------------
WIDE = [[3e38, 1.0], [0.0, 2.0], [-3e38, 0.5], [2.9e38, 1.0]]


def _against_float64(make, X, rtol=1e-5, ref=None):
    """Dense and blocked Grams, diagonal and pairs in float32 against ``ref`` (default: the
    float64 kernel on the same, float32-representable, points)."""
    k = make()
    if ref is None:
        ref = make().double()(X.double(), backend="dense").to_dense().detach()
    for backend in ("dense", "blocked"):
        K = k(X, backend=backend).to_dense().detach()
        assert K.dtype == torch.float32
        torch.testing.assert_close(K.double(), ref, rtol=rtol, atol=1e-44)
    torch.testing.assert_close(k.diag(X).detach().double(), ref.diagonal(), rtol=rtol, atol=0)
    P = k.pairs(X, X.flip(0)).detach().double()
    torch.testing.assert_close(P, ref.flip(1).diagonal(), rtol=rtol, atol=1e-44)
    return ref


@pytest.mark.parametrize("make", [
    lambda: tk.Matern(0.5, lengthscale=0.8), lambda: tk.Matern(1.5, lengthscale=0.8),
    lambda: tk.Matern(2.5, lengthscale=0.8), lambda: tk.RBF(0.8), lambda: tk.Laplacian(0.8),
    lambda: tk.RationalQuadratic(0.8, alpha=0.05), lambda: tk.InverseMultiquadric(0.8),
    lambda: tk.RBF(torch.tensor([0.8, 1.0])),
], ids=["m12", "m32", "m52", "rbf", "laplacian", "rq", "imq", "rbf-ard"])
def test_float32_gram_where_x_over_lengthscale_overflows(make):
    # X/ℓ = 3e38/0.8 is ∞ in float32: x − x = ∞ − ∞ made the diagonal NaN and every
    # Gram, diagonal and pair was refused "not finite" (the true diagonal is 1)
    ref = _against_float64(make, torch.tensor(WIDE, dtype=torch.float32))
    assert float(ref.diagonal().min()) > 0


HEAVY = [[1e20], [-1e20], [3.0]]


def _sqdist_np(X):
    X = np.asarray(X, dtype=np.float64)
    return ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)


def test_float32_heavy_tails_past_squared_overflow():
    # ‖x − y‖² = 4e40 overflowed float32: RationalQuadratic read k = 0 (it is 0.38 at
    # α = 0.01), the inverse multiquadric 0 (it is 5e-21); closed forms in NumPy float64
    X = torch.tensor(HEAVY, dtype=torch.float32)
    d2, a = _sqdist_np(HEAVY), 0.01
    rq = (1 + d2 / (2 * a)) ** -a
    _against_float64(lambda: tk.RationalQuadratic(1.0, alpha=a), X, ref=torch.from_numpy(rq))
    assert rq[0, 1] > 0.3
    imq = (d2 + 1.0) ** -0.5
    _against_float64(lambda: tk.InverseMultiquadric(1.0), X, ref=torch.from_numpy(imq))
    # the gradient in the lengthscale ℓ = 1: ∂k/∂ℓ = 2α u (1 + u)^(−α−1) / ℓ with
    # u = d²/(2αℓ²), times ∂ℓ/∂raw = 1 − e^(−ℓ) (softplus)
    k = tk.RationalQuadratic(1.0, alpha=a)
    k(X, backend="blocked").to_dense().sum().backward()
    u = d2 / (2 * a)
    grad = (2 * a * u * (1 + u) ** (-a - 1)).sum() * (1 - math.exp(-1.0))
    assert abs(float(k.raw_lengthscale.grad) - grad) <= 1e-5 * abs(grad)


@pytest.mark.parametrize("alpha", [1e39, 3e38])
def test_float32_rq_of_huge_alpha_past_squared_overflow(alpha):
    # α = 1e39 was ∞ once rounded to float32 in the float64 evaluation: NaN entries,
    # refused "not finite"; RQ is the RBF there: (1 + d²/(2α))^(−α) = 0 off the diagonal
    X = torch.tensor(HEAVY, dtype=torch.float32)
    ref = (1 + _sqdist_np(HEAVY) / (2 * alpha)) ** -alpha
    assert np.array_equal(ref, np.eye(3))
    _against_float64(lambda: tk.RationalQuadratic(1.0, alpha=alpha), X, ref=torch.from_numpy(ref))


@pytest.mark.parametrize("make, ref, why", [
    (lambda: tk.RationalQuadratic(1.0, alpha=0.01),
     lambda d2: (1 + d2 / 0.02) ** -0.01, "RationalQuadratic's float32 input X"),
    (lambda: tk.InverseMultiquadric(1.0), lambda d2: (d2 + 1.0) ** -0.5,
     "InverseMultiquadric's float32 input X"),
    (lambda: 2.0 * tk.RationalQuadratic(1.0, alpha=0.01) + tk.RBF(),
     lambda d2: 2 * (1 + d2 / 0.02) ** -0.01 + np.exp(-d2 / 2),
     "RationalQuadratic's float32 input X"),
], ids=["rq", "imq", "sum"])
def test_float32_heavy_tails_keops_triton_refuse_auto_takes_torch(monkeypatch, make, ref, why):
    # KeOps computed these float32 Grams in float32: off-diagonal entries 0.0 where they
    # are 0.3776 / 0.3828 (RQ). Explicit KeOps/Triton is refused before anything compiles;
    # "auto" (here choosing among the lazy backends, KeOps allowed on the CPU) takes
    # blocked torch, which evaluates them in float64
    monkeypatch.setattr(tk.config, "keops_on_cpu", True)
    monkeypatch.setattr(tk.config, "dense_max_entries", 0)
    X = torch.tensor(HEAVY, dtype=torch.float32)
    for backend in ("keops", "triton"):
        with pytest.raises(ValueError, match=rf"backend='{backend}' computes in float32, but "
                                             rf"{why} .* use backend='blocked'"):
            make()(X, backend=backend)
    K = make()(X)
    assert K.backend == "blocked"
    out = (K @ torch.eye(3)).detach().double()
    torch.testing.assert_close(out, torch.from_numpy(ref(_sqdist_np(HEAVY))), rtol=1e-6, atol=0)


def test_float32_imq_huge_c_keops_refused_by_name(monkeypatch):
    # c = 1e30: c² overflows float32 and KeOps gave 0.0 where k ≈ 1e-30
    monkeypatch.setattr(tk.config, "keops_on_cpu", True)
    monkeypatch.setattr(tk.config, "dense_max_entries", 0)
    X = torch.tensor([[0.5], [0.0], [3.0]], dtype=torch.float32)
    with pytest.raises(ValueError, match=r"backend='keops' computes in float32, but "
                                         r"InverseMultiquadric's c = 1e\+30 has a square"):
        tk.InverseMultiquadric(c=1e30)(X, backend="keops")
    K = tk.InverseMultiquadric(c=1e30)(X)
    assert K.backend == "blocked"
    ref = (_sqdist_np([[0.5], [0.0], [3.0]]) + 1e60) ** -0.5
    torch.testing.assert_close((K @ torch.eye(3)).detach().double(), torch.from_numpy(ref),
                               rtol=1e-6, atol=0)


@pytest.mark.parametrize("make", [
    lambda: tk.InverseMultiquadric(1.0, c=1e-30),   # k(x, x) = 1/√(c² = 0) was ∞ (is 1e30)
    lambda: tk.InverseMultiquadric(1.0, c=1e30),    # 1/√(c² = ∞) was 0 (is ≈ 1e-30)
    lambda: tk.Periodic(lengthscale=1e-30),          # sin²/ℓ² = 0/0 at x = y was NaN
    lambda: tk.RationalQuadratic(1.0, alpha=3e38),  # 2α = ∞ made K = 1 everywhere
], ids=["imq-tiny-c", "imq-huge-c", "periodic-tiny-l", "rq-huge-alpha"])
def test_float32_extreme_hyperparameters(make):
    X = torch.tensor([[0.3], [0.0], [0.1], [-2.0]], dtype=torch.float32)
    _against_float64(make, X)


@pytest.mark.parametrize("other", ["a", 1.0, None, torch.ones(4, 4, dtype=torch.float64)],
                         ids=["str", "float", "None", "tensor"])
def test_kernel_matrix_sum_names_what_it_accepts(other):
    # K + 1.0 said "unsupported operand type(s) for +: 'DenseKernelMatrix' and 'float'"
    X = torch.randn(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    K = tk.RBF()(X)
    for expr in (lambda: K + other, lambda: other + K):
        with pytest.raises(TypeError, match=r"K \+ other: other must be a KernelMatrix "
                                            r"\(for K \+ λI use K.add_diag\(λ\)\)"):
            expr()
    L = tk.Linear()(X)
    torch.testing.assert_close((K + L).to_dense(), K.to_dense() + X @ X.T)


# -- ordinary float32 Grams stay in float32 ----------------------------------------------
def _float32_expression(k, X):
    """The kernel's expression evaluated in float32 on the (n, m, 1) blocks a formula
    sees; X is dyadic, so that ‖x − y‖² is exact in float32 whichever way it is summed."""
    if isinstance(k, tk.Periodic):
        p, ell = k.period.float(), k.lengthscale.float()
        z = torch.fmod(X, p)
        s = ((z[:, None, :] - z[None, :, :]) * math.pi / p).sin() / ell
        return ((s * s).sum(-1, keepdim=True) * -2.0).exp().squeeze(-1)
    x = X / k.lengthscale.float()
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1, keepdim=True)
    if isinstance(k, tk.RBF):
        out = (d2 * -0.5).exp()
    elif isinstance(k, tk.Laplacian):
        out = (-((d2 - 1e-30).relu() + 1e-30).sqrt()).exp()
    elif isinstance(k, tk.Matern):
        r = d2.clamp(1e-30, 746.0 ** 2).sqrt()
        s = r * math.sqrt(2 * k.nu)
        out = {0.5: lambda: (-r).exp(), 1.5: lambda: (s + 1.0) * (-s).exp(),
               2.5: lambda: (s + s * s * (1.0 / 3.0) + 1.0) * (-s).exp()}[k.nu]()
    elif isinstance(k, tk.RationalQuadratic):
        a = k.alpha.float().reshape(-1)
        out = (torch.log1p(d2 / (a * 2.0)) * (-a)).exp()
    else:
        c = k.c.float().reshape(-1)
        out = (d2 + c * c).rsqrt()
    return out.squeeze(-1)


@pytest.mark.parametrize("make, closed", [
    (lambda: tk.RBF(2.0), lambda d2: np.exp(-d2 / 8)),
    (lambda: tk.Matern(0.5, lengthscale=2.0), lambda d2: np.exp(-np.sqrt(d2) / 2)),
    (lambda: tk.Matern(1.5, lengthscale=2.0),
     lambda d2: (1 + np.sqrt(3 * d2) / 2) * np.exp(-np.sqrt(3 * d2) / 2)),
    (lambda: tk.Matern(2.5, lengthscale=2.0),
     lambda d2: (1 + np.sqrt(5 * d2) / 2 + 5 * d2 / 12) * np.exp(-np.sqrt(5 * d2) / 2)),
    (lambda: tk.RationalQuadratic(2.0, alpha=0.7), lambda d2: (1 + d2 / (8 * 0.7)) ** -0.7),
    (lambda: tk.Laplacian(2.0), lambda d2: np.exp(-np.sqrt(d2) / 2)),
    (lambda: tk.InverseMultiquadric(2.0, c=0.6), lambda d2: (d2 / 4 + 0.36) ** -0.5),
    (lambda: tk.Periodic(0.8, period=1.5), None),
], ids=["rbf", "m12", "m32", "m52", "rq", "laplacian", "imq", "periodic"])
def test_ordinary_float32_grams_computed_in_float32(make, closed):
    # within float32's range the float32 path is the float32 expression, bit for bit (no
    # detour through float64, whose rounded values differ from it in some entries), and
    # equals the float64 closed form to float32 accuracy
    X = (torch.randint(-12, 13, (30, 2), generator=torch.Generator().manual_seed(0)) / 4.0)
    k, Xn = make(), X.double().numpy()
    if closed is None:  # Periodic: exp(−2 Σ sin²(π(x − y)/p) / ℓ²)
        ref = np.exp(-2 * (np.sin(np.pi * (Xn[:, None] - Xn[None]) / 1.5) ** 2).sum(-1) / 0.64)
    else:
        ref = closed(_sqdist_np(Xn))
    ref = torch.from_numpy(ref)
    same = _float32_expression(k, X)
    if not isinstance(k, tk.RBF):  # the RBF's is exp of an exact argument: rounded alike
        assert bool((same != ref.float()).any())  # float64-then-rounded is told apart
    for backend in ("dense", "blocked"):
        K = k(X, backend=backend).to_dense().detach()
        assert K.dtype == torch.float32 and torch.equal(K, same), backend
        torch.testing.assert_close(K.double(), ref, rtol=2e-6, atol=0)


@pytest.mark.parametrize("c", [1e-25, 1e-10, 1.0])
def test_imq_gradient_with_a_tiny_c_against_the_closed_form(c):
    # the fast form's gradient 2(a_i Σ_j G_ij − Σ_j G_ij b_j) cancelled beside the
    # diagonal's G_ii = −1/(2c³): float64 gradients in X and ℓ were exactly 0 for c = 1e-10
    # and 1e-25. Closed form of Σ_ij k(x_i, x_j), k = (‖x − y‖²/ℓ² + c²)^(−1/2), ℓ = 1:
    # ∂/∂x_i = −2 Σ_j (x_i − x_j) k_ij³, ∂/∂ℓ = Σ_ij d²_ij k_ij³, ∂ℓ/∂raw = 1 − e^(−ℓ)
    X = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    Xn = X.numpy()
    D = Xn[:, None, :] - Xn[None, :, :]
    k3 = ((D ** 2).sum(-1) + c * c) ** -1.5
    gx = -2 * (D * k3[..., None]).sum(1)
    gl = ((D ** 2).sum(-1) * k3).sum() * (1 - math.exp(-1.0))
    for backend in ("dense", "blocked"):
        k = tk.InverseMultiquadric(1.0, c=c).double()
        Xg = X.clone().requires_grad_(True)
        k(Xg, backend=backend).to_dense().sum().backward()
        torch.testing.assert_close(Xg.grad, torch.from_numpy(gx), rtol=1e-10, atol=1e-13)
        assert abs(float(k.raw_lengthscale.grad) - gl) <= 1e-10 * abs(gl)


@pytest.mark.parametrize("make", [lambda: tk.InverseMultiquadric(c=0.5),
                                  lambda: tk.RationalQuadratic(alpha=0.5), tk.RBF],
                         ids=["imq", "rq", "rbf"])
def test_float32_range_check_reads_the_device_once(monkeypatch, make):
    # whether float32 data need float64 was read value by value: float(lo), float(hi)
    # per input and float(c), five or six host synchronizations per formula; now one
    reads = []
    for name in ("__float__", "__bool__", "__int__", "__index__", "item", "tolist"):
        orig = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name,
                            lambda self, *a, _o=orig, _n=name: reads.append(_n) or _o(self, *a))
    g = torch.Generator().manual_seed(0)
    X, Y = torch.randn(5, 2, generator=g), torch.randn(4, 2, generator=g)
    counts = []
    for dtype in (torch.float64, torch.float32):  # float64 data skip the check
        reads.clear()
        make().to(dtype).formula(X.to(dtype), Y.to(dtype))
        counts.append(len(reads))
    assert counts[1] == counts[0] + 1, counts
