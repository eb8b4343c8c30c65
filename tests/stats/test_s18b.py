"""Sweep s18b of the statistics: the rounding-asymmetry warning of HSIC on precomputed
Gram matrices points at the caller's line."""
import inspect
import warnings

import pytest
import torch

import torchkern as tk
from torchkern.stats import hsic_biased, hsic_unbiased


def _float32_rounded_gram(n=12, seed=0):
    """A float64 RBF Gram whose upper triangle went through float32, as a Gram assembled
    from float32 blocks and cast: symmetric only to float32's rounding."""
    X = torch.randn(n, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    K = tk.RBF()(X).to_dense()
    return K.tril() + K.float().double().triu(1)


@pytest.mark.parametrize("estimator", [hsic_biased, hsic_unbiased])
def test_hsic_rounding_asymmetry_warning_points_at_the_callers_line(estimator):
    # it pointed at the estimator's line inside torchkern/stats/hsic.py (stacklevel=3)
    K, L = _float32_rounded_gram(seed=0), _float32_rounded_gram(seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        estimator(K, L)
    symmetric = [w for w in caught if "symmetric only to" in str(w.message)]
    assert len(symmetric) == 2               # one for K, one for L
    for w in symmetric:
        assert w.filename == __file__
        assert w.lineno == line
