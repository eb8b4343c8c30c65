"""SLQ log-determinants of matrices with condition numbers up to 1e12 are right or say so.

A diagonal A isolates the Lanczos error (every Rademacher probe has zᵀ log(A) z = tr log A
exactly). References: the sum of the logs of the diagonal, and ``torch.linalg.slogdet``.
"""
import re
import warnings

import pytest
import torch

from torchkern.linalg import ConvergenceWarning, logdet

f64 = torch.float64


def _geometric(n):
    return torch.logspace(-12, 0, n, dtype=f64)  # condition number 1e12, spread evenly


def _number(pattern, record):
    text = " ".join(str(w.message) for w in record if issubclass(w.category, ConvergenceWarning))
    match = re.search(pattern, text)
    assert match, text
    return float(match.group(1))


def test_float32_below_its_rounding_floor_warns_with_a_bound_that_covers(matmul_only):
    # float32 Lanczos cannot see eigenvalues below ~1e-7·‖A‖: the old code stopped at 90
    # steps, "converged", 10 % off (280 on 2763) without a word
    d = _geometric(200)
    exact = float(d.log().sum())
    A = matmul_only(torch.diag(d).float())
    with pytest.warns(ConvergenceWarning, match="more than float32 resolves") as rec:
        est = float(logdet(A, method="slq", num_probes=2, lanczos_steps=300, random_state=0))
    error = abs(est - exact)
    assert error > 0.05 * abs(exact)
    assert _number(r"off by up to about ([0-9.eE+-]+)", rec) >= error


def test_float64_same_spectrum_converges_within_tolerance_without_warning(matmul_only):
    d = _geometric(200)
    exact = float(d.log().sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = float(logdet(matmul_only(torch.diag(d)), method="slq", num_probes=2,
                           lanczos_steps=300, random_state=0))
    assert abs(est - exact) <= 1e-3 * float(d.log().abs().sum())


def test_float32_kernel_matrix_warns_only_past_its_resolution():
    # RBF Gram of smooth 1-D data in float32: noise 1e-5 gives κ ≈ 9e6 (the estimate moves
    # by ~0.4 %), noise 1e-2 κ ≈ 1e3 (well resolved)
    x = torch.linspace(0, 1, 200, dtype=f64)[:, None]
    K = torch.exp(-(x - x.T) ** 2 / (2 * 0.2**2))
    eye = torch.eye(200, dtype=f64)
    with pytest.warns(ConvergenceWarning, match=r"more than float32 resolves"):
        logdet((K + 1e-5 * eye).float(), method="slq", random_state=0)
    A = (K + 1e-2 * eye).float()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        logdet(A, method="slq", random_state=0)


def test_step_cap_warning_bounds_the_bias_when_the_ritz_values_lag(matmul_only):
    # 100 steps on the 1e-12…1 spectrum: the smallest Ritz value (2e-9) is still far above
    # λ_min, so the half-Ritz-value Radau estimate (36) was 5x below the bias (190), the only
    # number the old warning gave; the rounding-floor node bounds it
    d = _geometric(200)
    exact = float(d.log().sum())
    with pytest.warns(ConvergenceWarning, match="lanczos_steps=100") as rec:
        est = float(logdet(matmul_only(torch.diag(d)), method="slq", num_probes=2,
                           lanczos_steps=100, random_state=0))
    bias = est - exact
    assert _number(r"estimated error is ([0-9.eE+-]+)", rec) < bias
    assert _number(r"at most ([0-9.eE+-]+)", rec) >= bias


def test_step_cap_warns_when_a_gradient_is_taken_too():
    # the old code judged the quadrature by the gradient's CG info when A required grad:
    # a spectrum 1e-4…1 cut at 10 steps (bias 10 % of tr|log A|) passed without a word
    d = torch.logspace(-4, 0, 200, dtype=f64).requires_grad_()
    exact = float(d.detach().log().sum())
    with pytest.warns(ConvergenceWarning, match="lanczos_steps=10") as rec:
        est = logdet(torch.diag(d), method="slq", num_probes=2, lanczos_steps=10,
                     random_state=0)
    bias = est.item() - exact
    assert bias > 0.05 * abs(exact)
    assert _number(r"at most ([0-9.eE+-]+)", rec) >= bias
    (g,) = torch.autograd.grad(est, d)  # the gradient is still there: Hutchinson of A⁻¹
    assert g.shape == d.shape


def test_rbf_gram_at_condition_1e12_exact_and_gradient_match_slogdet():
    # the exact path: within rounding of slogdet (both 1e-8 relative of an 80-bit reference
    # at n = 500); SLQ at the same matrix is off by the probes' noise only (tested above on
    # diagonals); its gradient is a Hutchinson estimate, the exact path's is autograd's
    x = torch.linspace(0, 1, 300, dtype=f64)[:, None]
    ell = torch.tensor(0.2, dtype=f64, requires_grad=True)
    A = torch.exp(-(x - x.T) ** 2 / (2 * ell**2)) + 1e-10 * torch.eye(300, dtype=f64)
    lam = torch.linalg.eigvalsh(A.detach())
    assert float(lam.max() / lam.min()) > 1e12
    ref = torch.linalg.slogdet(A)[1]
    (g_ref,) = torch.autograd.grad(ref, ell, retain_graph=True)
    val = logdet(A, method="exact")
    (g,) = torch.autograd.grad(val, ell)
    torch.testing.assert_close(val, ref, rtol=1e-7, atol=0)
    torch.testing.assert_close(g, g_ref, rtol=1e-6, atol=0)
