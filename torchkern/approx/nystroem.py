r"""Nyström features: projection onto the span of a few anchor points."""
from __future__ import annotations

import warnings

import torch
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin

from typing import NamedTuple

from .._estimator import Estimator, check_fitted, input_matrix, is_precomputed, resolve_kernel
from .._validation import as_generator, caller_stacklevel, is_int, real_tensor
from ..gram import FeatureKernelMatrix
from ..inputs import check_fitted_input, n_features, take
from ..linalg import PivotedCholesky
from ..linalg._common import _eigh, uniform_centers  # noqa: F401 (re-exported)
from ._kmeans import kmeans

__all__ = ["Nystroem", "NystromBasis", "nystrom_basis", "nystrom_whitening", "uniform_centers"]

_SELECTIONS = ("uniform", "kmeans", "greedy")
_F64 = torch.float64


class NystromBasis(NamedTuple):
    """The eigenbasis of K_mm = UΛUᵀ kept by :func:`nystrom_basis`.

    vectors : (m, r) float64, U restricted to the kept eigenvalues
    values : (r,) float64, those eigenvalues (ascending)
    spectrum : (m,) float64, every eigenvalue of K_mm (ascending)
    """

    vectors: torch.Tensor
    values: torch.Tensor
    spectrum: torch.Tensor

    @property
    def whitening(self) -> torch.Tensor:
        """M = U Λ^{-1/2}, (m, r): the Nyström features of x are k_m(x)ᵀ M, and
        M Mᵀ = K_mm⁺."""
        return self.vectors / self.values.sqrt()

    @property
    def inv_sqrt(self) -> torch.Tensor:
        """K_mm^{+1/2} = U Λ^{-1/2} Uᵀ, (m, m): the symmetric pseudo-inverse square root."""
        return self.whitening @ self.vectors.T


def nystrom_basis(Kmm: torch.Tensor, rcond: float) -> NystromBasis:
    r"""The Nyström eigenbasis of the centers' Gram matrix, in float64.

    :math:`K_{mm} = U\Lambda U^\top` (symmetrized) restricted to the eigenvalues
    λ > ``rcond``·λ_max, so that duplicate or nearly duplicate centers (a numerically
    singular K_mm) give a pseudo-inverse instead of round-off blown up. With M = UΛ^{-1/2}
    the Nyström features ψ(x) = k_m(x)ᵀM satisfy ψ(x)ᵀψ(y) = k_m(x)ᵀK_mm⁺k_m(y)
    (Williams and Seeger, "Using the Nyström method to speed up kernel machines",
    NeurIPS 2001). Cost O(m³).
    """
    K = Kmm.to(_F64)
    evals, U = _eigh((K + K.T) / 2)
    keep = evals > rcond * evals[-1].clamp_min(0)
    if not bool(keep.any()):
        raise ValueError("the kernel matrix of the Nyström centers is zero: no Nyström features")
    return NystromBasis(U[:, keep], evals[keep], evals)


def nystrom_whitening(Kmm: torch.Tensor) -> torch.Tensor:
    r"""A whitening M of the centers' Gram matrix, :math:`M^\top K_{mm} M \approx I`, float64.

    M = T⁻¹ for the upper Cholesky factor :math:`T^\top T = K_{mm} + jI`, jitter
    j = m·eps₆₄·max_i (K_mm)_ii (Falkon's preconditioner, Rudi, Carratino and Rosasco,
    "FALKON: an optimal large scale kernel method", NeurIPS 2017): the Nyström features
    k_m(x)ᵀM of x span what those of :func:`nystrom_basis` span, and M Mᵀ = (K_mm + jI)⁻¹.
    Where the factorization fails (K_mm indefinite beyond the jitter) it is the
    eigenbasis whitening UΛ^{-1/2} of :func:`nystrom_basis`. Cost O(m³/3) flops for the
    Cholesky factor and its triangular inverse (an eigendecomposition costs several
    times more, and scales worse on few cores).
    """
    K = Kmm.to(_F64)
    K = (K + K.T) / 2
    m = K.shape[0]
    jitter = m * torch.finfo(_F64).eps * float(K.diagonal().max().clamp(min=0))
    eye = torch.eye(m, dtype=_F64, device=K.device)
    T, info = torch.linalg.cholesky_ex(K + jitter * eye, upper=True)
    if int(info) == 0 and jitter > 0:
        return torch.linalg.solve_triangular(T, eye, upper=True)
    return nystrom_basis(K, m * torch.finfo(_F64).eps).whitening


class Nystroem(ClassNamePrefixFeaturesOutMixin, TransformerMixin, Estimator):
    r"""Nyström feature map ψ(x) = K_ZZ^{−1/2} k_Z(x) from m anchor points Z.

    ψ(x)ᵀψ(y) = k_Z(x)ᵀ K_ZZ⁺ k_Z(y) is the inner product of the orthogonal projections of
    φ(x) and φ(y) onto span{φ(z₁), …, φ(z_m)} in the RKHS (Williams and Seeger 2001), so
    on training data ΨΨᵀ = K_XZ K_ZZ⁺ K_ZX ⪯ K, the best approximation of K whose column space is that of
    K_XZ. The anchors are chosen by ``center_selection``:

    ``"uniform"``
        m training points drawn uniformly without replacement (Williams and Seeger, 2001).
    ``"kmeans"``
        the m centroids of k-means on the training data — "clustered Nyström" (Zhang and
        Kwok, 2008), points of ℝ^d that need not be data points. Runs in torch, on the data's
        device.
    ``"greedy"``
        the pivots of a greedy incomplete (pivoted) Cholesky factorization of K: each step
        takes the point whose residual k(x, x) − k_Z(x)ᵀK_ZZ⁻¹k_Z(x) is largest (Bach and
        Jordan, 2002). Uses only the
        diagonal and m columns of the lazy Gram matrix
        (:class:`torchkern.linalg.PivotedCholesky`); stops early when the residual is zero.

    K_ZZ^{−1/2} is computed in float64 by an eigendecomposition K_ZZ = UΛUᵀ; eigenvalues
    below ``rcond``·λ_max are dropped (a pseudo-inverse square root), so duplicate or nearly
    duplicate anchors do no harm.

    Parameters
    ----------
    kernel : Kernel or None
        Any torchkern kernel (``None`` → ``RBF()``); a private copy is fitted.
    n_components : int
        m, the number of anchors (and of features). More than the n training points is
        n, with a warning (as scikit-learn's ``Nystroem``: the full kernel, whose
        features are exact), so the default 100 also fits a smaller sample.
    center_selection : {"uniform", "kmeans", "greedy"}
    random_state : None, int or torch.Generator
        Draw of the uniform anchors and of the k-means++ seeding.
    rcond : float, optional
        Relative eigenvalue cut-off; default m·eps of the data's dtype.

    Attributes
    ----------
    kernel_ : Kernel
        The fitted copy of ``kernel``.
    components_ : Tensor of shape (m, d) or KernelInput
        The anchor points Z (a sub-collection of the input for structured kernels).
    component_indices_ : LongTensor of shape (m,) or None
        Their rows in the training data (None for k-means centroids).
    normalization_ : Tensor of shape (m, m), float64
        K_ZZ^{−1/2} (pseudo-inverse square root).
    eigenvalues_ : Tensor of shape (m,), float64
        The eigenvalues of K_ZZ, ascending.
    rank_ : int
        Number of eigenvalues kept.
    n_components_ : int
        m actually used (the greedy selection stops early once the residual vanishes).
    n_features_in_ : int
        d (vector inputs only).

    Notes
    -----
    Cost: fit takes O(m²) kernel evaluations and O(m³) for the eigendecomposition, plus O(n·m)
    kernel evaluations and O(n·m²) flops for the greedy selection, or O(n·m·d) per k-means
    iteration. ``transform`` costs O(n·m) kernel evaluations and O(n·m²) flops and never
    forms an n × n matrix. Same features as ``sklearn.kernel_approximation.Nystroem`` up to
    an orthogonal transform when both use the same anchors.

    Examples
    --------
    >>> import torch, torchkern
    >>> from torchkern.approx import Nystroem
    >>> X = torch.randn(1000, 5, dtype=torch.float64)
    >>> ny = Nystroem(torchkern.RBF(lengthscale=2.0), n_components=100,
    ...               center_selection="greedy").fit(X)
    >>> ny.transform(X).shape
    torch.Size([1000, 100])
    >>> K_approx = ny.kernel_matrix(X)   # lazy Ψ Ψᵀ, a FeatureKernelMatrix
    """

    def __init__(self, kernel=None, n_components: int = 100, *, center_selection: str = "uniform",
                 random_state=None, rcond: float | None = None):
        self.kernel = kernel
        self.n_components = n_components
        self.center_selection = center_selection
        self.random_state = random_state
        self.rcond = rcond

    def _check_params(self, n):
        m = self.n_components
        if not is_int(m) or m < 1:
            raise ValueError(f"n_components must be a positive int, got {m!r}")
        if self.center_selection not in _SELECTIONS:
            raise ValueError(f"center_selection must be one of {_SELECTIONS}, "
                             f"got {self.center_selection!r}")
        if self.rcond is not None and not (0 <= float(real_tensor(self.rcond, "rcond")) < 1):
            raise ValueError(f"rcond must be in [0, 1), got {self.rcond!r}")

    def fit(self, X, y=None) -> "Nystroem":
        """Choose the anchors among / from X and factor K_ZZ. Returns self."""
        kernel = resolve_kernel(self.kernel)
        if is_precomputed(kernel):
            raise ValueError("kernel='precomputed' is not supported: Nystroem evaluates the "
                             "kernel between new points and the anchors")
        X = input_matrix(kernel, X, "X")
        n, m = X.shape[0], self.n_components
        self._check_params(n)
        if m > n:
            warnings.warn(f"Nystroem: n_components={m} is larger than the number of samples "
                          f"n={n}; n anchors are used (the full kernel: exact features, "
                          f"and its O(n²) cost)", UserWarning, stacklevel=caller_stacklevel())
            m = n
        if self.center_selection == "kmeans" and n_features(X) is None:
            raise ValueError(f"center_selection='kmeans' needs vector inputs (centroids are "
                             f"points of R^d), got a {type(X).__name__}; use 'uniform' or "
                             f"'greedy'")
        idx = None
        with torch.no_grad():
            if self.center_selection == "uniform":
                idx = uniform_centers(n, m, self.random_state, X.device)
            elif self.center_selection == "greedy":
                K = kernel(X, backend="blocked")  # only its diagonal and m columns are used
                idx = PivotedCholesky(K, m, 1.0, tol=0.0).pivots.to(X.device)
            if idx is not None:
                Z = take(X, idx)
            else:
                Z = kmeans(X, m, as_generator(self.random_state))
            # in float64 unless the kernel's parameters fix the dtype (a FeatureKernel's
            # network)
            Kzz = kernel(Z.to(dtype=_F64) if kernel.accepts_dtype(_F64) else Z,
                         backend="dense").to_dense()
        rcond = self.rcond if self.rcond is not None else Z.shape[0] * torch.finfo(X.dtype).eps
        basis = nystrom_basis(Kzz, rcond)
        self.kernel_ = kernel
        self.components_ = Z
        self.component_indices_ = idx
        self.normalization_ = basis.inv_sqrt
        self.eigenvalues_ = basis.spectrum
        self.rank_ = basis.values.numel()
        self.n_components_ = Z.shape[0]
        d = n_features(X)
        if d is not None:
            self.n_features_in_ = d
        return self

    @property
    def _n_features_out(self):
        """Number of features (``get_feature_names_out``: nystroem0, nystroem1, …)."""
        return self.n_components_

    def transform(self, X) -> torch.Tensor:
        """ψ(X) = k(X, Z) K_ZZ^{−1/2}, shape (n, ``n_components_``), in X's dtype and device."""
        check_fitted(self, "normalization_")
        X = input_matrix(self.kernel_, X, "X")
        Z = self.components_.to(dtype=X.dtype, device=X.device)
        X = check_fitted_input(self.kernel_, X, Z, estimator=self)
        N = self.normalization_.to(dtype=X.dtype, device=X.device)
        K = self.kernel_(X, Z, backend="blocked")
        if torch.is_grad_enabled() and getattr(X, "requires_grad", False):
            return torch.cat([B @ N for _, _, B in K.row_blocks()])
        with torch.no_grad():  # each block written in place: one (n, m) output, no second copy
            out = torch.empty(K.shape[0], N.shape[1], dtype=N.dtype, device=N.device)
            for s, e, B in K.row_blocks():
                torch.matmul(B, N, out=out[s:e])
            return out

    def kernel_matrix(self, X, Y=None) -> FeatureKernelMatrix:
        """The approximate Gram matrix ψ(X)ψ(Y)ᵀ, lazy (``Y=None`` means Y = X)."""
        psi_x = self.transform(X)
        return FeatureKernelMatrix(psi_x, None if Y is None else self.transform(Y))

    def as_kernel(self):
        """The fitted map as an :class:`~torchkern.approx.ApproximateKernel`."""
        check_fitted(self, "normalization_")
        from .kernel import ApproximateKernel
        return ApproximateKernel(self)
