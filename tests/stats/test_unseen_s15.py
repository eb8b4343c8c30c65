"""Unusual-but-valid inputs to torchkern.stats, against independent references (dense
NumPy/SciPy sums, brute force)."""
import numpy as np
import pytest
from scipy.spatial.distance import cdist

import torchkern as tk
from torchkern.stats import witness


def _rbf(A, B, ls):
    return np.exp(-cdist(A, B, "sqeuclidean") / (2 * ls**2))


def test_normalized_witness_of_one_empirical_distribution_is_refused():
    """Y a permutation of X (or X itself): μ̂_P − μ̂_Q = 0, and f/‖f‖ was NaN (refused as
    'weights contains NaN', naming no argument) or rounding noise amplified by 1/√(1e-18)
    and returned silently. A small but real witness (a shift of 1e-3) is still
    normalized: the dense f/√(wᵀKw) from NumPy."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 2))
    for Y in (X, X[::-1].copy()):
        with pytest.raises(ValueError, match="witness of X and Y is zero"):
            witness(X, Y, tk.RBF(1.0), normalize=True)
    Y = X + 1e-3
    Z = rng.normal(size=(4, 2))
    P = np.r_[X, Y]
    w = np.r_[np.full(5, 1 / 5), np.full(5, -1 / 5)]
    expected = _rbf(Z, P, 1.0) @ w / np.sqrt(w @ _rbf(P, P, 1.0) @ w)
    f = witness(X, Y, tk.RBF(1.0), normalize=True)
    np.testing.assert_allclose(np.asarray(f(Z).detach()), expected, rtol=1e-7)
    assert float(f.norm()) == pytest.approx(1.0, rel=1e-7)


def test_dtype_mismatches_name_the_arguments():
    """Mixed float32/float64 inputs were refused in terms of the internal names ('X and
    Y' for a mean embedding's query Z, 'K and L' for hsic's X and Y)."""
    import torch
    from torchkern.stats import hsic, mean_embedding
    X = torch.randn(6, 2, dtype=torch.float64)
    k = tk.RBF(1.0)
    mu = mean_embedding(X, k)
    with pytest.raises(TypeError, match="Z has dtype torch.float32"):
        mu(X.float())
    with pytest.raises(TypeError, match="embeddings' points have dtypes"):
        mu.inner(mean_embedding(X.float(), k))
    with pytest.raises(TypeError, match="X and Y must have the same dtype"):
        hsic(X.float(), X, k, tk.RBF(1.0))


def test_default_kernel_of_a_constant_sample_names_it():
    """A constant Y has no median-heuristic bandwidth: the error named no sample. With a
    kernel given the test runs: HSIC of a constant sample is 0 for every pairing, so
    p = 1 (brute force: every statistic ties)."""
    from torchkern.stats import HSICTest, MMDTest
    rng = np.random.default_rng(0)
    X, Yc = rng.normal(size=(10, 2)), np.ones((10, 1))
    with pytest.raises(ValueError, match="^Y: .*pass kernel_y="):
        HSICTest(n_permutations=5, random_state=0).test(X, Yc)
    with pytest.raises(ValueError, match=r"^X and Y \(pooled\): .*pass kernel="):
        MMDTest(n_permutations=5, random_state=0).test(np.ones((3, 2)), np.ones((4, 2)))
    res = HSICTest(tk.RBF(1.0), tk.RBF(1.0), n_permutations=20, random_state=0).test(X, Yc)
    assert float(res.statistic) == pytest.approx(0.0, abs=1e-15)
    assert res.p_value == 1.0
