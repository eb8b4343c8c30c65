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
