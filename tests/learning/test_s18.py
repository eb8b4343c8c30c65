"""MultipleKernel's fixed weights; fit_kernel's convergence report."""
import math

import pytest
import torch

import torchkern as tk
from torchkern.learning import MultipleKernel


def _X():
    return torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("init", [[0, 0], [0.0, -0.0], torch.zeros(2)])
def test_multiple_kernel_refuses_all_zero_fixed_weights(init):
    # was accepted: the kernel was 0 everywhere (a singular Gram, every prediction 0)
    with pytest.raises(ValueError, match="init: the fixed weights are all 0"):
        MultipleKernel([tk.RBF(), tk.Linear()], weights="fixed", init=init)
    k = MultipleKernel([tk.RBF(), tk.Linear()], weights="fixed", init=[1.0, 1.0])
    with pytest.raises(ValueError, match="eta: the fixed weights are all 0"):
        k.set_weights([0.0, 0.0])


@pytest.mark.parametrize("mode, init", [("fixed", [1.0, -1.0]), ("fixed", [math.nan, 1.0]),
                                        ("fixed", [math.inf, 1.0]), ("simplex", [0.0, 1.0]),
                                        ("nonneg", [1.0, -2.0])])
def test_multiple_kernel_refuses_negative_or_nan_weights_by_name(mode, init):
    with pytest.raises(ValueError, match=r"init: weights must be finite and >=? 0"):
        MultipleKernel([tk.RBF(), tk.Linear()], weights=mode, init=init)


def test_multiple_kernel_fixed_weights_with_a_zero():
    X = _X()
    k = MultipleKernel([tk.RBF(), tk.Linear()], weights="fixed", init=[0.0, 2.0])
    want = 2.0 * X @ X.T
    torch.testing.assert_close(k(X, backend="dense").to_dense(), want)
