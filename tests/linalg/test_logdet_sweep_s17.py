"""The SLQ log-determinant reports its probes' noise (value and gradient) and warns where
it is large. References: torch.linalg.slogdet and its autograd gradient, and the spread of
the estimates over many seeds."""
import math
import warnings

import pytest
import torch

from torchkern.linalg import ConvergenceWarning, inv_quad_logdet, logdet

f64 = torch.float64


def _line_gram(n, ell, noise):
    x = torch.linspace(0, 1, n, dtype=f64)[:, None]
    return torch.exp(-(x - x.T) ** 2 / (2 * ell**2)) + noise * torch.eye(n, dtype=f64)


def test_reported_std_error_matches_the_spread_over_200_seeds():
    A = _line_gram(60, 0.1, 1e-2)
    exact = float(torch.linalg.slogdet(A)[1])
    est, se = [], []
    for seed in range(200):
        v, info = logdet(A, method="slq", num_probes=16, random_state=seed, return_info=True)
        est.append(float(v))
        se.append(info.std_error)
        assert info.num_probes == 16 and info.steps > 0
    est = torch.tensor(est, dtype=f64)
    spread = float(est.std())
    reported = math.sqrt(sum(s * s for s in se) / len(se))
    assert spread > 0
    assert 1 / 1.5 < reported / spread < 1.5
    # and the estimates scatter around the exact value by that error
    assert abs(float(est.mean()) - exact) < 4 * reported / math.sqrt(200) + 1e-3 * abs(exact)


def test_gradient_std_error_matches_the_spread_and_warns_at_condition_1e12():
    # RBF Gram on a line + 1e-10 I (condition > 1e12): the Hutchinson lengthscale
    # gradient at p = 30 was ~50 % off the exact one with no word
    def est(seed):
        ell = torch.tensor(0.2, dtype=f64, requires_grad=True)
        v, info = logdet(_line_gram(120, ell, 1e-10), method="slq", num_probes=30,
                         random_state=seed, return_info=True)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always", ConvergenceWarning)
            (se,) = info.grad_std_error(ell)
        (g,) = torch.autograd.grad(v, ell)
        return float(g), float(se), rec

    ell = torch.tensor(0.2, dtype=f64, requires_grad=True)
    (g_exact,) = torch.autograd.grad(torch.linalg.slogdet(_line_gram(120, ell, 1e-10))[1], ell)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the gradient's CG solves
        runs = [est(seed) for seed in range(40)]
    grads = torch.tensor([g for g, _, _ in runs], dtype=f64)
    reported = math.sqrt(sum(s * s for _, s, _ in runs) / len(runs))
    assert 1 / 1.5 < reported / float(grads.std()) < 1.5
    assert abs(float(grads.mean()) - float(g_exact)) < 4 * reported / math.sqrt(40)
    # it warns exactly when the standard error exceeds a quarter of the estimate, which at
    # this conditioning is most of the time
    said = [any("standard error" in str(w.message) for w in rec) for _, _, rec in runs]
    assert said == [se > 0.25 * abs(g) for g, se, _ in runs]
    assert sum(said) > len(runs) / 2


def test_gradient_std_error_is_quiet_and_exact_reports_zero_on_a_well_conditioned_gram():
    ell = torch.tensor(0.3, dtype=f64, requires_grad=True)
    A = _line_gram(80, ell, 1e-1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        v, info = logdet(A, method="slq", num_probes=30, random_state=0, return_info=True)
        (se,) = info.grad_std_error(ell)
    assert 0 < float(se)
    v, info = logdet(A, method="exact", return_info=True)
    assert info.std_error == 0.0
    assert float(info.grad_std_error(ell)[0]) == 0.0
    torch.testing.assert_close(v, torch.linalg.slogdet(A)[1])


def test_value_noise_warns_when_large_relative_to_tr_abs_log():
    # log A = c(11ᵀ − I): tr|log A| = 2c(n − 1), and Rademacher probes see the whole
    # off-diagonal: standard error c·√(2n(n − 1)/p), 22 % of tr|log A| at p = 10
    n, c = 50, 0.05
    S = c * (torch.ones(n, n, dtype=f64) - torch.eye(n, dtype=f64))
    A = torch.linalg.matrix_exp(S)
    with pytest.warns(ConvergenceWarning, match="standard error of the estimate") as rec:
        v, info = logdet(A, method="slq", num_probes=10, random_state=0, return_info=True)
    assert info.std_error > 0.05 * 2 * c * (n - 1)
    assert any("num_probes=10" in str(w.message) for w in rec)
    # inv_quad_logdet reports (and warns) the same way
    with pytest.warns(ConvergenceWarning, match="standard error of the estimate"):
        _, _, info2 = inv_quad_logdet(A, torch.ones(n, dtype=f64), method="slq",
                                      num_probes=10, random_state=0, return_info=True)
    assert info2.std_error > 0.05 * 2 * c * (n - 1)


def test_one_probe_reports_an_unknown_standard_error_without_a_warning():
    # one probe has no spread: std_error is inf (not a number made up), and the noise
    # warning, which needs a spread, stays quiet; the value is the probe's quadrature
    A = _line_gram(50, 0.3, 1e-1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        v, info = logdet(A, method="slq", num_probes=1, random_state=0, return_info=True)
    assert info.std_error == math.inf and info.num_probes == 1
    exact = float(torch.linalg.slogdet(A)[1])
    assert abs(float(v) - exact) < 0.2 * abs(exact)
