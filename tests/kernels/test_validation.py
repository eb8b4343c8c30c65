"""Bad input gets a clear error that names the argument."""
import numpy as np
import pytest
import torch

import torchkern as tk


def test_nan_and_inf():
    X = torch.randn(5, 2)
    X[1, 1] = float("nan")
    with pytest.raises(ValueError, match="X contains NaN"):
        tk.RBF()(X)
    Y = torch.randn(5, 2)
    Y[0, 0] = float("inf")
    with pytest.raises(ValueError, match="Y contains NaN or infinity"):
        tk.RBF()(torch.randn(4, 2), Y)


def test_dimension_mismatch_and_empty():
    with pytest.raises(ValueError, match="X has 2 features but Y has 3"):
        tk.RBF()(torch.randn(4, 2), torch.randn(4, 3))
    with pytest.raises(ValueError, match="X must have at least 1 sample"):
        tk.RBF()(torch.randn(0, 2))
    with pytest.raises(ValueError, match="2-D"):
        tk.RBF()(torch.randn(2, 3, 4))
    with pytest.raises(TypeError, match="X must be a torch.Tensor or a NumPy array"):
        tk.RBF()("abc")


def test_ard_length():
    with pytest.raises(ValueError, match="X has 2 features but RBF has ard_dims=3"):
        tk.RBF(ard_dims=3)(torch.randn(4, 2))
    with pytest.raises(ValueError, match="lengthscale has 2 entries but ard_dims=3"):
        tk.Matern(1.5, [1.0, 2.0], ard_dims=3)


@pytest.mark.parametrize("make,arg", [
    (lambda: tk.RBF(-1.0), "lengthscale"),
    (lambda: tk.RBF([1.0, 0.0]), "lengthscale"),
    (lambda: tk.RationalQuadratic(1.0, alpha=0.0), "alpha"),
    (lambda: tk.Periodic(1.0, period=-2.0), "period"),
    (lambda: tk.Polynomial(2, offset=-1.0), "offset"),
    (lambda: tk.Chi2(gamma=float("nan")), "gamma"),
    (lambda: tk.InverseMultiquadric(c=-0.1), "c"),
    (lambda: 0.0 * tk.RBF(), "outputscale"),
])
def test_non_positive_hyperparameters(make, arg):
    with pytest.raises(ValueError, match=arg):
        make()


def test_setting_a_non_positive_value():
    k = tk.RBF()
    with pytest.raises(ValueError, match="lengthscale"):
        k.lengthscale = 0.0


def test_discrete_options():
    with pytest.raises(ValueError, match="nu"):
        tk.Matern(nu=2.0)
    with pytest.raises(ValueError, match="order"):
        tk.ArcCosine(3)
    with pytest.raises(ValueError, match="degree"):
        tk.Polynomial(0)


def test_domain_of_histogram_kernels():
    with pytest.raises(ValueError, match="X must be non-negative for Chi2"):
        tk.Chi2()(-torch.rand(3, 2))


def test_dtype_device_mismatch():
    with pytest.raises(TypeError, match="same dtype"):
        tk.RBF()(torch.randn(3, 2), torch.randn(3, 2, dtype=torch.float64))


def test_numpy_input_gives_tensor():
    K = tk.RBF()(np.random.rand(4, 2))
    assert K.dtype == torch.float64
    assert isinstance(K.to_dense(), torch.Tensor)
