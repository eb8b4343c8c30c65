"""Spectral measures: Monte-Carlo E[a·cos(wᵀ(x − y))] against the kernel itself (Bochner)."""
import math

import numpy as np
import pytest
import torch

import torchkern as tk
from torchkern.approx import spectral
from torchkern.approx.spectral import _gamma, periodic_spectrum, sample_frequencies

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
        "sum": tk.RBF(lengthscale=0.7) + 0.3 * tk.Laplacian(lengthscale=2.0),
        "sum_of_products": (2.0 * tk.RBF(lengthscale=0.5) * tk.Matern(nu=1.5, lengthscale=1.0)
                            + tk.RationalQuadratic(lengthscale=1.2, alpha=0.8)
                            + tk.InverseMultiquadric(lengthscale=2.0, c=0.5)),
        "periodic": tk.Periodic(lengthscale=1.0, period=2.0),
        "periodic_ard": tk.Periodic(lengthscale=torch.tensor([0.7, 1.5, 3.0]), period=1.5),
        "periodic_short": tk.Periodic(lengthscale=0.3, period=2.0),
        "periodic_times_rbf": tk.Periodic(lengthscale=0.8, period=1.5) * tk.RBF(lengthscale=3.0),
        "product_of_sum": 1.5 * (tk.RBF(lengthscale=1.0) + tk.Periodic(lengthscale=1.0, period=2.0))
                          * tk.Matern(nu=2.5, lengthscale=2.0),
    }


def _pairs():
    g = torch.Generator().manual_seed(7)
    X = torch.randn(6, D, generator=g, dtype=torch.float64)
    Y = X + torch.randn(6, D, generator=g, dtype=torch.float64) * torch.tensor([0.1, 0.5, 1.0, 1.5, 2.0, 3.0])[:, None]
    return X, Y


_PERIODIC_ONLY = ("periodic", "periodic_ard", "periodic_short")  # no radial factor to orthogonalize


@pytest.mark.parametrize("name, orthogonal", [(n, o) for o in (False, True) for n in _kernels()
                                              if not (o and n in _PERIODIC_ONLY)])
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


def test_frequencies_follow_period():
    k = tk.Periodic(lengthscale=0.9, period=torch.tensor([1.0, 3.0]))
    W1, a1 = sample_frequencies(k, 50, 2, torch.Generator().manual_seed(0))
    k.period = torch.tensor([2.0, 1.5])
    W2, a2 = sample_frequencies(k, 50, 2, torch.Generator().manual_seed(0))
    K1 = W1.detach() * torch.tensor([1.0, 3.0], dtype=torch.float64) / (2 * math.pi)
    torch.testing.assert_close(K1, K1.round(), rtol=0, atol=1e-12)  # w = 2πk/p
    torch.testing.assert_close(W2.detach() * torch.tensor([2.0, 1.5], dtype=torch.float64) / (2 * math.pi), K1,
                               rtol=0, atol=1e-12)
    assert K1.abs().max() > 0 and float(a1) == 1.0 and float(a2) == 1.0
    # The period is learnable: W depends on it differentiably.
    (g,) = torch.autograd.grad(W2.sum(), k.raw_period)
    assert torch.isfinite(g).all() and g.abs().sum() > 0


@pytest.mark.parametrize("lengthscale", [0.05, 0.3, 1.0, 3.0, 30.0])
def test_periodic_bessel_weights_are_the_fourier_coefficients(lengthscale):
    q = periodic_spectrum(lengthscale).numpy()
    assert q[0] + 2 * q[1:].sum() == pytest.approx(1.0, abs=1e-15)
    assert np.all(q > 0) and np.all(np.diff(q) < 0)
    # Brute force: c_k = (1/p)∫_0^p κ(r) cos(2πkr/p) dr, κ(r) = exp(−2 sin²(πr/p)/ℓ²), by the
    # trapezoid rule over one period (spectrally accurate for a smooth periodic integrand).
    p = 1.7
    r = np.linspace(0.0, p, 4097)[:-1]
    kappa = np.exp(-2.0 * np.sin(np.pi * r / p) ** 2 / lengthscale ** 2)
    K = min(len(q), 60)
    c = np.array([np.mean(kappa * np.cos(2 * np.pi * k * r / p)) for k in range(K)])
    np.testing.assert_allclose(q[:K], c, rtol=1e-9, atol=1e-15)
    # The series sums back to the kernel, and the law (Skellam) has mean 0, variance 1/ℓ².
    ks = np.arange(1, len(q))
    r2 = np.linspace(-3.0, 3.0, 13)
    series = q[0] + 2 * (q[1:, None] * np.cos(2 * np.pi * ks[:, None] * r2 / p)).sum(0)
    np.testing.assert_allclose(series, np.exp(-2.0 * np.sin(np.pi * r2 / p) ** 2 / lengthscale ** 2),
                               rtol=0, atol=1e-13)
    assert 2 * (ks ** 2 * q[1:]).sum() == pytest.approx(1.0 / lengthscale ** 2, rel=1e-10)


def test_periodic_truncation_and_limit():
    # The table stops where the mass beyond it is below 1e-16; its size grows like 1/ℓ.
    for ell in (1.0, 0.01, 1e-3):
        q = periodic_spectrum(ell).numpy()
        assert q[-1] > 0 and 2 * q[-1] < 1e-14
        assert len(q) < 10 + 12 / ell
    assert len(periodic_spectrum(1e-3)) > 1000
    with pytest.raises(ValueError, match="lengthscale"):
        periodic_spectrum(5e-5)
    with pytest.raises(ValueError, match="lengthscale"):
        sample_frequencies(tk.Periodic(lengthscale=5e-5), 10, 1)


def test_periodic_frequencies_are_2pi_k_over_p_with_bessel_law():
    n, ell = 200_000, 0.6
    W, amp = sample_frequencies(tk.Periodic(lengthscale=ell, period=2 * math.pi), n, 2,
                                torch.Generator().manual_seed(0))
    k = W.detach()  # period 2π: the frequencies are the integers k themselves
    torch.testing.assert_close(k, k.round(), rtol=0, atol=1e-12)
    assert float(amp) == 1.0
    q = periodic_spectrum(ell)
    for axis in range(2):
        counts = torch.bincount((k[:, axis].abs()).long(), minlength=len(q))[:len(q)].double()
        expect = n * torch.cat([q[:1], 2 * q[1:]])
        big = expect > 50
        assert torch.all((counts[big] - expect[big]).abs() < 4.5 * expect[big].sqrt()), (counts, expect)
    # The axes are independent: their correlation is at the Monte-Carlo noise level.
    assert abs(float(torch.corrcoef(k.T)[0, 1])) < 4.5 / math.sqrt(n)
    # Shifts by whole periods along any axis leave every cos(wᵀr) at exactly 1.
    W2, _ = sample_frequencies(tk.Periodic(lengthscale=torch.tensor([0.4, 2.0]), period=1.3), 1000, 2,
                               torch.Generator().manual_seed(1))
    r = torch.tensor([[1.3, 0.0], [0.0, -2.6], [3.9, 1.3]], dtype=torch.float64)
    torch.testing.assert_close(torch.cos(W2.detach() @ r.T), torch.ones(1000, 3, dtype=torch.float64),
                               rtol=0, atol=1e-9)


def test_sum_draws_terms_in_proportion_to_their_variance():
    k = 3.0 * tk.RBF(lengthscale=0.5) + tk.Periodic() * tk.Matern(nu=0.5) + 0.5 * tk.InverseMultiquadric(c=2.0)
    spec = spectral.decompose(k)
    assert len(spec.terms) == 3 and [len(t.factors) for t in spec.terms] == [1, 2, 1]
    n = 40_000
    draws = spectral.draw(spec, n, 2, torch.Generator().manual_seed(0))
    pi = torch.tensor([3.0, 1.0, 0.25], dtype=torch.float64) / 4.25  # IMQ: a = 0.5 / c
    torch.testing.assert_close(draws.prob, pi)
    counts = torch.tensor(draws.counts, dtype=torch.float64)
    assert counts.sum() == n
    assert torch.all((counts - n * pi).abs() < 4.5 * (n * pi * (1 - pi)).sqrt())
    assert [o.shape[0] for o in draws.omega] == [draws.counts[0], draws.counts[1], draws.counts[1], draws.counts[2]]
    W, amp = sample_frequencies(k, 100, 2, torch.Generator().manual_seed(0))
    assert W.shape == (100, 2) and float(amp.detach()) == pytest.approx(4.25)
    # A reserved frequency per term; the amplitudes a_i·n/n_i of assemble().
    d1 = spectral.draw(spec, 5, 2, torch.Generator().manual_seed(0), min_per_term=1)
    assert min(d1.counts) >= 1 and sum(d1.counts) == 5
    W, amps = spectral.assemble(spec, d1)
    assert W.shape == (5, 2) and amps.shape == (5,)
    assert float(amps.detach().mean()) == pytest.approx(4.25)
    with pytest.raises(ValueError, match="terms"):
        spectral.draw(spec, 2, 2, min_per_term=1)


def test_products_of_sums_are_multiplied_out():
    a, b, c = tk.RBF(), tk.Laplacian(), tk.Periodic()
    spec = spectral.decompose(2.0 * (a + b) * (c + 3.0 * a))
    assert [[type(f).__name__ for f in t.factors] for t in spec.terms] == [
        ["RBF", "Periodic"], ["RBF", "RBF"], ["Laplacian", "Periodic"], ["Laplacian", "RBF"]]
    torch.testing.assert_close(spectral.term_amplitudes(spec).detach(),
                               torch.tensor([2.0, 6.0, 2.0, 6.0], dtype=torch.float64))
    big = tk.RBF() + tk.Laplacian() + tk.Matern() + tk.Periodic()
    with pytest.raises(ValueError, match="product terms"):
        spectral.decompose(big * big * big * big * big)  # 4⁵ terms
    assert len(spectral.decompose(big * big * big * big).terms) == 256


@pytest.mark.parametrize("kernel", [tk.Linear(), tk.Polynomial(degree=2), tk.Chi2(), tk.Min(),
                                    tk.ArcCosine(order=1), tk.RBF() + tk.Min(),
                                    2.0 * tk.Periodic() * tk.Linear(),
                                    (tk.RBF() + tk.Linear()) * tk.Laplacian()])
def test_not_shift_invariant_raises(kernel):
    with pytest.raises(TypeError, match="shift-invariant"):
        sample_frequencies(kernel, 10, 2)


def test_non_kernel_raises():
    with pytest.raises(TypeError, match="Kernel"):
        spectral.decompose(lambda x, y: 0)
    with pytest.raises(ValueError, match="ard_dims"):
        sample_frequencies(tk.RBF(lengthscale=torch.ones(3)), 10, 2)
    with pytest.raises(ValueError, match="ard_dims"):
        sample_frequencies(tk.RBF() + tk.Periodic(lengthscale=torch.ones(3)), 10, 2)
    with pytest.raises(TypeError, match="random_state"):
        spectral.as_generator(1.5)
