"""Vector kernels on unusual-but-valid data and hyperparameters, against scipy / dense
references."""
import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

import torchkern as tk

rng = np.random.default_rng(15)
X = rng.normal(size=(30, 3))
Y = rng.normal(size=(20, 3))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-6), (torch.float64, 1e-14)])
@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_rational_quadratic_with_large_alpha(dtype, tol, backend):
    # k = (1 + u)^-α = exp(-α log(1 + u)), u = d²/(2αℓ²): log(1 + u) lost u below ε, and
    # the kernel read 1 everywhere (float32: α = 1e5 off by 5e-3, α = 1e8 by 0.997; float64:
    # α = 1e12 by 1e-4, α = 1e16 by 0.67). α → ∞ is the RBF.
    Xt, Yt = torch.tensor(X, dtype=dtype), torch.tensor(Y, dtype=dtype)
    D2 = cdist(Xt.double().numpy(), Yt.double().numpy()) ** 2 / 0.8 ** 2
    for alpha in (1e5, 1e8, 1e16):
        ref = np.exp(-alpha * np.log1p(D2 / (2 * alpha)))
        with torch.no_grad():
            K = tk.RationalQuadratic(0.8, alpha=alpha)(Xt, Yt, backend=backend).to_dense()
        assert np.abs(K.double().numpy() - ref).max() < tol
    np.testing.assert_allclose(ref, np.exp(-D2 / 2), atol=1e-15)  # the RBF limit
