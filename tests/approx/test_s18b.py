"""Sweep s18b of the approximations: random Fourier features refuse a dimension that
contradicts the kernel's ARD lengthscales."""
import pytest
import torch

import torchkern as tk
from torchkern.approx import RandomFourierFeatures


@pytest.mark.parametrize("make", [
    lambda: tk.RBF(lengthscale=torch.ones(3)),
    lambda: tk.RBF(lengthscale=torch.ones(3)) + tk.Laplacian(),
    lambda: 2.0 * tk.Matern(nu=1.5, lengthscale=torch.tensor([1.0, 2.0, 0.5])),
])
@pytest.mark.parametrize("d", [5, 2])
def test_rff_resample_refuses_a_dimension_against_the_ard_lengthscales(make, d):
    # resample(5) was kept; the next call failed in a broadcast naming nothing
    kernel = make()
    rff = RandomFourierFeatures(kernel, 400, random_state=0)
    with pytest.raises(ValueError, match="in_features=.*3 ARD lengthscales"):
        rff.resample(d)
    # the map is left as it was: drawn for 3 features, paired features exact on the diagonal
    X = torch.randn(6, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    Phi = rff(X)
    torch.testing.assert_close((Phi ** 2).sum(1), kernel.diag(X))


@pytest.mark.parametrize("bad", [0, -2, 2.5])
def test_rff_resample_refuses_a_dimension_that_is_not_a_positive_int(bad):
    # 0 was accepted (empty frequencies), -2 and 2.5 failed inside torch naming nothing
    rff = RandomFourierFeatures(tk.RBF(), 10, random_state=0)
    with pytest.raises(ValueError, match="in_features"):
        rff.resample(bad)
