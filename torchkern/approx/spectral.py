r"""Spectral measures of the shift-invariant kernels of :mod:`torchkern.kernels`.

Bochner's theorem (Rudin 1962, "Fourier Analysis on Groups"; Rahimi and Recht 2007,
"Random features for large-scale kernel machines", NIPS): a continuous shift-invariant p.d. kernel k(x, y) = κ(x − y) is

.. math:: \kappa(z) = a\,\mathbb{E}_{w\sim q}\left[\cos(w^\top z)\right],\qquad a = \kappa(0),

for a symmetric probability measure q, its normalized Fourier transform (the spectral
densities of the RBF and Matérn kernels: Rasmussen and Williams 2006, §4.2.1). This module
draws w ~ q for every shift-invariant kernel of :mod:`torchkern.kernels`:

======================  ===========================================================
kernel                  w = Ω / ℓ, Ω standardized (lengthscale 1)
======================  ===========================================================
RBF                     Ω ~ N(0, I)  (Gaussian spectrum)
Matern ν                Ω = g·√(ν/G), g ~ N(0, I), G ~ Gamma(ν, 1): the multivariate
                        Student t with 2ν degrees of freedom
Laplacian               Matérn ν = 1/2: the multivariate Cauchy distribution
RationalQuadratic α     Ω = g·√(G/α), G ~ Gamma(α, 1): a Gamma scale mixture of
                        Gaussians, since (1 + r²/2α)^(−α) = E_τ[exp(−τr²/2)]
InverseMultiquadric c   Ω = g·√(2G)/c, G ~ Gamma(1/2, 1), amplitude a = 1/c, since
                        (r² + c²)^(−1/2) = (1/c)·E_t[exp(−t r²)], t ~ Gamma(1/2, c²)
Periodic ℓ, p           discrete: w_j = 2π k_j / p_j independently on every axis j, with
                        P(k_j = k) = e^{−z} I_|k|(z), z = 1/ℓ_j², k ∈ ℤ (see below)
c · k                   the measure of k, amplitude multiplied by c
k₁ · k₂ · …             the convolution of the measures: w = w₁ + w₂ + …
k₁ + k₂ + …             the mixture Σ_i (a_i / Σ_j a_j)·q_i, amplitude a = Σ_j a_j
======================  ===========================================================

**Periodic.** In one dimension (a shift-invariant kernel of period p has a Fourier
*series*; Solin and Särkkä 2014, "Explicit link between periodic covariance functions and
state space models", AISTATS), with θ = 2πr/p and z = 1/ℓ², exp(−2 sin²(πr/p)/ℓ²) =
e^{−z}·e^{z cos θ} = Σ_{k∈ℤ} e^{−z} I_|k|(z) cos(kθ) (the generating function of the modified
Bessel functions I_k), and Σ_k e^{−z} I_|k|(z) = e^{−z}e^{z} = 1: the spectrum is the Skellam
law of k = N₁ − N₂, N₁, N₂ ~ Poisson(z/2) (mean 0, variance z), on the frequencies 2πk/p.
The kernel is a product over axes, so the axes are drawn independently. The weights are
tabulated with ``scipy.special.ive`` (e^{−z}I_k(z), stable for large z) and sampled by
inverse CDF. The table stops where the mass left beyond it is below 1e-16: float64
uniforms have a resolution of 2^-53 ≈ 1.1e-16, so the inverse CDF could not reach those
values anyway. The table has O(√z) = O(1/ℓ) entries; lengthscales below
``PERIODIC_MIN_LENGTHSCALE`` = 1e-4 (z > 1e8, a kernel that is a spike of width ~ℓ·p/π
per period) raise ``ValueError``.

**Sums.** A sum is expanded into a sum of products of the factors above (products of sums
are multiplied out, at most ``MAX_TERMS`` terms). With term amplitudes a_i = k_i(0), the
spectral measure is the mixture with weights π_i = a_i/Σa_j: each frequency belongs to
term i with probability π_i (π at the hyperparameters of the draw), and
:func:`sample_frequencies` returns such an i.i.d. sample with a = Σa_j. For feature maps,
:func:`assemble` weights the n_i frequencies of term i by a_i/n_i (at the *current*
hyperparameters) instead of a/n: the estimate Σ_i a_i·mean_{j∈i} cos(w_jᵀz) is unbiased
given every n_i ≥ 1 (``draw(min_per_term=1)`` guarantees it), exact at z = 0 (Σa_i), linear
in every output scale (exact gradients, as for ``c * k``) and unbiased after the scales
move; it has no more variance than the plain mixture average, whose weights are a/n.

With ARD lengthscales ℓ ∈ ℝ^d the division is coordinate-wise. Lengthscales, periods,
output scales and the IMQ constant c enter only through :func:`assemble`, so the
standardized draws can be stored once and the hyperparameters stay learnable: gradients of
anything computed from w reach them. Two hyperparameters shape the law itself and are fixed
at the value they had when the draws were made (:func:`law_params`): the
RationalQuadratic α and the Periodic lengthscale (it sets the Bessel weights of a discrete
law; its period stays learnable).

Kernels that are not shift-invariant (Linear, Polynomial, ArcCosine, Min, Chi2, ...) raise
``TypeError``, also as a term or factor of a sum or product.

Cost: O(n d) to draw n frequencies (O(n d²) with ``orthogonal=True``; O(n d log(1/ℓ)) for
Periodic factors, plus O(1/ℓ) for their weight table).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import ive

from ..kernels import (RBF, InverseMultiquadric, Kernel, Laplacian, Matern, Periodic,
                       ProductKernel, RationalQuadratic, ScaleKernel, SumKernel)

__all__ = ["sample_frequencies", "decompose", "draw", "assemble", "as_generator",
           "periodic_spectrum", "law_params", "Spectrum", "Term", "Draws"]

_RADIAL = (RBF, Laplacian, Matern, RationalQuadratic, InverseMultiquadric)
_SUPPORTED = _RADIAL + (Periodic,)
MAX_TERMS = 256
PERIODIC_MIN_LENGTHSCALE = 1e-4
_TAIL = 1e-16  # mass of the Periodic spectrum left out of its table

from .._validation import as_generator  # noqa: E402,F401


def _ard(factors):
    dims = {f.ard_dims for f in factors if f.ard_dims is not None}
    if len(dims) > 1:
        raise ValueError(f"the factors of the kernel have different ard_dims {sorted(dims)}")
    return dims.pop() if dims else None


@dataclass
class Term:
    """One product term: k_i = (Π scales) · (Π factors), each factor a supported kernel.
    ``columns[j]`` is the list of input columns factor j reads (its ``active_dims``,
    composed with those of the kernels around it), or None for every column."""

    scales: list
    factors: list
    columns: list = None

    def __post_init__(self):
        if self.columns is None:
            self.columns = [None] * len(self.factors)

    @property
    def ard_dims(self) -> int | None:
        return _ard([f for f, c in zip(self.factors, self.columns) if c is None])


@dataclass
class Spectrum:
    """A kernel as a sum of product terms, k = Σ_i k_i; its measure is their mixture."""

    terms: list

    @property
    def factors(self) -> list:
        """Every factor of every term, in order (one draw per entry)."""
        return [f for t in self.terms for f in t.factors]

    @property
    def columns(self) -> list:
        """The columns each factor reads (None: all), in :attr:`factors` order."""
        return [c for t in self.terms for c in t.columns]

    @property
    def scales(self) -> list:
        return [s for t in self.terms for s in t.scales]

    @property
    def ard_dims(self) -> int | None:
        """The ARD dimension of the factors that read every column (None if none has one):
        the input's width. Factors on ``active_dims`` count their own columns."""
        return _ard([f for f, c in zip(self.factors, self.columns) if c is None])


@dataclass
class Draws:
    """Standardized draws: ``omega`` has one float64 (n_i, d) tensor per factor of each term
    (in :attr:`Spectrum.factors` order), ``counts`` the n_i (frequencies of term i, stored
    contiguously in term order), ``prob`` the mixture weights π_i used (float64, (m,))."""

    omega: list
    counts: list
    prob: torch.Tensor | None = None


def _unsupported(kernel) -> TypeError:
    return TypeError(f"{type(kernel).__name__} has no spectral measure torchkern can sample: "
                     f"random Fourier features need a shift-invariant kernel (RBF, Laplacian, "
                     f"Matern, RationalQuadratic, InverseMultiquadric, Periodic, and sums, "
                     f"products and c * k of these)")


def _terms(kernel, cols=None) -> list:
    """The product terms of ``kernel``, whose input columns are ``cols`` of the data (None:
    all of them); a kernel's ``active_dims`` selects among those."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a torchkern Kernel, got {type(kernel).__name__}")
    if getattr(kernel, "active_dims", None) is not None:
        dims = kernel.active_dims.tolist()
        if cols is not None and max(dims) >= len(cols):
            raise ValueError(f"{type(kernel).__name__} has active_dims={dims} but reads "
                             f"{len(cols)} columns")
        cols = dims if cols is None else [cols[i] for i in dims]
    if isinstance(kernel, ScaleKernel):
        return [Term([kernel] + t.scales, t.factors, t.columns)
                for t in _terms(kernel.base, cols)]
    if isinstance(kernel, SumKernel):
        return [t for k in kernel.kernels for t in _terms(k, cols)]
    if isinstance(kernel, ProductKernel):
        # (Σ_i a_i)(Σ_j b_j) = Σ_ij a_i b_j: multiply out, then each term is a product.
        parts = [_terms(k, cols) for k in kernel.kernels]
        if math.prod(len(p) for p in parts) > MAX_TERMS:
            raise ValueError(f"the kernel expands into more than {MAX_TERMS} product terms "
                             f"(a product of sums): random Fourier features are not supported")
        return [Term([s for t in combo for s in t.scales], [f for t in combo for f in t.factors],
                     [c for t in combo for c in t.columns])
                for combo in itertools.product(*parts)]
    if isinstance(kernel, _SUPPORTED):
        if cols is not None and kernel.ard_dims is not None and kernel.ard_dims != len(cols):
            raise ValueError(f"{type(kernel).__name__} has ard_dims={kernel.ard_dims} but "
                             f"reads {len(cols)} columns (active_dims)")
        return [Term([], [kernel], [cols])]
    raise _unsupported(kernel)


def decompose(kernel) -> Spectrum:
    """Split ``kernel`` into a sum of products of scales and supported factors, or raise
    ``TypeError``."""
    if not getattr(kernel, "vector_input", True):
        raise TypeError(f"random Fourier features need a shift-invariant kernel on vectors "
                        f"(Bochner's theorem); {type(kernel).__name__} compares structured "
                        f"inputs — use Nystroem features instead")
    terms = _terms(kernel)
    if len(terms) > MAX_TERMS:
        raise ValueError(f"the kernel has more than {MAX_TERMS} terms")
    return Spectrum(terms)


def law_params(spectrum: Spectrum) -> list:
    """The hyperparameters that shape the laws of the draws (not rescalings of them), as
    ``(name, values)`` pairs: RationalQuadratic α and Periodic lengthscales. Frequencies
    drawn at one value are wrong at another; :class:`RandomFourierFeatures` checks them."""
    out = []
    for f in spectrum.factors:
        if isinstance(f, RationalQuadratic):
            out.append(("RationalQuadratic.alpha", [float(f.alpha.detach())]))
        elif isinstance(f, Periodic):
            out.append(("Periodic.lengthscale", f.lengthscale.detach().reshape(-1).tolist()))
    return out


def _kw(generator):
    dev = generator.device if generator is not None else torch.device("cpu")
    return dict(generator=generator, dtype=torch.float64, device=dev)


def _gaussian_block(n, d, generator, orthogonal):
    """n rows distributed as N(0, I_d); with ``orthogonal`` the rows of each block of d
    are orthogonal (Yu et al. 2016): Q from the QR of a Gaussian matrix, rows rescaled by
    independent χ_d norms, so that every row keeps the law N(0, I_d)."""
    kw = _kw(generator)
    if not orthogonal or d == 1 or n == 0:
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
    kw = _kw(generator)
    dev = kw["device"]
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


def periodic_spectrum(lengthscale: float) -> torch.Tensor:
    r"""Spectral weights q_k = e^{−z} I_k(z), z = 1/ℓ², k = 0, 1, …, K, float64.

    The 1-D periodic kernel is exp(−2 sin²(πr/p)/ℓ²) = Σ_{k∈ℤ} q_|k| cos(2πkr/p), and
    q_0 + 2Σ_{k≥1} q_k = 1. K is the smallest order with 2·Σ_{k>K} q_k < 1e-16 (the
    mass left out; the returned weights are renormalized to sum to 1 over ℤ). O(1/ℓ) entries.
    Raises ``ValueError`` for ℓ < ``PERIODIC_MIN_LENGTHSCALE`` (1e-4).
    """
    ell = float(lengthscale)
    if not math.isfinite(ell) or ell < PERIODIC_MIN_LENGTHSCALE:
        raise ValueError(f"Periodic lengthscale {ell!r} is below {PERIODIC_MIN_LENGTHSCALE}: "
                         f"its spectrum needs O(1/lengthscale) Bessel weights; random Fourier "
                         f"features support lengthscale >= {PERIODIC_MIN_LENGTHSCALE}")
    z = 1.0 / (ell * ell)
    n = int(math.ceil(10.0 + 12.0 * math.sqrt(z)))  # ~12 standard deviations (variance z)
    while True:
        q = ive(np.arange(n + 1), z)
        tail = 2.0 * np.cumsum(q[::-1])[::-1]  # tail[j] = 2 Σ_{k≥j} q_k, summed small-first
        if tail[-1] < _TAIL * 1e-6:  # the mass beyond the table is negligible
            break
        n *= 2
    K = int(np.argmax(tail < _TAIL)) - 1  # tail[K+1] < 1e-16 ≤ tail[K]
    q = q[:max(K, 0) + 1]
    return torch.from_numpy(q / (q[0] + 2.0 * q[1:].sum()))


def _periodic_draw(factor, n, d, generator) -> torch.Tensor:
    """n × d integers k ~ e^{−z}I_|k|(z) per axis, times 2π (frequencies for period 1)."""
    kw = _kw(generator)
    ls = factor.lengthscale.detach().reshape(-1).tolist()
    # One table for every axis (scalar ℓ) or one per axis (ARD).
    groups = [(ls[0], list(range(d)))] if len(ls) == 1 else [(ls[j], [j]) for j in range(d)]
    out = torch.empty(n, d, dtype=torch.float64, device=kw["device"])
    for ell, cols in groups:
        q = periodic_spectrum(ell).to(kw["device"])
        K = q.numel() - 1
        cdf = torch.cumsum(torch.cat([q.flip(0), q[1:]]), 0)  # P(k ≤ j), j = −K, …, K
        u = torch.rand(n * len(cols), **kw) * cdf[-1]
        idx = torch.searchsorted(cdf, u, right=True).clamp_(max=2 * K)
        out[:, cols] = (idx - K).to(torch.float64).reshape(n, len(cols))
    return out * (2.0 * math.pi)


def _standardized(factor, n, d, generator, orthogonal) -> torch.Tensor:
    """Frequencies of ``factor`` at lengthscale 1 (c = 1 for the IMQ, period 1 for
    Periodic), float64 (n, d)."""
    if isinstance(factor, Periodic):
        return _periodic_draw(factor, n, d, generator)  # discrete per axis: no orthogonality
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
    raise _unsupported(factor)  # decompose() guards this


def term_amplitudes(spectrum: Spectrum, device=None) -> torch.Tensor:
    """a_i = k_i(0) of every term, float64 (m,), differentiable in the output scales and c."""
    amps = []
    for t in spectrum.terms:
        a = torch.ones((), dtype=torch.float64, device=device)
        for f in t.factors:
            if isinstance(f, InverseMultiquadric):
                a = a / f.c.to(device=device, dtype=torch.float64).reshape(())
        for s in t.scales:
            a = a * s.outputscale.to(device=device, dtype=torch.float64).reshape(())
        amps.append(a)
    return torch.stack(amps)


def draw(spectrum: Spectrum, n: int, d: int, generator=None, orthogonal: bool = False, *,
         min_per_term: int = 0) -> Draws:
    """Standardized draws of n frequencies.

    Beyond ``min_per_term`` frequencies reserved for every term, each frequency belongs to
    term i with probability π_i = a_i/Σa_j (at the current hyperparameters); term i's n_i
    frequencies are stored contiguously, in term order. A single product draws no
    component (the random stream is the same as before sums were supported).
    """
    m = len(spectrum.terms)
    dev = _kw(generator)["device"]
    if m == 1:
        counts, prob = [n], torch.ones(1, dtype=torch.float64, device=dev)
    else:
        free = n - m * min_per_term
        if free < 0:
            raise ValueError(f"{n} frequencies cannot give {min_per_term} to each of the "
                             f"{m} terms of the kernel")
        a = term_amplitudes(spectrum, dev).detach()
        prob = a / a.sum()
        counts = [min_per_term] * m
        if free:
            comp = torch.multinomial(prob, free, replacement=True, generator=generator)
            counts = [c + int(b) for c, b in zip(counts, torch.bincount(comp, minlength=m))]
    omega = [_embedded(f, cols, n_i, d, generator, orthogonal)
             for t, n_i in zip(spectrum.terms, counts) for f, cols in zip(t.factors, t.columns)]
    return Draws(omega, counts, prob)


def _embedded(factor, cols, n, d, generator, orthogonal) -> torch.Tensor:
    """:func:`_standardized` draws of a factor that reads the columns ``cols`` of
    d-dimensional data (None: all): drawn in len(cols) dimensions (the factor's own
    kernel), zero in the other columns, (n, d)."""
    if cols is None:
        return _standardized(factor, n, d, generator, orthogonal)
    if max(cols) >= d:
        raise ValueError(f"{type(factor).__name__} reads the columns {cols} (active_dims) "
                         f"but the data has {d} features")
    out = torch.zeros(n, d, **{k: v for k, v in _kw(generator).items() if k != "generator"})
    out[:, cols] = _standardized(factor, n, len(cols), generator, orthogonal)
    return out


def _divisor(f, device):
    if isinstance(f, Periodic):
        return f.period.to(device=device, dtype=torch.float64)
    ls = f.lengthscale.to(device=device, dtype=torch.float64)
    if isinstance(f, InverseMultiquadric):
        ls = ls * f.c.to(device=device, dtype=torch.float64).reshape(())
    return ls


def assemble(spectrum: Spectrum, draws: Draws, like: torch.Tensor | None = None):
    """Frequencies W (n, d) and amplitudes at the kernel's *current* hyperparameters.

    The amplitude is a scalar a = k(0) for a single product term; for a sum it is the
    vector (n,) with entry a_i·n/n_i on the frequencies of term i (see the module
    docstring), so that in both cases (1/n)·Σ_j amp_j cos(w_jᵀz) estimates κ(z) — without
    bias when every term has a frequency. Differentiable with respect to lengthscales,
    periods, output scales and the IMQ constant c. Float64 on the device of the draws.
    """
    dev = draws.omega[0].device
    it = iter(draws.omega)
    blocks = []
    for t in spectrum.terms:
        w = None
        for f, cols in zip(t.factors, t.columns):
            omega = next(it)
            if cols is None:
                wf = omega / _divisor(f, dev)
            else:  # its columns scaled, the others (zero) left: one factor per column
                idx = torch.as_tensor(cols, device=dev)
                inv = (1 / _divisor(f, dev)).reshape(-1).expand(len(cols))
                wf = omega * torch.ones(omega.shape[1], dtype=torch.float64,
                                        device=dev).index_copy(0, idx, inv)
            w = wf if w is None else w + wf
        blocks.append(w)
    W = blocks[0] if len(blocks) == 1 else torch.cat(blocks)
    a = term_amplitudes(spectrum, dev)
    if len(spectrum.terms) == 1:
        return W, a[0]
    counts = torch.as_tensor(draws.counts, device=dev)
    n = int(counts.sum())
    per_freq = a * n / counts.clamp_min(1).to(torch.float64)  # terms with n_i = 0 get no rows
    return W, torch.repeat_interleave(per_freq, counts)


def sample_frequencies(kernel, n: int, d: int, generator=None, dtype=torch.float64, *,
                       orthogonal: bool = False):
    r"""Draw n frequencies of ``kernel``'s spectral measure in dimension d.

    Returns ``(W, a)``: W of shape (n, d), i.i.d. from the (mixture) measure, and the
    amplitude a = κ(0) such that :math:`k(x, y) = a\,\mathbb{E}[\cos(w^\top(x - y))]`.
    Raises ``TypeError`` for kernels that are not shift-invariant. See the module docstring
    for the laws. Cost O(n d).
    """
    spectrum = decompose(kernel)
    dims = spectrum.ard_dims
    if dims is not None and dims != d:
        raise ValueError(f"d={d} but the kernel has ard_dims={dims}")
    draws = draw(spectrum, n, d, as_generator(generator), orthogonal)
    W, _ = assemble(spectrum, draws)
    amp = term_amplitudes(spectrum, W.device).sum()
    return W.to(dtype), amp.to(dtype)
