"""Kernel approximations on unusual-but-valid kernels and data, against exact Gram matrices
and scikit-learn."""
import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

import torchkern as tk
from torchkern.approx import RandomFourierFeatures

X = torch.tensor(np.random.default_rng(15).normal(size=(6, 3)))


def _rbf(A, ls):
    return np.exp(-0.5 * cdist(A / ls, A / ls) ** 2)


@pytest.mark.parametrize("orthogonal", [False, True])
def test_random_features_of_kernels_on_active_dims(orthogonal):
    # The spectral draws ignored active_dims: the features approximated the kernel on every
    # column (an RBF on column 0 of 3-D data was off by 0.86). Each factor now draws in its
    # own columns (composed through sums, products and an outer active_dims).
    A = X.numpy()
    cases = [
        (tk.RBF(0.8, active_dims=[0]), _rbf(A[:, [0]], 0.8)),
        (tk.RBF(0.8, active_dims=[0]) * tk.RBF([1.0, 2.0], active_dims=[2, 1]),
         _rbf(A[:, [0]], 0.8) * _rbf(A[:, [2, 1]], np.array([1.0, 2.0]))),
        ((tk.RBF(0.5) + 2.0 * tk.RBF(1.5, active_dims=[1])).set_active_dims([2, 0]),
         _rbf(A[:, [2, 0]], 0.5) + 2 * _rbf(A[:, [0]], 1.5)),
    ]
    for k, ref in cases:
        k = k.double()
        with torch.no_grad():
            np.testing.assert_allclose(k(X).to_dense().numpy(), ref, atol=1e-14)  # the kernel
            P = RandomFourierFeatures(k, 40000, orthogonal=orthogonal, random_state=0)(X)
        # Monte Carlo: entries of 1/√(20000) relative spread; biased draws were off by 0.3-0.9
        assert np.abs(P.numpy() @ P.numpy().T - ref).max() < 0.05 * ref.max()


def test_random_features_active_dims_beyond_the_data_are_refused():
    rff = RandomFourierFeatures(tk.RBF(1.0, active_dims=[5]), 10, random_state=0)
    with pytest.raises(ValueError, match="active_dims"):
        rff(X)


def test_nystroem_of_a_float32_deep_kernel():
    # fit evaluated K_ZZ on the centres cast to float64, which a FeatureKernel refuses
    # when its network is float32 (a TypeError on valid input); now K_ZZ in the data's
    # dtype for such kernels. Reference: the projection k_Z(x)ᵀ K_ZZ⁺ k_Z(y) on the
    # network's features, in float64.
    from torchkern.approx import Nystroem
    torch.manual_seed(0)
    Xf = torch.randn(50, 3)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
    ny = Nystroem(tk.FeatureKernel(net, tk.RBF(1.0)), n_components=10, random_state=0).fit(Xf)
    P = ny.transform(Xf).detach().double().numpy()
    with torch.no_grad():
        F = net(Xf).double().numpy()
    Z = F[ny.component_indices_.numpy()]
    ref = _rbf_cross(F, Z) @ np.linalg.pinv(_rbf_cross(Z, Z), hermitian=True) @ _rbf_cross(Z, F)
    assert np.abs(P @ P.T - ref).max() < 1e-5


def _rbf_cross(A, B):
    return np.exp(-0.5 * cdist(A, B) ** 2)
