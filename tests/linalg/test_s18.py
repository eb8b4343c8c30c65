"""One rule for the solvers' iteration caps: CG solves take max_iter=0 (as SciPy's cg),
eigensolvers need a product; block_krylov_eigsh checks its settings."""
import pytest
import torch

from torchkern.linalg import ConvergenceWarning, cg, inv_quad_logdet, logdet
from torchkern.linalg.eig import block_krylov_eigsh

f64 = torch.float64


def _spd(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=f64)
    return torch.exp(-torch.cdist(X, X) ** 2 / 2) + 0.1 * torch.eye(n, dtype=f64)


def test_cg_solves_take_max_iter_zero_as_scipy_cg():
    # cg(max_iter=0) returned the start with a warning, inv_quad_logdet(max_iter=0) and
    # logdet(cg_max_iter=0) raised "must be an int with 1 <= max_iter"
    A = _spd()
    b = torch.linspace(-1, 1, 40, dtype=f64)
    with pytest.warns(ConvergenceWarning, match="did not converge in 0 iterations"):
        x = cg(A, b, max_iter=0)
    assert torch.equal(x, torch.zeros_like(b))  # scipy.sparse.linalg.cg(maxiter=0): x0 = 0
    with pytest.warns(ConvergenceWarning, match=r"inv_quad_logdet \(cg\) did not converge in 0"):
        quad, _ = inv_quad_logdet(A, b, method="slq", max_iter=0, random_state=0)
    assert float(quad) == 0.0  # bᵀx at x = 0, said to be unconverged
    quad, _ = inv_quad_logdet(A, b, method="slq", random_state=0)
    torch.testing.assert_close(quad, b @ torch.linalg.solve(A, b), rtol=1e-5, atol=0)
    with pytest.warns(ConvergenceWarning, match=r"logdet \(cg solves for the gradient\)"):
        logdet(A.clone().requires_grad_(), method="slq", cg_max_iter=0, random_state=0)
    for call, name in [(lambda: cg(A, b, max_iter=-1), "max_iter"),
                       (lambda: inv_quad_logdet(A, b, method="slq", max_iter=-1), "max_iter"),
                       (lambda: logdet(A, method="slq", cg_max_iter=-1), "cg_max_iter")]:
        with pytest.raises(ValueError, match=rf"{name} must be an int with 0 <= {name}"):
            call()


@pytest.mark.parametrize("kw, match", [
    (dict(max_iter=0), "max_iter must be an int with 1 <= max_iter"),
    (dict(max_iter=2.5), "max_iter must be an int"),
    (dict(tol=-1.0), "tol must be finite and > 0"),
    (dict(tol=float("nan")), "tol must be finite and > 0"),
    (dict(max_depth=0), "max_depth must be an int"),
    (dict(n_oversamples=-5), "n_oversamples must be an int with 0 <= n_oversamples"),
    (dict(k=0), "k must be an int with 1 <= k <= 40"),
    (dict(k=41), "k must be an int with 1 <= k <= 40"),
])
def test_block_krylov_eigsh_checks_its_settings(kw, match):
    # max_iter=0/-1/2.5, tol=-1/nan and max_depth=0 ran and returned eigenpairs; k=0 and
    # n_oversamples=-5 raised torch's "max(): Expected reduction dim"
    kw = dict(dict(k=2), **kw)
    with pytest.raises(ValueError, match=match):
        block_krylov_eigsh(_spd(), **kw)


@pytest.mark.parametrize("kw, exc, match", [
    (dict(tol=-1.0), ValueError, "tol must be finite and >= 0"),
    (dict(tol=float("nan")), ValueError, "tol must be finite and >= 0"),
    (dict(tol="a"), TypeError, "tol must be a real number"),
    (dict(lam="a"), TypeError, "lam must be a real number"),
    (dict(lam=True), TypeError, "lam must be a real number"),
])
def test_pivoted_cholesky_checks_tol_and_lam(kw, exc, match):
    # tol=-1 and nan were taken (pivoting on past the numerical rank), tol="a" raised
    # "can't multiply sequence by non-int", lam="a" float()'s message, lam=True read as 1
    from torchkern.linalg import PivotedCholesky
    kw = dict(dict(rank=3, lam=0.1), **kw)
    with pytest.raises(exc, match=match):
        PivotedCholesky(_spd(), **kw)
