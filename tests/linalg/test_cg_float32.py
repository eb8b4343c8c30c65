"""float32 CG: mixed-precision iterative refinement reaches tol; the floor is reported."""
import math
import re
import warnings

import pytest
import torch

from torchkern import RBF
from torchkern.linalg import ConvergenceWarning, cg

f64 = torch.float64


def _problem(n, lengthscale=0.5, lam=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=f64)
    b = torch.randn(n, 2, generator=g, dtype=f64)
    return X, b, lengthscale, lam


def _rel_residual(A64, b64, x):
    """‖b − A x‖ / ‖b‖ per column, in float64 dense algebra."""
    return ((b64 - A64 @ x.to(f64)).norm(dim=0) / b64.norm(dim=0)).max().item()


def test_dense_float32_reaches_tol_like_float64(rbf_gram):
    X, b, ell, lam = _problem(1500)
    A32 = (rbf_gram(X, lengthscale=ell) + lam * torch.eye(1500, dtype=f64)).float()
    A64 = A32.double()  # the float32 matrix, exactly
    b32 = b.float()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        x, info = cg(A32, b32, tol=1e-6, return_info=True)
        _, info64 = cg(A64, b32.double(), tol=1e-6, return_info=True)
    assert x.dtype == torch.float32 and info.converged and not info.stalled
    res = _rel_residual(A64, b32.double(), x)
    assert res <= 1e-6
    torch.testing.assert_close(info.residual.max().item(), res, rtol=1e-6, atol=0)
    # Refinement restarts the Krylov space a few times: about the float64 step count.
    assert info.iterations <= 1.5 * info64.iterations + 10
    ref = torch.linalg.solve(A64, b32.double())
    assert ((x.double() - ref).norm() / ref.norm()).item() < 1e-5


def test_lazy_float32_kernel_matrix_reaches_tol_and_gradients_flow():
    X, b, ell, lam = _problem(1200, seed=1)
    k = RBF(ell)
    K = k(X.float(), backend="blocked")
    B = b.float().requires_grad_(True)
    x, info = cg(K.add_diag(lam), B, tol=1e-6, return_info=True)
    assert info.converged
    with torch.no_grad():
        A64 = K.to_dense().double() + lam * torch.eye(1200, dtype=f64)
    assert _rel_residual(A64, b.float().double(), x.detach()) <= 1e-6
    # dX = A⁻¹(dB − dA X): compare with the float64 dense solve's gradients.
    W = torch.randn(1200, 2, generator=torch.Generator().manual_seed(5), dtype=f64)
    g_ell, g_B = torch.autograd.grad((x.double() * W).sum(), (k.raw_lengthscale, B))
    k64 = RBF(ell)
    B64 = b.float().double().requires_grad_(True)
    A = k64(X.float().double(), backend="dense").to_dense() + lam * torch.eye(1200, dtype=f64)
    r_ell, r_B = torch.autograd.grad((torch.linalg.solve(A, B64) * W).sum(),
                                     (k64.raw_lengthscale, B64))
    assert abs(g_ell.item() / r_ell.item() - 1) < 1e-4
    assert ((g_B.double() - r_B).norm() / r_B.norm()).item() < 1e-5


def test_floor_of_float32_products_is_reported_not_iterated(matmul_only, rbf_gram):
    # An operator known only through float32 products: its rounding (~n·eps·‖A‖‖x‖)
    # hides residuals below ~1e-5 here, so tol=1e-10 stops early with a warning that says
    # so (not "use a preconditioner"). The residual it reports comes from those products:
    # right to within their rounding.
    X, b, ell, lam = _problem(800, lengthscale=1.0, lam=0.1, seed=2)
    A32 = (rbf_gram(X, lengthscale=ell) + lam * torch.eye(800, dtype=f64)).float()
    with pytest.warns(ConvergenceWarning) as rec:
        x, info = cg(matmul_only(A32), b[:, 0].float(), tol=1e-10, max_iter=1000,
                     return_info=True)
    msg = str(rec[0].message)
    assert "as far as float32 resolves this system" in msg
    assert not re.search(r"(use|try) a (better )?preconditioner|raise max_iter", msg)
    assert info.stalled and not info.converged and info.iterations < 300
    res = _rel_residual(A32.double(), b[:, 0].float().double(), x)
    assert 0.5 < info.residual.item() / res < 2
    assert 1e-10 < res < 1e-4


def test_float64_operator_with_float32_products_stops_as_stalled(rbf_gram):
    # A float64 operator whose products are only float32-accurate (as a Nyström system
    # built from float32 blocks) stalls; CG says why instead of running to max_iter.
    X, b, ell, lam = _problem(600, lengthscale=1.0, lam=1e-2, seed=3)
    A32 = (rbf_gram(X, lengthscale=ell) + lam * torch.eye(600, dtype=f64)).float()

    class Float32Products:
        shape, dtype, device = A32.shape, f64, A32.device

        def __matmul__(self, V):
            return (A32 @ V.float()).double()

    with pytest.warns(ConvergenceWarning, match="not accurate enough") as rec:
        _, info = cg(Float32Products(), b[:, 0], tol=1e-9, max_iter=2000, return_info=True)
    assert "raise max_iter" not in str(rec[0].message)
    assert info.stalled and info.iterations < 1000
    assert float(info.residual) > 1e-9


def test_max_iter_advice_in_float32(rbf_gram):
    X, b, ell, lam = _problem(500, lengthscale=1.0, lam=1e-3, seed=4)
    A32 = (rbf_gram(X, lengthscale=ell) + lam * torch.eye(500, dtype=f64)).float()
    with pytest.warns(ConvergenceWarning, match="did not converge in 20 iterations.*raise max_iter"):
        _, info = cg(A32, b[:, 0].float(), tol=1e-6, max_iter=20, return_info=True)
    assert info.iterations == 20 and not info.converged and not info.stalled


def test_verbose_bar_counts_digits_to_tol(capsys, rbf_gram):
    X, b, ell, lam = _problem(300, seed=5)
    A = rbf_gram(X, lengthscale=ell) + lam * torch.eye(300, dtype=f64)
    x, info = cg(A, b, tol=1e-8, verbose="solve", return_info=True)
    err = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()
    last = err[-1]
    assert last.startswith("solve: 100%") and "8.0/8.0 digits" in last
    assert f"{info.iterations} it" in last
    assert f"residual {info.residual.max().item():.1e}" in last
    assert math.isclose(-math.log10(1e-8), 8.0)


def test_default_tol_accepts_float32_rounding_explicit_tol_warns(rbf_gram):
    # K + 0.1 I on 3,000 RBF points: the float32 rounding of the exact solution has a
    # relative residual above 1e-6, so tol=1e-6 asked of the float32 X cannot be met.
    X, b, ell, _ = _problem(3000)
    A64 = rbf_gram(X.float().double(), lengthscale=ell).float().double()
    A64 += 0.1 * torch.eye(3000, dtype=f64)
    A32, b32 = A64.float(), b.float()
    x_ref = torch.linalg.solve(A64, b32.double())  # independent float64 reference
    floor = _rel_residual(A64, b32.double(), x_ref.float())
    assert floor > 1e-6  # the case where an explicit tol=1e-6 warned
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, info = cg(A32, b32, return_info=True)
    assert x.dtype == torch.float32 and info.converged and not info.stalled
    # the returned X is the float32 rounding of a solution at relative residual <= 1e-6
    assert _rel_residual(A64, b32.double(), x) <= floor + 2e-6
    assert ((x.double() - x_ref).norm(dim=0) / x_ref.norm(dim=0)).max() <= 1e-5
    with pytest.warns(ConvergenceWarning, match="as far as float32 resolves"):
        cg(A32, b32, tol=1e-9)
