"""GaussianProcessRegressor(method="cg") reports the Monte-Carlo standard error of its
stochastic log marginal likelihood. References: the exact (Cholesky) log p(y) and the
spread of the estimates over seeds."""
import math

import numpy as np
import torch

import torchkern as tk


def test_cg_log_marginal_likelihood_std_error_matches_the_spread_over_seeds():
    # Laplacian kernel in 5-D: its spectrum decays slowly, so the rank-500 pivoted
    # Cholesky preconditioner leaves a whitened part for the probes to estimate
    rng = np.random.default_rng(0)
    n = 700
    X = torch.tensor(rng.normal(size=(n, 5)))
    y = torch.tensor(np.sin(X[:, 0].numpy()) + 0.1 * rng.normal(size=n))
    exact = tk.GaussianProcessRegressor(tk.Laplacian(1.0), noise=1e-2,
                                        method="cholesky").fit(X, y)
    assert exact.log_marginal_likelihood_std_error() == 0.0
    values, errors = [], []
    for seed in range(30):
        gp = tk.GaussianProcessRegressor(tk.Laplacian(1.0), noise=1e-2, method="cg",
                                         random_state=seed).fit(X, y)
        values.append(float(gp.log_marginal_likelihood()))
        errors.append(gp.log_marginal_likelihood_std_error())
    values = np.array(values)
    reported = math.sqrt(np.mean(np.square(errors)))
    assert reported > 0
    assert 1 / 1.5 < reported / values.std(ddof=1) < 1.5
    ref = float(exact.log_marginal_likelihood())
    assert abs(values.mean() - ref) < 4 * reported / math.sqrt(30) + 1e-3 * abs(ref)


def test_std_error_takes_the_numpy_input_it_was_fitted_on():
    # fitted on NumPy (scikit-learn's usual input) it raised AttributeError ('str' object
    # has no attribute 'type': the stored ndarray's device); the value is the tensor fit's
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(300, 2)), rng.normal(size=300)
    fit = lambda A, b: tk.GaussianProcessRegressor(  # noqa: E731
        tk.Laplacian(1.0), noise=1e-2, method="cg", random_state=0).fit(A, b)
    got = fit(X, y).log_marginal_likelihood_std_error()
    assert got > 0
    assert got == fit(torch.tensor(X), torch.tensor(y)).log_marginal_likelihood_std_error()
