"""Sweep s18 of the approximations."""
import numpy as np
import pytest
import torch
from sklearn.kernel_approximation import RBFSampler

from torchkern.approx import ApproximateKernel


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_approximate_kernel_of_a_scikit_learn_transformer(dtype):
    # a fitted transformer returns an ndarray: the kernel raised AttributeError ('dim')
    rng = np.random.RandomState(0)
    A, B = rng.randn(20, 3), rng.randn(7, 3)
    sampler = RBFSampler(gamma=0.5, n_components=50, random_state=0).fit(A)
    k = ApproximateKernel(sampler)
    X, Y = torch.as_tensor(A, dtype=dtype), torch.as_tensor(B, dtype=dtype)
    ref = torch.as_tensor(sampler.transform(A) @ sampler.transform(B).T, dtype=dtype)
    K = k(X, Y).to_dense()
    assert K.dtype == dtype
    torch.testing.assert_close(K, ref)
    torch.testing.assert_close(k.diag(X), torch.as_tensor(
        (sampler.transform(A) ** 2).sum(1), dtype=dtype))


def _rff_error(rff, kernel, X):
    with torch.no_grad():
        return float((rff.kernel_matrix(X).to_dense() - kernel(X).to_dense()).abs().max())


def test_random_features_follow_a_kernel_replaced_after_construction():
    import torchkern
    from torchkern.approx import RandomFourierFeatures
    X = torch.linspace(-2, 2, 60, dtype=torch.float64).reshape(30, 2)
    rff = RandomFourierFeatures(torchkern.RBF(1.0), 4000, random_state=0)
    rff(X)
    narrow = torchkern.RBF(0.2)
    rff.kernel = narrow        # the old RBF(1.0)'s spectrum stayed: max error 0.84
    assert _rff_error(rff, narrow, X) < 0.15


@pytest.mark.parametrize("attr, value, width", [
    ("n_features", 10, 10),        # ignored: 4000 features came out
    ("variant", "offset", 4000),   # 2000 features came out, the kernel at half its value
])
def test_random_features_follow_arguments_set_after_construction(attr, value, width):
    import torchkern
    from torchkern.approx import RandomFourierFeatures
    X = torch.linspace(-2, 2, 60, dtype=torch.float64).reshape(30, 2)
    k = torchkern.RBF(1.0)
    rff = RandomFourierFeatures(k, 4000, random_state=0)
    setattr(rff, attr, value)
    assert rff(X).shape == (30, width)
    if width == 4000:
        assert _rff_error(rff, k, X) < 0.15


def test_random_features_refuse_a_misspelled_variant_set_after_construction():
    import torchkern
    from torchkern.approx import RandomFourierFeatures
    rff = RandomFourierFeatures(torchkern.RBF(1.0), 40, random_state=0)
    rff.variant = "Offset"     # AttributeError: 'NoneType' object has no attribute 'to'
    with pytest.raises(ValueError, match="variant"):
        rff(torch.zeros(3, 2, dtype=torch.float64))


def _paired_rbf_features(X, G, lengthscale):
    """√(1/D)[cos(XWᵀ), sin(XWᵀ)], W = G/ℓ: the paired map of an RBF (Rahimi and Recht
    2007; Sutherland and Schneider 2015), written out."""
    Z = X @ (G / lengthscale).T
    return torch.cat([Z.cos(), Z.sin()], 1) / G.shape[0] ** 0.5


def test_random_features_keep_in_features_through_a_change():
    # n_features set after construction reset the d given: resample() raised "in_features
    # is unknown", and data of 5 features was then taken for a map built for 3
    import torchkern
    from torchkern.approx import RandomFourierFeatures
    X = torch.linspace(-2, 2, 30, dtype=torch.float64).reshape(10, 3)
    f = RandomFourierFeatures(torchkern.RBF(1.5), 100, in_features=3, random_state=0)
    f.n_features = 200
    f.resample()
    assert f.in_features == 3 and f.omega[0].shape == (100, 3)
    torch.testing.assert_close(f(X), _paired_rbf_features(X, f.omega[0], 1.5))
    with pytest.raises(ValueError, match="X has 5 features"):
        f(torch.zeros(4, 5, dtype=torch.float64))
    f.variant = "offset"           # d read from the data is kept too
    with pytest.raises(ValueError, match="X has 5 features"):
        f(torch.zeros(4, 5, dtype=torch.float64))


def test_random_features_frequencies_follow_a_replaced_kernel():
    # frequencies() and omega returned the replaced RBF(1.0)'s draws (mean w² 0.99, not 100)
    import torchkern
    from torchkern.approx import RandomFourierFeatures
    X = torch.randn(5, 2, dtype=torch.float64)
    f = RandomFourierFeatures(torchkern.RBF(1.0), 4000, random_state=0)
    f(X)
    f.kernel = torchkern.RBF(0.1)
    W, a = f.frequencies()
    W = W.detach()
    torch.testing.assert_close(W, f.omega[0] / 0.1)
    # the spectral measure of exp(-|x-y|²/(2ℓ²)) is N(0, ℓ⁻² I): E w² = 100
    assert abs(float((W ** 2).mean()) - 100.0) < 10.0


def test_random_features_draws_unchanged_by_setting_the_same_values():
    # the paired RBF map of seed 0 is cos/sin of torch's first N(0, I) draws of that seed,
    # and setting an argument to its current value draws nothing new
    import torchkern
    from torchkern.approx import RandomFourierFeatures
    X = torch.linspace(-2, 2, 30, dtype=torch.float64).reshape(10, 3)
    k = torchkern.RBF(1.5)
    f = RandomFourierFeatures(k, 200, random_state=0)
    G = torch.randn(100, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ref = _paired_rbf_features(X, G, 1.5)
    torch.testing.assert_close(f(X), ref)
    f.kernel, f.n_features, f.variant, f.orthogonal = k, 200, "paired", False
    torch.testing.assert_close(f(X), ref)
    torch.testing.assert_close(f.omega[0], G)
