"""Spectral measures: Monte-Carlo E[a·cos(wᵀ(x − y))] against the kernel itself (Bochner)."""
import math

import pytest
import torch

import torchkern as tk
from torchkern.approx import spectral
from torchkern.approx.spectral import _gamma, sample_frequencies

D = 3
N = 24_000  # frequencies per kernel; the tolerance is derived from their standard error


def _kernels():
    return {
        "rbf": tk.RBF(lengthscale=0.7),
        "rbf_ard": tk.RBF(lengthscale=torch.tensor([0.5, 1.0, 2.0])),
        "laplacian": tk.Laplacian(lengthscale=0.8),
        "matern12": tk.Matern(nu=0.5, lengthscale=1.2),
        "matern32": tk.Matern(nu=1.5, lengthscale=1.2),
        "matern52": tk.Matern(nu=2.5, lengthscale=0.6),
        "rq_small_alpha": tk.RationalQuadratic(lengthscale=0.9, alpha=0.4),
        "rq": tk.RationalQuadratic(lengthscale=1.3, alpha=3.0),
        "imq": tk.InverseMultiquadric(lengthscale=1.1, c=0.7),
        "scaled": 2.5 * tk.Matern(nu=1.5, lengthscale=0.9),
        "product": tk.RBF(lengthscale=1.5) * (0.5 * tk.Laplacian(lengthscale=torch.tensor([1.0, 2.0, 3.0]))),
    }


def _pairs():
    g = torch.Generator().manual_seed(7)
    X = torch.randn(6, D, generator=g, dtype=torch.float64)
    Y = X + torch.randn(6, D, generator=g, dtype=torch.float64) * torch.tensor([0.1, 0.5, 1.0, 1.5, 2.0, 3.0])[:, None]
    return X, Y


@pytest.mark.parametrize("orthogonal", [False, True])
@pytest.mark.parametrize("name", list(_kernels()))
def test_monte_carlo_matches_kernel(name, orthogonal):
    k = _kernels()[name]
    X, Y = _pairs()
    exact = torch.stack([k(X[i:i + 1], Y[i:i + 1]).to_dense()[0, 0] for i in range(len(X))]).detach()
    W, amp = sample_frequencies(k, N, D, torch.Generator().manual_seed(1), orthogonal=orthogonal)
    W, amp = W.detach(), amp.detach()
    C = amp * torch.cos(W @ (X - Y).T)  # (N, pairs)
    # Rows inside a block of D (orthogonal features) are dependent, blocks are not: the
    # standard error comes from the block means.
    B = C.reshape(N // D, D, -1).mean(1)
    est, se = B.mean(0), B.std(0) / math.sqrt(B.shape[0])
    assert torch.all((est - exact).abs() <= 4.5 * se + 1e-12), (est, exact, se)
    # The pairs span kernel values from near k(0) down to small ones.
    assert exact.max() > 0.3 * amp and exact.min() < 0.5 * amp


@pytest.mark.parametrize("shape", [0.4, 1.5, 3.0])
def test_gamma_sampler_moments(shape):
    n = 100_000
    G = _gamma(shape, n, torch.Generator().manual_seed(3))
    assert G.min() > 0
    # Gamma(a, 1): mean a, variance a; E[log G] = ψ(a).
    assert abs(G.mean() - shape) < 4.5 * math.sqrt(shape / n)
    assert abs(G.var() - shape) < 0.05 * shape
    logs = G.log()
    assert abs(logs.mean() - torch.special.digamma(torch.tensor(shape))) < 4.5 * logs.std() / math.sqrt(n)


def test_frequencies_follow_lengthscale_and_scale():
    k = 3.0 * tk.RBF(lengthscale=torch.tensor([0.5, 2.0]))
    W1, a1 = sample_frequencies(k, 10, 2, torch.Generator().manual_seed(0))
    k.base.lengthscale = torch.tensor([1.0, 1.0])
    W2, a2 = sample_frequencies(k, 10, 2, torch.Generator().manual_seed(0))
    torch.testing.assert_close(W1 * torch.tensor([0.5, 2.0], dtype=torch.float64), W2.detach(), rtol=1e-12, atol=0)
    assert float(a1.detach()) == pytest.approx(3.0) and float(a2.detach()) == pytest.approx(3.0)


@pytest.mark.parametrize("kernel", [tk.Linear(), tk.Polynomial(degree=2), tk.Periodic(),
                                    tk.Chi2(), tk.Min(), tk.ArcCosine(order=1)])
def test_not_shift_invariant_raises(kernel):
    with pytest.raises(TypeError, match="shift-invariant"):
        sample_frequencies(kernel, 10, 2)


def test_sum_and_non_kernel_raise():
    with pytest.raises(TypeError, match="sum of kernels"):
        spectral.decompose(tk.RBF() + tk.Laplacian())
    with pytest.raises(TypeError, match="Kernel"):
        spectral.decompose(lambda x, y: 0)
    with pytest.raises(ValueError, match="ard_dims"):
        sample_frequencies(tk.RBF(lengthscale=torch.ones(3)), 10, 2)
    with pytest.raises(TypeError, match="random_state"):
        spectral.as_generator(1.5)
