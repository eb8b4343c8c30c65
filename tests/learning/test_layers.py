"""KernelLayer, MMDLoss, fit_kernel, and a learned-kernel MMD test on Blobs."""
import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import rbf_kernel

import torchkern
from torchkern.learning import KernelLayer, MMDLoss, fit_kernel, mmd_test_power
from torchkern.stats import MMDTest

F64 = torch.float64


def test_kernel_layer_matches_formula_and_gradcheck():
    g = torch.Generator().manual_seed(0)
    C = torch.randn(6, 3, generator=g, dtype=F64)
    layer = KernelLayer(torchkern.RBF(0.9), centers=C, out_features=2)
    x = torch.randn(5, 3, generator=g, dtype=F64)
    ref = rbf_kernel(x.numpy(), C.numpy(), gamma=1 / (2 * 0.81)) @ layer.weight.detach().numpy()
    np.testing.assert_allclose(layer(x).detach().numpy(), ref + layer.bias.detach().numpy(), rtol=1e-12)
    # blocked (lazy) products give the same values and gradients
    lazy = KernelLayer(torchkern.RBF(0.9), centers=C, out_features=2, backend="blocked")
    lazy.load_state_dict(layer.state_dict())
    np.testing.assert_allclose(lazy(x).detach().numpy(), layer(x).detach().numpy(), rtol=1e-12)

    assert torch.autograd.gradcheck(
        lambda xv, cv, wv: (torchkern.RBF(0.9)(xv, cv, backend="blocked") @ wv),
        (x.clone().requires_grad_(), C.clone().requires_grad_(),
         layer.weight.detach().clone().requires_grad_()))
    out = layer(x).sum()
    out.backward()
    assert layer.centers.grad is not None and layer.kernel.raw_lengthscale.grad is not None


def test_kernel_layer_trains_in_a_model():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(200, 2, generator=g) * 4 - 2
    y = (torch.sin(2 * X[:, 0]) * X[:, 1]).unsqueeze(1)
    model = torch.nn.Sequential(KernelLayer(torchkern.RBF(1.0), n_centers=20, in_features=2,
                                            out_features=1, random_state=0))
    first = float(((model(X) - y) ** 2).mean().detach())
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(150):
        opt.zero_grad()
        loss = ((model(X) - y) ** 2).mean()
        loss.backward()
        opt.step()
    final = float(((model(X) - y) ** 2).mean().detach())
    assert final < 0.1 * first
    with pytest.raises(ValueError, match="in_features"):
        KernelLayer(torchkern.RBF(), n_centers=3)
    with pytest.raises(TypeError, match="kernel"):
        KernelLayer("rbf", n_centers=3, in_features=2)


def test_mmd_loss_matches_brute_force_unbiased_and_biased():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(15, 2, generator=g, dtype=F64)
    Y = torch.randn(12, 2, generator=g, dtype=F64) + 0.5
    Kx, Ky, Kxy = (rbf_kernel(A.numpy(), B.numpy(), gamma=0.5) for A, B in ((X, X), (Y, Y), (X, Y)))
    off_x, off_y = ~np.eye(15, dtype=bool), ~np.eye(12, dtype=bool)
    unbiased = Kx[off_x].mean() + Ky[off_y].mean() - 2 * Kxy.mean()
    biased = Kx.mean() + Ky.mean() - 2 * Kxy.mean()
    assert float(MMDLoss(torchkern.RBF(1.0))(X, Y)) == pytest.approx(unbiased, rel=1e-10)
    lazy = MMDLoss(torchkern.RBF(1.0), "biased", backend="blocked")
    assert float(lazy(X, Y)) == pytest.approx(biased, rel=1e-10)
    Xg = X.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda a: MMDLoss(torchkern.RBF(1.0))(a, Y), (Xg,))
    with pytest.raises(ValueError, match="estimator"):
        MMDLoss(torchkern.RBF(), "quadratic")


def test_fit_kernel_stops_early_and_checks_arguments():
    target = torch.tensor([1.0, -2.0], dtype=F64)
    w = torch.zeros(2, dtype=F64, requires_grad=True)
    res = fit_kernel(lambda: ((w - target) ** 2).sum(), [w], optimizer="lbfgs", max_iter=50)
    assert res.converged and res.n_iter < 10 and len(res.history) == res.n_iter + 1
    np.testing.assert_allclose(w.detach().numpy(), target.numpy(), atol=1e-6)
    seen = []
    res = fit_kernel(lambda: ((w - 3) ** 2).sum(), w, optimizer="adam", max_iter=5,
                     callback=lambda i, l: seen.append(i))
    assert seen == [0, 1, 2, 3, 4] and res.n_iter == 5
    # a callback that returns True stops L-BFGS-B after that iteration
    w2 = torch.zeros(2, dtype=F64, requires_grad=True)
    res = fit_kernel(lambda: ((w2 - target) ** 4).sum(), w2, callback=lambda i, l: True)
    assert res.n_iter == 1 and not res.converged and "callback" in res.reason
    with pytest.raises(ValueError, match="optimizer"):
        fit_kernel(lambda: w.sum(), [w], optimizer="sgd")
    with pytest.raises(ValueError, match="requires grad"):
        fit_kernel(lambda: w.sum(), [torch.zeros(2)])


def _blobs(n, g, rho):
    """Liu et al. (2020)'s Blobs: a 3 × 3 grid of unit Gaussians 10 apart; Q's blobs have
    correlation rho."""
    centre = torch.randint(0, 3, (n, 2), generator=g).to(F64) * 10
    C = torch.tensor([[1.0, 0.0], [rho, (1 - rho ** 2) ** 0.5]], dtype=F64)
    return centre + torch.randn(n, 2, generator=g, dtype=F64) @ C.T


def test_learned_kernel_mmd_test_keeps_level_and_beats_median_heuristic_on_blobs():
    g = torch.Generator().manual_seed(0)
    k = torchkern.RBF(1.0)
    A, B = _blobs(200, g, 0.0), _blobs(200, g, 0.9)  # training split
    hist = fit_kernel(lambda: -mmd_test_power(k, A, B), k, optimizer="adam", lr=0.1,
                      max_iter=30, patience=None).history
    assert hist[-1] < hist[0]
    trials, rejected = 20, {"learned": 0, "median": 0, "null": 0}
    for r in range(trials):  # fresh test data: the kernel is independent of it
        X, Y, X2 = _blobs(100, g, 0.0), _blobs(100, g, 0.9), _blobs(100, g, 0.0)
        rejected["learned"] += MMDTest(k, n_permutations=100, random_state=r).test(X, Y).reject
        rejected["median"] += MMDTest(n_permutations=100, random_state=r).test(X, Y).reject
        rejected["null"] += MMDTest(k, n_permutations=100, random_state=r).test(X, X2).reject
    # level 0.05: P(Binomial(20, 0.05) >= 5) < 0.003
    assert rejected["null"] <= 4
    assert rejected["learned"] >= rejected["median"] + 5


def test_deep_kernel_marginal_likelihood_gradient_and_training():
    from torchkern.learning import log_marginal_likelihood
    g = torch.Generator().manual_seed(2)
    X = torch.randn(30, 3, generator=g, dtype=F64)
    y = torch.sin(X[:, 0] - X[:, 1])
    W = torch.randn(2, 3, generator=g, dtype=F64, requires_grad=True)

    class Proj(torch.nn.Module):
        def __init__(self, W):
            super().__init__()
            self.W = W

        def forward(self, x):
            return x @ self.W.T

    assert torch.autograd.gradcheck(
        lambda Wv: log_marginal_likelihood(torchkern.FeatureKernel(Proj(Wv), torchkern.RBF(1.0)),
                                           X, y, 0.1), (W,))
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()
    kernel = torchkern.FeatureKernel(net, torchkern.RBF(1.0))
    hist = fit_kernel(lambda: -log_marginal_likelihood(kernel, X, y, 0.1) / 30, kernel,
                      optimizer="adam", lr=0.01, max_iter=30, patience=None).history
    assert hist[-1] < hist[0] - 0.1
