r"""Random Fourier features (Rahimi and Recht, 2007)."""
from __future__ import annotations

import math

import torch
from torch import nn

from .._validation import as_tensor, check_int, is_int
from ..gram import FeatureKernelMatrix
from ..kernels.base import upcast_half
from .spectral import Draws, as_generator, assemble, decompose, draw, law_params

__all__ = ["RandomFourierFeatures"]

_VARIANTS = ("paired", "offset")


class RandomFourierFeatures(nn.Module):
    r"""Random Fourier feature map Φ with Φ(x)ᵀΦ(y) ≈ k(x, y) for a shift-invariant kernel.

    By Bochner's theorem k(x, y) = a·E_w[cos(wᵀ(x − y))] with w drawn from the kernel's
    spectral measure (see :mod:`torchkern.approx.spectral`). Drawing D frequencies
    w₁, …, w_D gives, with p = ``n_features``,

    ``variant="paired"`` (default; D = p/2)
        .. math:: \Phi(x) = \sqrt{a/D}\,[\cos(Wx),\ \sin(Wx)] \in \mathbb{R}^{p}

    ``variant="offset"`` (D = p; the map z_w of Rahimi and Recht 2007, §3)
        .. math:: \Phi(x) = \sqrt{2a/p}\,\cos(Wx + b),\qquad b_j \sim U[0, 2\pi]

    Both are unbiased: E[Φ(x)ᵀΦ(y)] = k(x, y). The paired variant is the default
    because at equal p its variance is lower for every kernel whose κ(2z) ≤ 2κ(z)² — the
    Gaussian among them — and it is exact on the diagonal, Φ(x)ᵀΦ(x) = a = k(x, x)
    (Sutherland and Schneider, 2015).

    For a sum k = Σ_i k_i the measure is the mixture of the terms' measures with weights
    π_i = k_i(0)/k(0): each term gets one frequency, and each other frequency belongs to
    term i with probability π_i. The D_i features of term i are scaled by √(a_i/D_i), with
    a_i = k_i(0) at the current hyperparameters (≈ √(k(0)/D) right after the draw): the
    estimate stays unbiased and exactly linear in each term's output scale when the scales
    are learned, and paired features stay exact on the diagonal. Needs D ≥ the number of
    terms.

    Frequencies are stored standardized (for lengthscale 1) as buffers and divided by the
    kernel's *current* lengthscale(s) (period, for Periodic) in every forward pass, so the
    map stays differentiable in the kernel's hyperparameters (lengthscale, ARD
    lengthscales, outputscale, IMQ c, period): the kernel is a sub-module and its parameters
    are this module's parameters. The RationalQuadratic α and the Periodic lengthscale shape
    the law of the draws and are fixed at their values at the draw (changing them raises
    RuntimeError until :meth:`resample`).

    Parameters
    ----------
    kernel : Kernel
        Any shift-invariant kernel of :mod:`torchkern.kernels`: RBF (ARD or not), Laplacian,
        Matern (ν = 1/2, 3/2, 5/2), RationalQuadratic, InverseMultiquadric, Periodic (ARD
        or not; lengthscale >= 1e-4), and sums, products and ``c * k`` of these (products
        of sums are multiplied out), on all columns or on their ``active_dims`` (a factor
        on columns A draws its frequencies in len(A) dimensions, zero on the other columns).
        Other kernels raise TypeError. The module holds this kernel object itself (no
        copy), so gradients reach it.
    n_features : int
        p, the dimension of the features (even for ``variant="paired"``).
    in_features : int, optional
        d. Frequencies are drawn at construction when d is known (from here or from an ARD
        kernel), otherwise at the first call, from the data's dimension.
    orthogonal : bool
        Orthogonal random features (Yu et al., 2016): within each block of d frequencies
        the standardized directions are orthogonal and their norms independent χ_d, so every
        frequency keeps its law and the estimate stays unbiased, with lower variance. Works for
        every supported radial factor (the standardized measures of all but Periodic are
        radial); Periodic factors are drawn independently per axis regardless. The variance
        reduction is proven for the Gaussian.
    variant : {"paired", "offset"}
    random_state : None, int or torch.Generator
        Source of the frequencies (and phases).

    Attributes
    ----------
    omega : list of Tensor
        Standardized frequencies, one (D, d) float64 buffer per kernel factor; for a sum,
        one (D_i, d) buffer per factor of each term i, the terms' frequencies stacked in
        term order.
    term_counts : Tensor
        Sums only: the D_i (long), the number of frequencies of each term.
    phase : Tensor or None
        The phases b (offset variant).

    Notes
    -----
    Cost: O(n·p·d) time and O(n·p) memory for n points; the approximate Gram matrix
    ΦΦᵀ is returned lazily by :meth:`kernel_matrix` (products cost O(n·p) per column).
    The approximation error of one entry is O(1/√p) (Hoeffding's inequality; Rahimi and
    Recht 2007, Claim 1, for the uniform bound).

    References
    ----------
    A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.
    F. Yu et al., "Orthogonal random features", NeurIPS 2016.
    D. Sutherland and J. Schneider, "On the error of random Fourier features", UAI 2015.

    Examples
    --------
    >>> import torch, torchkern
    >>> from torchkern.approx import RandomFourierFeatures
    >>> X = torch.randn(500, 3, dtype=torch.float64)
    >>> rff = RandomFourierFeatures(torchkern.RBF(lengthscale=1.5), 2000, random_state=0)
    >>> Phi = rff(X)                   # (500, 2000)
    >>> K_approx = rff.kernel_matrix(X)  # lazy Φ Φᵀ, a FeatureKernelMatrix
    >>> Phi.shape
    torch.Size([500, 2000])
    """

    def __init__(self, kernel, n_features: int, *, in_features: int | None = None,
                 orthogonal: bool = False, variant: str = "paired", random_state=None):
        super().__init__()
        self.kernel = kernel
        self.n_features = n_features
        self.orthogonal = orthogonal
        self.variant = variant
        self._generator = as_generator(random_state)
        if in_features is not None and (not is_int(in_features) or in_features < 1):
            raise ValueError(f"in_features must be a positive int, got {in_features!r}")
        self._fixed_d = in_features   # d given here, to resample() or by the first data
        self._setup(in_features)
        if self.in_features is not None:
            self.resample()

    def _setup(self, in_features=None) -> None:
        """Check the arguments and derive what depends on them (the kernel's spectral
        decomposition, the number of frequencies, the buffers), for the construction and
        again when ``kernel``, ``n_features``, ``variant`` or ``orthogonal`` were set after
        it: a replaced kernel kept the old one's spectrum (the map approximated the old
        kernel), a changed ``n_features`` was ignored and ``variant="offset"`` gave half
        the features (the kernel at half its value)."""
        kernel, n_features, variant = self.kernel, self.n_features, self.variant
        spectrum = decompose(kernel)  # TypeError for unsupported kernels
        if not is_int(n_features) or n_features < 1:
            raise ValueError(f"n_features must be a positive int, got {n_features!r}")
        if variant not in _VARIANTS:
            raise ValueError(f"variant must be one of {_VARIANTS}, got {variant!r}")
        if variant == "paired" and n_features % 2:
            raise ValueError(f"n_features must be even for variant='paired' (cos and sin "
                             f"of each frequency), got {n_features}")
        if not isinstance(self.orthogonal, bool):
            raise TypeError(f"orthogonal must be a bool, got {type(self.orthogonal).__name__}")
        ard = spectrum.ard_dims
        if in_features is not None and ard is not None and ard != in_features:
            raise ValueError(f"in_features={in_features} but the kernel has ard_dims={ard}")
        n_frequencies = n_features // 2 if variant == "paired" else n_features
        mixture = len(spectrum.terms) > 1
        if mixture and n_frequencies < len(spectrum.terms):
            raise ValueError(f"n_features={n_features} gives {n_frequencies} "
                             f"frequencies, fewer than the {len(spectrum.terms)} terms of the "
                             f"kernel")
        for name in list(self._buffers):  # the draws of a previous setup
            del self._buffers[name]
        self._spectrum, self._mixture = spectrum, mixture
        self.in_features = in_features if in_features is not None else ard
        self.n_frequencies = n_frequencies
        self._n_factors = len(spectrum.factors)
        for q in range(self._n_factors):
            self.register_buffer(f"omega_{q}", None)
        if mixture:  # a sum: how many frequencies each term has
            self.register_buffer("term_counts", None)
        self.register_buffer("phase", None)
        self._law_at_draw = None
        self._config = self._current_config()

    def _current_config(self) -> tuple:
        return (self.kernel, self.n_features, self.variant, self.orthogonal)

    def _check_config(self) -> None:
        """Set up again (the frequencies to be redrawn) if an argument changed, keeping a
        d that was given or read from data (it was reset: resample() then raised 'in_features
        is unknown' and data of another dimension was taken)."""
        now = self._current_config()
        if len(now) != len(self._config) or any(a is not b and a != b
                                                  for a, b in zip(now, self._config)):
            self._setup(self._fixed_d)

    def _current(self) -> None:
        """The draws for the current arguments, drawn now if d is known: what ``omega`` and
        :meth:`frequencies` read (they returned the draws of a replaced kernel)."""
        self._check_config()
        if self.omega_0 is None and self.in_features is not None:
            self.resample()

    # -- frequencies -------------------------------------------------------------------
    def resample(self, in_features: int | None = None) -> "RandomFourierFeatures":
        """Draw new frequencies (and phases) from the module's random stream; returns self.

        ``in_features`` (d) must agree with an ARD kernel's number of lengthscales."""
        self._check_config()
        if in_features is not None:
            check_int(in_features, "in_features")
        d = in_features if in_features is not None else self.in_features
        if d is None:
            raise ValueError("in_features is unknown: pass it or call the map on data first")
        # resample(5) for 3 ARD lengthscales was kept, and the next call failed in a
        # broadcast ("size of tensor a (5) must match ... (3)") naming nothing
        ard = self._spectrum.ard_dims
        if ard is not None and d != ard:
            raise ValueError(f"in_features={d} but the kernel has {ard} ARD lengthscales "
                             f"(ard_dims={ard})")
        if in_features is not None:
            self._fixed_d = in_features
        gen = self._generator
        draws = draw(self._spectrum, self.n_frequencies, d, gen, self.orthogonal, min_per_term=1)
        device = next((b.device for b in self.buffers() if b is not None), None)
        for q, omega in enumerate(draws.omega):
            setattr(self, f"omega_{q}", omega if device is None else omega.to(device))
        if self._mixture:
            counts = torch.tensor(draws.counts, dtype=torch.long, device=draws.omega[0].device)
            self.term_counts = counts if device is None else counts.to(device)
        if self.variant == "offset":
            dev = gen.device if gen is not None else torch.device("cpu")
            b = torch.rand(self.n_frequencies, generator=gen, dtype=torch.float64, device=dev)
            self.phase = (2 * math.pi) * (b if device is None else b.to(device))
        self.in_features = d
        self._law_at_draw = law_params(self._spectrum)
        return self

    def _buffer_names(self) -> list:
        extra = ["term_counts"] if self._mixture else []
        return [f"omega_{q}" for q in range(self._n_factors)] + extra + ["phase"]

    @property
    def omega(self) -> list:
        self._current()
        return [getattr(self, f"omega_{q}") for q in range(self._n_factors)]

    def frequencies(self):
        """``(W, a)``: the frequencies (D, d) at the kernel's current hyperparameters and
        the amplitude, both float64 and differentiable: a = k(x, x) (a scalar) for a
        product, and for a sum the per-frequency weights a_i·D/D_i (D,) of each frequency's
        term i (see :func:`torchkern.approx.spectral.assemble`)."""
        self._current()
        if self.omega_0 is None:
            raise RuntimeError("the frequencies are not drawn yet: call the map on data "
                               "(or pass in_features) first")
        for (name, now), (_, then) in zip(law_params(self._spectrum), self._law_at_draw):
            if any(abs(a - b) > 1e-6 * abs(b) for a, b in zip(now, then)):
                raise RuntimeError(f"{name} changed since the frequencies were drawn ({then} "
                                   f"-> {now}); it shapes the law of the frequencies and is "
                                   f"not learnable through random features — call resample() "
                                   f"(or keep it fixed)")
        counts = self.term_counts.tolist() if self._mixture else [self.n_frequencies]
        draws = Draws(self.omega, counts)
        return assemble(self._spectrum, draws)

    # -- the map -----------------------------------------------------------------------
    def forward(self, X) -> torch.Tensor:
        """Φ(X), shape (n, n_features), in X's dtype (float32 for float16 / bfloat16 data,
        as the kernels compute) and on X's device."""
        X = upcast_half(as_tensor(X, "X"))
        self._check_config()
        if self.omega_0 is None:
            self.resample(X.shape[1] if self.in_features is None else None)
            for name in self._buffer_names():
                if getattr(self, name) is not None:
                    setattr(self, name, getattr(self, name).to(X.device))
        if X.shape[1] != self.in_features:
            raise ValueError(f"X has {X.shape[1]} features but the random features were "
                             f"drawn for {self.in_features}")
        W, amp = self.frequencies()
        W = W.to(dtype=X.dtype, device=X.device)
        amp = amp.to(dtype=X.dtype, device=X.device)
        D = self.n_frequencies
        if self.variant == "paired":
            # [cos(Wx), sin(Wx)] = cos([W; W]x − [0, π/2]): one product, one cosine.
            W = torch.cat([W, W])
            shift = torch.cat([X.new_zeros(D), X.new_full((D,), -0.5 * math.pi)])
            scale = torch.sqrt(amp / D)
            if scale.dim():  # a sum: one weight per frequency, for its cos and its sin
                scale = torch.cat([scale, scale])
        else:
            shift = self.phase.to(dtype=X.dtype, device=X.device)
            scale = torch.sqrt(2.0 * amp / self.n_features)
        Z = torch.addmm(shift, X, W.T)
        if torch.is_grad_enabled() and (X.requires_grad or W.requires_grad or scale.requires_grad):
            return scale * torch.cos(Z)
        return Z.cos_().mul_(scale)  # in place: the (n, p) output is the only large buffer

    def transform(self, X) -> torch.Tensor:
        """Same as calling the module: Φ(X)."""
        return self(X)

    def kernel_matrix(self, X, Y=None) -> FeatureKernelMatrix:
        r"""The approximate Gram matrix Φ(X)Φ(Y)ᵀ, lazy (:class:`~torchkern.gram.FeatureKernelMatrix`).

        ``Y=None`` means Y = X. Products cost O((n + m)·p) per column; gradients reach the
        kernel's hyperparameters.
        """
        phi_x = self(X)
        return FeatureKernelMatrix(phi_x, None if Y is None else self(Y))

    def as_kernel(self):
        """This map as a torchkern :class:`~torchkern.approx.ApproximateKernel`, usable by
        every estimator: ``KernelRidge(kernel=rff.as_kernel())``."""
        from .kernel import ApproximateKernel
        return ApproximateKernel(self)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Buffers drawn lazily are None until the first call; a saved map restores them.
        for name in self._buffer_names():
            key = prefix + name
            if key in state_dict and getattr(self, name) is None:
                setattr(self, name, torch.empty_like(state_dict[key]))
                if name == "omega_0":
                    self.in_features = self._fixed_d = state_dict[key].shape[1]
                    self._law_at_draw = law_params(self._spectrum)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return (f"n_features={self.n_features}, in_features={self.in_features}, "
                f"orthogonal={self.orthogonal}, variant={self.variant!r}")
