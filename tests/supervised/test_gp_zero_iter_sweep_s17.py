"""GaussianProcessRegressor.fit(optimize=True, n_iter=0) with L-BFGS keeps the
hyperparameters: SciPy's L-BFGS-B took a step even at maxiter=0 (RBF(1.0) went to a
lengthscale of 1e-5, the noise to 1e5, with a "degenerate optimum" warning). Reference:
scikit-learn's GaussianProcessRegressor without an optimizer at the same
hyperparameters."""
import warnings

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import RBF as SkRBF

import torchkern as tk


@pytest.mark.parametrize("optimizer", ["lbfgs", "adam"])
def test_zero_iterations_leave_the_hyperparameters(optimizer):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 3)), rng.normal(size=30)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gp = tk.GaussianProcessRegressor(tk.RBF(1.0), noise=1e-2, optimizer=optimizer).fit(
            X, y, optimize=True, n_iter=0)
    assert float(gp.kernel_.lengthscale.detach()) == pytest.approx(1.0, rel=1e-12)
    assert gp.noise_ == pytest.approx(1e-2, rel=1e-12)
    assert gp.n_iter_ == 0
    sk = SkGPR(SkRBF(1.0), alpha=1e-2, optimizer=None).fit(X, y)
    np.testing.assert_allclose(float(gp.log_marginal_likelihood()),
                               sk.log_marginal_likelihood_value_, rtol=1e-10)
    np.testing.assert_allclose(gp.predict(X[:5]), sk.predict(X[:5]), rtol=1e-8, atol=1e-12)
