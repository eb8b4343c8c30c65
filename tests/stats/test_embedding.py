import math

import numpy as np
import pytest
import torch

import torchkern
from torchkern.stats import KernelMeanEmbedding, mean_embedding

LS = 0.7


def k_np(a, b):
    return math.exp(-float(((a - b) ** 2).sum()) / (2 * LS**2))


@pytest.fixture
def samples():
    g = torch.Generator().manual_seed(20)
    X = torch.randn(6, 2, generator=g, dtype=torch.float64)
    Y = torch.randn(5, 2, generator=g, dtype=torch.float64) + 0.5
    Z = torch.randn(4, 2, generator=g, dtype=torch.float64)
    return X, Y, Z


@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_evaluation_is_the_sample_mean_of_kernel_sections(samples, backend):
    X, _, Z = samples
    mu = mean_embedding(X, torchkern.RBF(LS), backend=backend)
    ref = [np.mean([k_np(x, z) for x in X.numpy()]) for z in Z.numpy()]
    got = mu(Z)
    assert got.shape == (4,)
    np.testing.assert_allclose(got.detach().numpy(), ref, rtol=1e-13)


def test_inner_product_and_norm(samples):
    X, Y, _ = samples
    k = torchkern.RBF(LS)
    mu, nu = mean_embedding(X, k), mean_embedding(Y, k)
    cross = np.mean([[k_np(x, y) for y in Y.numpy()] for x in X.numpy()])
    self_ = np.mean([[k_np(x, y) for y in X.numpy()] for x in X.numpy()])
    assert mu.inner(nu).item() == pytest.approx(cross, rel=1e-13)
    assert nu.inner(mu).item() == pytest.approx(cross, rel=1e-13)
    assert mu.norm().item() == pytest.approx(math.sqrt(self_), rel=1e-13)
    # ‖μ − ν‖² = ‖μ‖² + ‖ν‖² − 2⟨μ, ν⟩ through the algebra of embeddings.
    d = mu - nu
    assert d.norm().item() ** 2 == pytest.approx(
        mu.norm().item() ** 2 + nu.norm().item() ** 2 - 2 * cross, rel=1e-12)
    assert (2.0 * mu)(X[:2]).detach().numpy() == pytest.approx(2 * mu(X[:2]).detach().numpy())


def test_reproducing_property_for_a_finite_combination(samples):
    # ⟨f, k(z, ·)⟩_H = f(z): a one-point embedding is the kernel section k(z, ·).
    X, _, Z = samples
    k = torchkern.RBF(LS)
    mu = mean_embedding(X, k)
    section = KernelMeanEmbedding(Z[:1], torch.ones(1, dtype=Z.dtype), k)
    assert mu.inner(section).item() == pytest.approx(mu(Z[:1]).item(), rel=1e-13)


def test_gradients_reach_points_and_hyperparameters(samples):
    X, _, Z = samples
    X = X.clone().requires_grad_()
    k = torchkern.RBF(LS)
    mean_embedding(X, k, backend="blocked")(Z).sum().backward()
    ref_X = X.detach().clone().requires_grad_()
    raw = k.raw_lengthscale.detach().clone().requires_grad_()
    ls = torch.nn.functional.softplus(raw)
    K = torch.exp(-((Z[:, None] - ref_X[None]) ** 2).sum(-1) / (2 * ls**2))
    K.mean(1).sum().backward()
    torch.testing.assert_close(X.grad, ref_X.grad, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(k.raw_lengthscale.grad, raw.grad, rtol=1e-12, atol=1e-14)


def test_bad_input(samples):
    X, Y, _ = samples
    mu = mean_embedding(X, torchkern.RBF())
    with pytest.raises(ValueError, match="same kernel"):
        mu.inner(mean_embedding(Y, torchkern.RBF()))
    with pytest.raises(ValueError, match="features"):
        mu(torch.randn(3, 5, dtype=torch.float64))
    with pytest.raises(TypeError, match="kernel"):
        mean_embedding(X, None)
    with pytest.raises(ValueError, match="weights"):
        KernelMeanEmbedding(X, torch.ones(3), torchkern.RBF())
