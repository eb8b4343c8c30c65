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
