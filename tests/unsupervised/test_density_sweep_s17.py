"""KernelDensity takes scikit-learn's bandwidth rules "scott" and "silverman" (it refused
them: TypeError "bandwidth must be a real number"). Reference: scikit-learn's
KernelDensity with the same rule."""
import numpy as np
import pytest
import torch
from sklearn.neighbors import KernelDensity as SkKernelDensity

from torchkern import KernelDensity


@pytest.mark.parametrize("rule", ["scott", "silverman"])
@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
def test_bandwidth_rules_match_scikit_learn(rule, kernel):
    rng = np.random.default_rng(0)
    X, Q = rng.normal(size=(60, 3)), rng.normal(size=(7, 3))
    sk = SkKernelDensity(kernel=kernel, bandwidth=rule).fit(X)
    kde = KernelDensity(kernel, bandwidth=rule).fit(X)
    assert kde.bandwidth_ == pytest.approx(sk.bandwidth_, rel=1e-15)
    np.testing.assert_allclose(kde.score_samples(Q), sk.score_samples(Q), rtol=1e-10)
    # the same from tensors, and a float bandwidth is reported as given
    kde_t = KernelDensity(kernel, bandwidth=rule).fit(torch.tensor(X))
    np.testing.assert_allclose(kde_t.score_samples(torch.tensor(Q)).numpy(),
                               sk.score_samples(Q), rtol=1e-10)
    assert KernelDensity(kernel, bandwidth=0.3).fit(X).bandwidth_ == 0.3


def test_other_bandwidth_strings_are_refused_by_name():
    with pytest.raises(ValueError, match="bandwidth must be a positive float, 'scott' or "
                                         "'silverman', got 'normal'"):
        KernelDensity(bandwidth="normal").fit(np.zeros((5, 2)))
