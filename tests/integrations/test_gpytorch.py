"""GPyTorchKernel: torchkern kernels inside GPyTorch models, checked against GPyTorch's own
kernels and against torchkern's GaussianProcessRegressor."""
import gpytorch
import pytest
import torch

import torchkern
from torchkern import RBF, GaussianProcessRegressor
from torchkern.integrations.gpytorch import GPyTorchKernel

D64 = torch.float64


class _ExactGP(gpytorch.models.ExactGP):
    def __init__(self, X, y, likelihood, covar):
        super().__init__(X, y, likelihood)
        self.mean_module = gpytorch.means.ZeroMean()
        self.covar_module = covar

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _data(n=80, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 2, generator=g, dtype=D64)
    y = torch.sin(2 * X).sum(1) + 0.1 * torch.randn(n, generator=g, dtype=D64)
    return X, y


def _model(X, y, covar, noise=0.05):
    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    lik.noise = noise
    return _ExactGP(X, y, lik, covar).double(), lik


def test_matrix_equals_gpytorch_rbf_and_parameters_are_the_torchkern_ones():
    X, _ = _data()
    Z = torch.randn(7, 2, dtype=D64)
    k = GPyTorchKernel(RBF(0.7))
    ref = gpytorch.kernels.RBFKernel().double()
    ref.lengthscale = 0.7
    with torch.no_grad():
        assert torch.allclose(k(X, Z).to_dense(), ref(X, Z).to_dense(), atol=1e-12)
        assert torch.allclose(k(X, diag=True), torch.ones(len(X), dtype=D64))
        # Batched inputs are evaluated batch by batch.
        Xb = torch.randn(3, 10, 2, dtype=D64)
        assert torch.allclose(k(Xb).to_dense(), ref(Xb).to_dense(), atol=1e-12)
    names = [name for name, _ in k.named_parameters()]
    assert names == ["base_kernel.raw_lengthscale"]
    assert next(k.parameters()) is k.base_kernel.raw_lengthscale


@pytest.mark.parametrize("lazy", [False, True])
def test_exact_gp_marginal_likelihood_equals_torchkern(lazy):
    X, y = _data()
    model, lik = _model(X, y, GPyTorchKernel(RBF(0.7), lazy=lazy))
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    model.train(), lik.train()
    # ExactMarginalLogLikelihood returns log p(y) / n; its likelihood adds its own noise.
    value = mll(model(X), y) * len(X)
    noise = lik.noise.item()
    ours = GaussianProcessRegressor(RBF(0.7), noise=noise).fit(X, y)
    assert abs(float(value) - float(ours.log_marginal_likelihood())) < 1e-9

    # Gradient w.r.t. the torchkern lengthscale equals autograd through the dense density.
    value.backward()
    k = RBF(0.7)
    K = k(X, backend="dense").to_dense() + noise * torch.eye(len(X), dtype=D64)
    ref = torch.distributions.MultivariateNormal(torch.zeros(len(X), dtype=D64), K).log_prob(y)
    ref.backward()
    g = model.covar_module.base_kernel.raw_lengthscale.grad
    assert torch.allclose(g, k.raw_lengthscale.grad, rtol=1e-8)

    # Posterior in eval mode equals torchkern's predict (latent f mean and variance).
    model.eval(), lik.eval()
    Xt = torch.randn(9, 2, dtype=D64)
    with torch.no_grad():
        post = model(Xt)
    m, s = ours.predict(Xt, return_std=True)
    assert torch.allclose(post.mean, m, atol=1e-8)
    assert torch.allclose(post.variance, s**2, atol=1e-8)


def test_lazy_operator_products_entries_and_derivatives_equal_dense():
    X, _ = _data(n=50)
    Z = torch.randn(30, 2, dtype=D64)
    k = GPyTorchKernel(2.0 * RBF(0.6), lazy=True)
    op = k.forward(X, Z)
    assert not isinstance(op, torch.Tensor)
    dense = (2.0 * RBF(0.6))(X, Z, backend="dense").to_dense().detach()
    V = torch.randn(30, 3, dtype=D64)
    with torch.no_grad():
        assert torch.allclose(op.matmul(V), dense @ V, atol=1e-12)
        assert torch.allclose(op.mT.matmul(torch.ones(50, 1, dtype=D64)),
                              dense.T @ torch.ones(50, 1, dtype=D64), atol=1e-12)
        assert torch.allclose(op.to_dense(), dense, atol=1e-12)
        rows, cols = torch.tensor([0, 7, 49]), torch.tensor([2, 2, 29])
        assert torch.allclose(op[rows, cols], dense[rows, cols], atol=1e-12)
        assert torch.allclose(op[3:9, :].to_dense(), dense[3:9], atol=1e-12)
    # d(uᵀKv)/dθ by linear_operator's default derivative equals autograd on the dense matrix.
    u, v = torch.randn(50, 2, dtype=D64), torch.randn(30, 2, dtype=D64)
    grads = op._bilinear_derivative(u, v)
    params = list(k.base_kernel.parameters())
    ref_kernel = 2.0 * RBF(0.6)
    ref = (u * (ref_kernel(X, Z, backend="dense").to_dense() @ v)).sum()
    ref_grads = torch.autograd.grad(ref, list(ref_kernel.parameters()))
    got = [g for g in grads[2:]]
    assert len(got) == len(params) == 2
    for a, b in zip(got, ref_grads):
        assert torch.allclose(a, b, rtol=1e-8)


def test_lazy_kernel_in_gpytorch_cg_inference():
    # Force GPyTorch's iterative path (CG on the lazy operator) for predictions. GPyTorch's
    # own RBFKernel under the same settings gives the same numbers; both are within CG
    # accuracy of the exact posterior mean (GPyTorch's CG stalls near a 5e-6 residual).
    X, y = _data(n=100)
    Xt = torch.randn(6, 2, dtype=D64)
    native = gpytorch.kernels.RBFKernel().double()
    native.lengthscale = 0.7
    means = []
    for covar in (GPyTorchKernel(RBF(0.7), lazy=True), native):
        model, lik = _model(X, y, covar, noise=0.5)
        model.eval(), lik.eval()
        with torch.no_grad(), gpytorch.settings.max_cholesky_size(0), \
                gpytorch.settings.fast_pred_var(False), gpytorch.settings.eval_cg_tolerance(1e-5):
            means.append(model(Xt).mean)
    assert torch.allclose(means[0], means[1], rtol=0, atol=1e-6)
    ours = GaussianProcessRegressor(RBF(0.7), noise=lik.noise.item()).fit(X, y)
    assert torch.allclose(means[0], ours.predict(Xt), rtol=0, atol=2e-5)


def test_training_loop_updates_the_torchkern_kernel():
    X, y = _data(n=60)
    inner = RBF(2.0)
    model, lik = _model(X, y, GPyTorchKernel(inner), noise=0.05)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model.train(), lik.train()
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = -mll(model(X), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]
    assert float(inner.lengthscale) < 2.0  # the wrapped torchkern kernel itself was trained


def test_bad_arguments():
    with pytest.raises(TypeError, match="torchkern Kernel"):
        GPyTorchKernel(gpytorch.kernels.RBFKernel())
    with pytest.raises(ValueError, match="lazy"):
        GPyTorchKernel(RBF(), lazy="sometimes")
    assert torchkern.integrations.GPyTorchKernel is GPyTorchKernel
