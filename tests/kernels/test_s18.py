"""Kernel algebra's bad operands, and float32 Grams whose scaled inputs overflow."""
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


def _against_float64(make, X, rtol=1e-5):
    """Dense and blocked Grams, diagonal and pairs in float32 against the float64 kernel
    on the same (float32-representable) points, rounded."""
    k, k64 = make(), make().double()
    ref = k64(X.double(), backend="dense").to_dense().detach()
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


def test_float32_heavy_tails_past_squared_overflow():
    # ‖x − y‖² = 4e40 overflowed float32: RationalQuadratic read k = 0 (it is 0.38 at
    # α = 0.01), the inverse multiquadric 0 (it is 5e-21)
    X = torch.tensor([[1e20], [-1e20], [3.0]], dtype=torch.float32)
    ref = _against_float64(lambda: tk.RationalQuadratic(1.0, alpha=0.01), X)
    assert float(ref[0, 1]) > 0.3
    _against_float64(lambda: tk.InverseMultiquadric(1.0), X)
    # gradients in the lengthscale follow the float64 kernel's
    k, k64 = tk.RationalQuadratic(1.0, alpha=0.01), tk.RationalQuadratic(1.0, alpha=0.01).double()
    k(X, backend="blocked").to_dense().sum().backward()
    k64(X.double(), backend="dense").to_dense().sum().backward()
    torch.testing.assert_close(k.raw_lengthscale.grad, k64.raw_lengthscale.grad, rtol=1e-5,
                               atol=0)


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
