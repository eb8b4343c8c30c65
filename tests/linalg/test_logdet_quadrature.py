"""The Lanczos quadrature error of SLQ log-determinants is bounded, stopped on, or warned.

Two errors make up an SLQ estimate: the probes' (zero mean, ∝ 1/√p) and the m-step Gauss
quadrature's (a bias). A diagonal A isolates the second: every Rademacher probe then has
zᵀ log(A) z = tr log A exactly and the same Lanczos measure, so any error is quadrature.
"""
import re
import warnings

import pytest
import torch

from torchkern._threads import one_thread
from torchkern.linalg import ConvergenceWarning, inv_quad_logdet, logdet

f64 = torch.float64


def _rbf_noise(n, ell, noise, seed=0):
    X = torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=f64)
    sq = (X[:, None, :] - X[None, :, :]).pow(2).sum(-1)
    return torch.exp(-sq / (2 * ell**2)) + noise * torch.eye(n, dtype=f64)


@pytest.fixture(scope="module")
def kernel_spectrum():
    # the eigenvalues of an RBF Gram matrix + 1e-2 I (condition number ~3e3): 15 Gauss
    # points leave e1ᵀ log(T) e1 several % above tr log A / n
    with one_thread():  # the reference eigenvalues: faster alone on a busy machine
        return torch.linalg.eigvalsh(_rbf_noise(600, 0.5, 1e-2))


def _bound_in(record):
    (w,) = [w for w in record if issubclass(w.category, ConvergenceWarning)]
    return float(re.search(r"estimated error is ([0-9.eE+-]+)", str(w.message)).group(1))


def test_too_few_steps_warn_with_a_bound_of_the_bias(kernel_spectrum, matmul_only):
    d = kernel_spectrum
    exact = float(d.log().sum())
    A = matmul_only(torch.diag(d))
    with pytest.warns(ConvergenceWarning, match=r"lanczos_steps=15 .* raise lanczos_steps") as rec:
        est = float(logdet(A, method="slq", num_probes=2, lanczos_steps=15, random_state=0))
    bias = est - exact
    # Gauss overestimates ∫ log; the old code returned this 15-step value without a word
    # (7.3 % off; the warning's bound: 108 against a bias of 96.5)
    assert bias > 0.005 * abs(exact)
    bound = _bound_in(rec)
    assert bias <= bound <= 3 * bias


def test_enough_steps_stop_early_within_tolerance(kernel_spectrum, matmul_only):
    d = kernel_spectrum
    exact = float(d.log().sum())
    A = matmul_only(torch.diag(d))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = float(logdet(A, method="slq", num_probes=2, lanczos_steps=300, random_state=0))
    # converged: the bias is at most lanczos_tol (1e-3) of tr|log A|, and the process
    # stopped well before the cap (one product per step, plus A @ Z for the start)
    assert abs(est - exact) <= 1e-3 * float(d.log().abs().sum())
    assert A.products < 150
    tight = float(logdet(A, method="slq", num_probes=2, lanczos_steps=300, lanczos_tol=1e-6,
                         random_state=0))
    assert abs(tight - exact) <= 1e-6 * float(d.log().abs().sum())


def _hutchinson_se(A, p):
    # standard error of the Rademacher estimate of tr log A: √(2 Σ_{i≠j} (log A)_ij² / p)
    with one_thread():
        lam, U = torch.linalg.eigh(A)
    logA = (U * lam.log()) @ U.T
    off = logA.pow(2).sum() - logA.diagonal().pow(2).sum()
    return float((2 * off / p).sqrt()), float(lam.log().sum())


@pytest.mark.parametrize("ell, noise", [(1.0, 0.1), (0.5, 1e-2)])
def test_defaults_converge_on_kernel_matrices_without_warning(ell, noise, matmul_only):
    # defaults: at most 100 steps, stopped once the bias bound is ≤ 1e-3 of tr|log A|
    # (30 and 50 steps here)
    A = _rbf_noise(500, ell, noise, seed=1)
    se, exact = _hutchinson_se(A, 30)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = float(logdet(matmul_only(A), method="slq", random_state=0))
    # within 4 standard errors of the probes plus the quadrature tolerance
    assert abs(est - exact) <= 4 * se + 1e-3 * abs(exact)


def test_inv_quad_logdet_warns_too(matmul_only):
    A = _rbf_noise(300, 0.5, 1e-2, seed=2)
    b = torch.ones(300, dtype=f64)
    with pytest.warns(ConvergenceWarning, match=r"inv_quad_logdet \(slq\).*lanczos_steps=5 "):
        inv_quad_logdet(matmul_only(A), b, method="slq", num_probes=4, lanczos_steps=5,
                        tol=1e-4, random_state=0)


@pytest.mark.parametrize("bad", [0, -1e-3, float("nan"), "1e-3", True])
def test_lanczos_tol_is_checked(bad):
    # values out of range: ValueError; not real numbers (a string, a bool): TypeError
    with pytest.raises((ValueError, TypeError), match="lanczos_tol"):
        logdet(torch.eye(3, dtype=f64), method="slq", lanczos_tol=bad)


def test_ill_conditioned_kernel_matrix_warns_until_enough_steps(matmul_only):
    # RBF Gram + 1e-4 I (condition number ~1e7): the old fixed 50 steps were 5.8 % off
    # without a word (30 probes); 50 and the default cap of 100 now warn, 300 converge
    A = _rbf_noise(500, 1.0, 1e-4, seed=1)
    se, exact = _hutchinson_se(A, 10)
    kw = dict(method="slq", num_probes=10, random_state=0)
    for steps in (50, 100):
        with pytest.warns(ConvergenceWarning, match=f"lanczos_steps={steps} "):
            logdet(matmul_only(A), lanczos_steps=steps, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = float(logdet(matmul_only(A), lanczos_steps=300, **kw))
    assert abs(est - exact) <= 4 * se + 1e-3 * abs(exact)


def test_indefinite_matrix_is_refused_with_its_ritz_values():
    # eigenvalues -1 … 5: the smallest Ritz value approaches -1 (named in the error)
    d = torch.linspace(-1, 5, 60, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"not positive definite.*Ritz value \(-[0-9.e+-]+, largest"):
        logdet(torch.diag(d), method="slq", num_probes=4)
