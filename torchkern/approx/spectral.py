r"""Spectral measures of the shift-invariant kernels of :mod:`torchkern.kernels`.

Bochner's theorem (seed 000, L4570 "Fourier-Stieltjes transform on ℝ^d"; L10070 "Random
Fourier features"): a continuous shift-invariant p.d. kernel k(x, y) = κ(x − y) is

.. math:: \kappa(z) = a\,\mathbb{E}_{w\sim q}\left[\cos(w^\top z)\right],\qquad a = \kappa(0),

for a symmetric probability measure q, its normalized Fourier transform. This module
draws w ~ q for every kernel whose q is known in closed form:

======================  ===========================================================
kernel                  w = Ω / ℓ, Ω standardized (lengthscale 1)
======================  ===========================================================
RBF                     Ω ~ N(0, I)  (Gaussian spectrum, seed 000 L4700)
Matern ν                Ω = g·√(ν/G), g ~ N(0, I), G ~ Gamma(ν, 1): the multivariate
                        Student t with 2ν degrees of freedom
Laplacian               Matérn ν = 1/2: the multivariate Cauchy distribution
RationalQuadratic α     Ω = g·√(G/α), G ~ Gamma(α, 1): a Gamma scale mixture of
                        Gaussians, since (1 + r²/2α)^(−α) = E_τ[exp(−τr²/2)]
InverseMultiquadric c   Ω = g·√(2G)/c, G ~ Gamma(1/2, 1), amplitude a = 1/c, since
                        (r² + c²)^(−1/2) = (1/c)·E_t[exp(−t r²)], t ~ Gamma(1/2, c²)
c · k                   the measure of k, amplitude multiplied by c
k₁ · k₂ · …             the convolution of the measures: w = w₁ + w₂ + …
======================  ===========================================================

With ARD lengthscales ℓ ∈ ℝ^d the division is coordinate-wise. Lengthscales, output
scales and the IMQ constant c enter only through :func:`assemble`, so the standardized
draws can be stored once and the hyperparameters stay learnable: gradients of anything
computed from w reach them. The RationalQuadratic α shapes the Gamma law itself and is
fixed at the value it had when the draws were made.

Sums of kernels have a mixture measure and are not handled here (concatenate one feature
map per term instead); kernels that are not shift-invariant (Linear, Polynomial, ArcCosine,
Min, Chi2, ...) and Periodic (a discrete spectrum) raise ``TypeError``.

Cost: O(n d) to draw n frequencies (O(n d²) with ``orthogonal=True``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..kernels import (RBF, InverseMultiquadric, Kernel, Laplacian, Matern, ProductKernel,
                       RationalQuadratic, ScaleKernel, SumKernel)

__all__ = ["sample_frequencies", "decompose", "draw", "assemble", "as_generator"]

_SUPPORTED = (RBF, Laplacian, Matern, RationalQuadratic, InverseMultiquadric)

from .._validation import as_generator  # noqa: E402,F401

@dataclass
class Spectrum:
    """A kernel split into output scales and shift-invariant factors.

    k = (Π scales) · (Π factors); each factor is one of the supported stationary kernels.
    """

    scales: list
    factors: list

    @property
    def ard_dims(self) -> int | None:
        dims = {f.ard_dims for f in self.factors if f.ard_dims is not None}
        if len(dims) > 1:
            raise ValueError(f"the factors of the kernel have different ard_dims {sorted(dims)}")
        return dims.pop() if dims else None

def decompose(kernel) -> Spectrum:
    """Split ``kernel`` into scales and supported factors, or raise ``TypeError``."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a torchkern Kernel, got {type(kernel).__name__}")
    if isinstance(kernel, ScaleKernel):
        inner = decompose(kernel.base)
        return Spectrum([kernel] + inner.scales, inner.factors)
    if isinstance(kernel, ProductKernel):
        parts = [decompose(k) for k in kernel.kernels]
        return Spectrum([s for p in parts for s in p.scales], [f for p in parts for f in p.factors])
    if isinstance(kernel, SumKernel):
        raise TypeError("random Fourier features of a sum of kernels are not supported (its "
                        "spectral measure is a mixture): build one RandomFourierFeatures per "
                        "term and concatenate their features")
    if isinstance(kernel, _SUPPORTED):
        return Spectrum([], [kernel])
    raise TypeError(f"{type(kernel).__name__} has no spectral measure torchkern can sample: "
                    f"random Fourier features need a shift-invariant kernel "
                    f"(RBF, Laplacian, Matern, RationalQuadratic, InverseMultiquadric, their "
                    f"products and c * k)")

def _gaussian_block(n, d, generator, orthogonal):
    """n rows distributed as N(0, I_d); with ``orthogonal`` the rows of each block of d
    are orthogonal (Yu et al. 2016): Q from the QR of a Gaussian matrix, rows rescaled by
    independent χ_d norms, so that every row keeps the law N(0, I_d)."""
    dev = generator.device if generator is not None else torch.device("cpu")
    kw = dict(generator=generator, dtype=torch.float64, device=dev)
    if not orthogonal or d == 1:
        return torch.randn(n, d, **kw)
    b = -(-n // d)
    Q, R = torch.linalg.qr(torch.randn(b, d, d, **kw))  # one batched QR for all blocks
    Q = Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))[:, None, :]  # Haar-distributed
    norms = torch.randn(b, d, d, **kw).norm(dim=-1)
    return (Q.transpose(-2, -1) * norms[..., None]).reshape(b * d, d)[:n]

def _gamma(shape_param: float, n: int, generator) -> torch.Tensor:
    """n draws of Gamma(shape, rate 1), float64, with ``generator``.

    ``torch._standard_gamma`` has no generator argument; Marsaglia–Tsang (with the
    shape < 1 boost) is written here on top of ``randn``/``rand`` so draws are reproducible.
    """
    dev = generator.device if generator is not None else torch.device("cpu")
    kw = dict(generator=generator, dtype=torch.float64, device=dev)
    a = float(shape_param)
    boost = a < 1.0
    a_eff = a + 1.0 if boost else a
    d = a_eff - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = torch.empty(n, dtype=torch.float64, device=dev)
    todo = torch.arange(n, device=dev)
    while todo.numel():
        k = todo.numel()
        x = torch.randn(k, **kw)
        u = torch.rand(k, **kw)
        v = (1.0 + c * x) ** 3
        ok = (v > 0) & (torch.log(u.clamp_min(1e-300)) < 0.5 * x * x + d - d * v
                        + d * torch.log(v.clamp_min(1e-300)))
        out[todo[ok]] = (d * v)[ok]
        todo = todo[~ok]
    if boost:
        out = out * torch.rand(n, **kw) ** (1.0 / a)
    return out

def _standardized(factor, n, d, generator, orthogonal) -> torch.Tensor:
    """Frequencies of ``factor`` at lengthscale 1 (and c = 1 for the IMQ), float64 (n, d)."""
    g = _gaussian_block(n, d, generator, orthogonal)
    if isinstance(factor, RBF):
        return g
    if isinstance(factor, (Matern, Laplacian)):
        nu = 0.5 if isinstance(factor, Laplacian) else float(factor.nu)
        return g * torch.sqrt(nu / _gamma(nu, n, generator))[:, None]
    if isinstance(factor, RationalQuadratic):
        alpha = float(factor.alpha.detach())
        return g * torch.sqrt(_gamma(alpha, n, generator) / alpha)[:, None]
    if isinstance(factor, InverseMultiquadric):
        return g * torch.sqrt(2.0 * _gamma(0.5, n, generator))[:, None]
    raise TypeError(f"unsupported factor {type(factor).__name__}")  # decompose() guards this

def draw(spectrum: Spectrum, n: int, d: int, generator=None, orthogonal: bool = False) -> list:
    """Standardized draws, one float64 (n, d) tensor per factor of ``spectrum``."""
    return [_standardized(f, n, d, generator, orthogonal) for f in spectrum.factors]

def assemble(spectrum: Spectrum, draws: list, like: torch.Tensor | None = None):
    """Frequencies W (n, d) and amplitude a at the kernel's *current* hyperparameters.

    Differentiable with respect to lengthscales, output scales and the IMQ constant c.
    Computed in float64 on the device of the draws.
    """
    W = None
    amp = torch.ones((), dtype=torch.float64, device=draws[0].device)
    for f, omega in zip(spectrum.factors, draws):
        ls = f.lengthscale.to(device=omega.device, dtype=torch.float64)
        w = omega / ls
        if isinstance(f, InverseMultiquadric):
            c = f.c.to(device=omega.device, dtype=torch.float64).reshape(())
            w = w / c
            amp = amp / c
        W = w if W is None else W + w
    for s in spectrum.scales:
        amp = amp * s.outputscale.to(device=amp.device, dtype=torch.float64).reshape(())
    return W, amp

def sample_frequencies(kernel, n: int, d: int, generator=None, dtype=torch.float64, *,
                       orthogonal: bool = False):
    r"""Draw n frequencies of ``kernel``'s spectral measure in dimension d.

    Returns ``(W, a)``: W of shape (n, d) and the amplitude a = κ(0) such that
    :math:`k(x, y) = a\,\mathbb{E}[\cos(w^\top(x - y))]`. Raises ``TypeError`` for kernels
    that are not shift-invariant. See the module docstring for the laws. Cost O(n d).
    """
    spectrum = decompose(kernel)
    dims = spectrum.ard_dims
    if dims is not None and dims != d:
        raise ValueError(f"d={d} but the kernel has ard_dims={dims}")
    W, amp = assemble(spectrum, draw(spectrum, n, d, as_generator(generator), orthogonal))
    return W.to(dtype), amp.to(dtype)
