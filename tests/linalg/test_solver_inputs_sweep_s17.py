"""Bad inputs to the solvers get an error that names the argument; legitimate ones work.

Before: an asymmetric dense A went through cg (a solution of another system), eigsh and
logdet (the log-determinant of its lower triangle) without a word; a preconditioner of
the wrong size failed deep in a product (RuntimeError); inv_quad_logdet(tol=nan)
returned bᵀA⁻¹b = 0; cg(tol=inf) returned x = 0 as converged; PivotedCholesky(-K)
became λI."""
import pytest
import torch

from torchkern.linalg import (PivotedCholesky, cg, eigsh, inv_quad_logdet, logdet)

f64 = torch.float64


def _spd(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g, dtype=f64)
    return torch.exp(-torch.cdist(X, X) ** 2 / 2) + 0.1 * torch.eye(n, dtype=f64)


CALLS = {
    "cg": lambda A: cg(A, torch.ones(A.shape[0], dtype=A.dtype)),
    "eigsh": lambda A: eigsh(A, 3),
    "logdet exact": lambda A: logdet(A, method="exact"),
    "logdet slq": lambda A: logdet(A, method="slq", random_state=0),
    "inv_quad_logdet": lambda A: inv_quad_logdet(A, torch.ones(A.shape[0], dtype=A.dtype)),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_asymmetric_dense_matrix_is_refused_and_rounding_asymmetry_is_not(call):
    A = _spd()
    bad = A + 0.5 * torch.triu(torch.ones_like(A), 1)  # its lower triangle is A's
    with pytest.raises(ValueError, match=r"A must be symmetric: max \|A - A.T\|"):
        call(bad)
    # a Gram computed in float32 is symmetric only to rounding: accepted, as before
    noisy = (A + 1e-7 * torch.randn(A.shape, generator=torch.Generator().manual_seed(1),
                                    dtype=f64)).float()
    assert float((noisy - noisy.T).abs().max()) > 0
    call(noisy)


def test_float32_centred_gram_is_taken_with_a_warning():
    # H K H of a wide RBF in float32: symmetric only to ~1e-3 of its own entries (the
    # rounding of the uncentred ones, 1e3 times larger), which a sqrt(eps) rule refused
    g = torch.Generator().manual_seed(2)
    X = torch.randn(600, 3, generator=g, dtype=f64)
    K = torch.exp(-torch.cdist(X, X) ** 2 / (2 * 100.0 ** 2)).float()
    H = torch.eye(600) - 1.0 / 600
    Kc = H @ K @ H
    rel = float((Kc - Kc.T).abs().max() / Kc.abs().max())
    assert 3.5e-4 < rel < 1e-2  # past sqrt(eps) = 3.4e-4, not a different matrix
    with pytest.warns(UserWarning, match=r"A is symmetric only to .* of its largest entry"):
        vals, _ = eigsh(Kc, 2)
    ref = torch.linalg.eigvalsh(((Kc + Kc.T) / 2).double())[-2:]
    assert torch.allclose(vals.double().sort().values, ref, rtol=10 * rel)


def test_logdet_of_an_asymmetric_matrix_was_its_lower_triangles():
    # the reference: slogdet of the symmetric matrix its lower triangle defines, which the
    # old code returned for the asymmetric one
    A = _spd()
    bad = A + 0.5 * torch.triu(torch.ones_like(A), 1)
    assert abs(float(torch.linalg.slogdet(bad)[1]) - float(torch.linalg.slogdet(A)[1])) > 1
    with pytest.raises(ValueError, match="symmetric"):
        logdet(bad)


def test_preconditioner_of_the_wrong_size_is_named():
    A, b = _spd(40), torch.ones(40, dtype=f64)
    other = PivotedCholesky(_spd(25, seed=3), 5, 0.1)
    with pytest.raises(ValueError, match=r"preconditioner has shape \(25, 25\), but A needs "
                                         r"\(40, 40\)"):
        cg(A, b, preconditioner=other)
    with pytest.raises(ValueError, match=r"preconditioner has shape \(25, 25\)"):
        logdet(A, method="slq", preconditioner=other)
    with pytest.raises(ValueError, match=r"preconditioner has shape \(25, 25\)"):
        inv_quad_logdet(A, b, method="slq", preconditioner=other)
    with pytest.raises(ValueError, match=r"preconditioner returned \(5, 1\) for residuals "
                                         r"of shape \(40, 1\)"):
        cg(A, b, preconditioner=lambda R: R[:5])
    with pytest.raises(ValueError, match="preconditioner returned NaN"):
        cg(A, b, preconditioner=lambda R: R * float("nan"))
    # the right size and a plain callable keep working: the Jacobi preconditioner
    d = A.diagonal()
    ref = torch.linalg.solve(A, b)
    for M in (lambda R: R / d[:, None],
              PivotedCholesky(A - 0.1 * torch.eye(40, dtype=f64), 10, 0.1)):
        x = cg(A, b, preconditioner=M, tol=1e-12)
        torch.testing.assert_close(x, ref, rtol=1e-8, atol=0)


@pytest.mark.parametrize("call, match", [
    (lambda A, b: cg(A, b, tol=float("inf")), "tol must be finite and > 0"),
    (lambda A, b: eigsh(A, 3, tol=float("inf")), "tol must be finite and > 0"),
    (lambda A, b: eigsh(A, 3, max_iter=2.5), "max_iter must be an int"),
    (lambda A, b: inv_quad_logdet(A, b, method="slq", tol=float("nan")),
     "tol must be finite and > 0"),
    (lambda A, b: inv_quad_logdet(A, b, method="slq", max_iter=-1), "max_iter must be an int"),
    (lambda A, b: logdet(A.requires_grad_(), method="slq", cg_tol=0.0),
     "cg_tol must be finite and > 0"),
    (lambda A, b: logdet(A.requires_grad_(), method="slq", cg_max_iter=-1),
     "cg_max_iter must be an int"),
], ids=["cg tol inf", "eigsh tol inf", "eigsh max_iter 2.5", "inv_quad tol nan",
        "inv_quad max_iter -1", "logdet cg_tol 0", "logdet cg_max_iter -1"])
def test_solver_settings_are_checked(call, match):
    A, b = _spd(), torch.ones(40, dtype=f64)
    with pytest.raises(ValueError, match=match):
        call(A, b)


def test_inv_quad_logdet_with_a_nan_tol_returned_zero():
    # reference: bᵀA⁻¹b by a dense solve; the old code stopped CG at once (nan comparisons
    # are false) and returned 0 without a warning
    A, b = _spd(), torch.ones(40, dtype=f64)
    q, _ = inv_quad_logdet(A, b, method="slq", tol=1e-10, random_state=0)
    torch.testing.assert_close(q, b @ torch.linalg.solve(A, b), rtol=1e-8, atol=0)
    with pytest.raises(ValueError, match="tol"):
        inv_quad_logdet(A, b, method="slq", tol=float("nan"), random_state=0)


def test_pivoted_cholesky_of_an_indefinite_matrix_is_refused():
    K = _spd() - 0.1 * torch.eye(40, dtype=f64)
    with pytest.raises(ValueError, match="K must be positive semi-definite"):
        PivotedCholesky(-K, 5, 0.1)
    assert PivotedCholesky(torch.zeros(40, 40, dtype=f64), 5, 0.1).rank == 0  # legitimate
    assert PivotedCholesky(K, 5, 0.1).rank == 5


@pytest.mark.parametrize("call", [lambda A: cg(A, torch.ones(3, dtype=f64)),
                                  lambda A: eigsh(A, 1), lambda A: logdet(A)],
                         ids=["cg", "eigsh", "logdet"])
def test_numpy_matrix_is_named_as_such(call):
    # a NumPy float64 array was refused as "A must have dtype float32 or float64, got
    # float64"
    import numpy as np
    with pytest.raises(TypeError, match=r"A must be a torch.Tensor or an operator, got a "
                                        r"NumPy array: pass torch.from_numpy\(A\)"):
        call(np.eye(3))
