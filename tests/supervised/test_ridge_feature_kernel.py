"""KernelRidge with a deep kernel whose network is float32 (a FeatureKernel): the solvers
that evaluate the kernel in float64 on float32 data for accuracy keep the network's dtype
instead (they raised the network's TypeError on valid input)."""
import numpy as np
import pytest
import torch

import torchkern as tk


@pytest.mark.parametrize("solver", ["cholesky", "cg", "nystrom"])
def test_kernel_ridge_on_a_float32_network_equals_the_dense_solve(solver):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.Tanh())
    X = torch.randn(80, 3)
    y = X[:, 0].sin() + 0.1 * torch.randn(80)
    alpha, ls = 0.1, 0.8
    m = tk.KernelRidge(kernel=tk.FeatureKernel(net, tk.RBF(ls)), alpha=alpha, solver=solver,
                       tol=1e-6, n_centers=80 if solver == "nystrom" else None,
                       random_state=0).fit(X, y)
    # the reference: the RBF Gram of the network's features in float64, a dense solve
    with torch.no_grad():
        F = net(X).double().numpy()
    D = ((F[:, None, :] - F[None, :, :]) ** 2).sum(-1)
    K = np.exp(-D / (2 * ls ** 2))
    c = np.linalg.solve(K + alpha * np.eye(80), y.double().numpy())
    pred = m.predict(X[:10])
    assert pred.dtype == torch.float32
    np.testing.assert_allclose(pred.double().numpy(), K[:10] @ c, rtol=0, atol=2e-5)
