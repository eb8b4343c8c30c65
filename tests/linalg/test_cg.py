import pytest
import torch

from torchkern.linalg import CGInfo, ConvergenceWarning, PivotedCholesky, cg

f64 = torch.float64


def _spd(n, cond, seed):
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=f64))
    return (Q * torch.logspace(0, torch.log10(torch.tensor(cond)), n, dtype=f64)) @ Q.T


def test_well_conditioned_multiple_rhs_matches_solve(matmul_only):
    A = _spd(200, 50.0, 0)
    B = torch.randn(200, 5, generator=torch.Generator().manual_seed(1), dtype=f64)
    op = matmul_only(A)
    X, info = cg(op, B, tol=1e-12, return_info=True)
    ref = torch.linalg.solve(A, B)
    assert torch.allclose(X, ref, rtol=0, atol=1e-8 * ref.abs().max())
    assert isinstance(info, CGInfo) and info.converged
    assert info.residual.shape == (5,) and float(info.residual.max()) <= 1e-12
    # batched: one product per iteration for all 5 columns (+ the residual checks)
    assert op.products <= info.iterations + 3


def test_vector_rhs_returns_vector():
    A = _spd(50, 10.0, 2)
    b = torch.linspace(-1, 1, 50, dtype=f64)
    x, info = cg(A, b, tol=1e-12, return_info=True)
    assert x.shape == (50,) and info.residual.shape == ()
    torch.testing.assert_close(x, torch.linalg.solve(A, b), rtol=0, atol=1e-9)


def test_rbf_gram_with_small_ridge_matches_solve(rbf_gram):
    # κ(A) ≈ 2.4·10⁵; the preconditioner only makes the test fast
    n = 300
    X = torch.randn(n, 3, generator=torch.Generator().manual_seed(0), dtype=f64)
    A = rbf_gram(X, lengthscale=1.0) + 1e-6 * n * torch.eye(n, dtype=f64)
    B = torch.randn(n, 3, generator=torch.Generator().manual_seed(1), dtype=f64)
    P = PivotedCholesky(rbf_gram(X, lengthscale=1.0), 100, 1e-6 * n)
    X_cg, info = cg(A, B, preconditioner=P, tol=1e-10, max_iter=400, return_info=True)
    ref = torch.linalg.solve(A, B)
    assert info.converged
    assert (X_cg - ref).abs().max() <= 1e-8 * ref.abs().max()


def test_zero_column_and_x0():
    A = _spd(30, 5.0, 3)
    B = torch.zeros(30, 2, dtype=f64)
    B[:, 1] = 1.0
    ref = torch.linalg.solve(A, B)
    X = cg(A, B, tol=1e-12, x0=ref + 1e-3)
    assert torch.equal(X[:, 0], torch.zeros(30, dtype=f64))
    torch.testing.assert_close(X, ref, rtol=0, atol=1e-9)


def test_float32_needs_the_preconditioner(rbf_gram):
    # κ(K + λI) ≈ 2·10⁴; float32 CG restarts from the true residual, so the
    # unpreconditioned solve does get to 1e-4 -- but only after ~290 iterations.
    n, lam, cap = 2000, 0.02, 150
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 3, generator=g, dtype=f64)
    K = rbf_gram(X)
    A64 = K + lam * torch.eye(n, dtype=f64)
    b64 = torch.sin(2 * X[:, 0]) * torch.cos(X[:, 1]) + 0.1 * torch.randn(n, generator=g, dtype=f64)
    A32, b32 = A64.float(), b64.float()

    with pytest.warns(ConvergenceWarning, match="did not converge"):
        _, plain = cg(A32, b32, tol=1e-4, max_iter=cap, return_info=True)
    assert not plain.converged and float(plain.residual) > 1e-4

    P = PivotedCholesky(K.float(), 100, lam)
    x, info = cg(A32, b32, tol=1e-4, max_iter=cap, preconditioner=P, return_info=True)
    assert x.dtype == torch.float32
    assert info.converged and info.iterations < cap // 3
    assert float(info.residual) <= 1e-4
    # against the float64 operator (A32 is A64 rounded, hence the factor 2)
    assert float((b64 - A64 @ x.double()).norm() / b64.norm()) <= 2e-4


def test_max_iter_too_small_warns_and_reports():
    A = _spd(100, 1e4, 4)
    b = torch.ones(100, dtype=f64)
    with pytest.warns(ConvergenceWarning, match=r"residual \d\.\d+e[-+]\d+ > tol=1\.0e-10"):
        x, info = cg(A, b, tol=1e-10, max_iter=5, return_info=True)
    assert info.iterations == 5 and not info.converged
    true_res = (b - A @ x).norm() / b.norm()
    torch.testing.assert_close(info.residual, true_res, rtol=1e-10, atol=0)
    assert float(info.residual) > 1e-10


def test_bad_input_raises():
    A = _spd(10, 2.0, 5)
    with pytest.raises(ValueError, match="B must have shape"):
        cg(A, torch.ones(11, dtype=f64))
    with pytest.raises(ValueError, match="B contains NaN"):
        cg(A, torch.full((10,), float("nan"), dtype=f64))
    with pytest.raises(ValueError, match="A must be square"):
        cg(torch.ones(10, 9, dtype=f64), torch.ones(10, dtype=f64))
    with pytest.raises(TypeError, match="B has dtype"):
        cg(A, torch.ones(10, dtype=torch.float32))
    with pytest.raises(ValueError, match="tol"):
        cg(A, torch.ones(10, dtype=f64), tol=0)
    with pytest.raises(ValueError, match="not positive definite"):
        cg(-A, torch.ones(10, dtype=f64))


def test_gradients_match_dense_solve(rbf_gram):
    n = 150
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 2, generator=g, dtype=f64)
    B0 = torch.randn(n, 2, generator=g, dtype=f64)
    W = torch.randn(n, 2, generator=g, dtype=f64)

    def loss(solver):
        ell = torch.tensor(0.8, dtype=f64, requires_grad=True)
        B = B0.clone().requires_grad_(True)
        A = rbf_gram(X, lengthscale=ell) + 0.1 * torch.eye(n, dtype=f64)
        out = (solver(A, B) * W).sum()
        return torch.autograd.grad(out, (ell, B))

    g_cg = loss(lambda A, B: cg(A, B, tol=1e-12))
    g_ref = loss(torch.linalg.solve)
    torch.testing.assert_close(g_cg[0], g_ref[0], rtol=1e-7, atol=0)
    torch.testing.assert_close(g_cg[1], g_ref[1], rtol=0, atol=1e-8 * g_ref[1].abs().max())


def test_gradient_wrt_vector_rhs_and_no_graph_when_not_needed():
    A = _spd(40, 10.0, 6)
    b = torch.linspace(0, 1, 40, dtype=f64, requires_grad=True)
    x = cg(A, b, tol=1e-12)
    (gb,) = torch.autograd.grad(x.sum(), b)
    torch.testing.assert_close(gb, torch.linalg.solve(A, torch.ones(40, dtype=f64)), rtol=0, atol=1e-9)
    assert cg(A, b.detach()).grad_fn is None
