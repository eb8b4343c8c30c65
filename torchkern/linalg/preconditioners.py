"""Low-rank-plus-ridge preconditioners for A = K + λI, K a kernel matrix.

Both build a factor L (n × k, float64) with K ≈ L Lᵀ from the diagonal and a few
columns of K, and apply (L Lᵀ + λI)⁻¹ by the Woodbury identity (PivotedCholesky also
(L Lᵀ + diag(λ))⁻¹ for a per-sample λ). They also give log det(L Lᵀ + λI) and a factor
S with S Sᵀ = (L Lᵀ + λI)⁻¹ (``inv_sqrt``: S, ``inv_sqrt_t``: Sᵀ; S = (L Lᵀ + λI)^{-1/2}
for a scalar λ), which :func:`torchkern.linalg.logdet` uses to whiten the operator before
stochastic Lanczos quadrature.

Column protocol: K is a dense tensor, or an object with ``K.diag()`` (the diagonal,
shape (n,)) and ``K.cols(idx)`` (the dense columns K[:, idx], shape (n, len(idx)),
for a 1-D LongTensor ``idx``). ``K`` itself is never multiplied or materialized.
"""

import math

import torch

from .._validation import check_positive, check_sample_weight, is_int, real_tensor
from ._common import _check_operator, _reduce, _rows, _sharded, uniform_centers

_FLOAT64 = torch.float64


def _diagonal(K):
    if isinstance(K, torch.Tensor):
        return K.diagonal()
    diag = getattr(K, "diag", None)
    if not callable(diag):
        raise TypeError(f"K must be a tensor or provide diag() and cols(idx), got {type(K).__name__}")
    return diag()


def _columns(K, idx):
    if isinstance(K, torch.Tensor):
        return K[:, idx]
    cols = getattr(K, "cols", None)
    if not callable(cols):
        raise TypeError(f"K must be a tensor or provide diag() and cols(idx), got {type(K).__name__}")
    return cols(idx)


def _check_lam(lam, n=None):
    """λ as a float, or (``n`` given: a per-sample ridge) as a float64 (n,) tensor > 0."""
    if n is None or real_tensor(lam, "lam").numel() == 1:
        check_positive(lam, "lam")  # a string was float()'s message, naming no argument
        return float(lam)
    t = check_sample_weight(real_tensor(lam, "lam").detach(), n, min_positive=0, name="lam")
    if not bool((t > 0).all()):
        i = int((t <= 0).nonzero()[0, 0])
        raise ValueError(f"lam must be > 0, got lam[{i}] = {float(t[i])!r}")
    return t


def _scale_rows(scale, R):
    return scale[:, None] * R if R.ndim == 2 else scale * R


class _WoodburyPreconditioner:
    """Applies (L Lᵀ + λI)⁻¹ R = (R − L (λI + LᵀL)⁻¹ Lᵀ R) / λ in float64; for a
    per-sample λ (a tensor, D = diag(λ)) the same on the scaled factor D^{-1/2} L:
    (L Lᵀ + D)⁻¹ = D^{-1/2} (I + D^{-1/2} L Lᵀ D^{-1/2})⁻¹ D^{-1/2}."""

    def __init__(self, L, lam, sharded_by=None):
        # sharded_by: a row-sharded K (torchkern.distributed) whose local rows L holds;
        # LᵀL and LᵀR are then all-reduced.
        self.L = L
        self.lam = lam
        self._sharded_by = sharded_by
        self._scale = None  # D^{-1/2} for a per-sample λ
        if isinstance(lam, torch.Tensor):
            self._scale = lam.to(device=L.device, dtype=_FLOAT64).rsqrt()
            L = L * self._scale[:, None]
            lam = 1.0
        self._Ls, self._ridge = L, lam
        core = _reduce(sharded_by, L.T @ L)
        core.diagonal().add_(lam)
        self._core_chol = torch.linalg.cholesky(core)

    @property
    def rank(self):
        """Number of columns of the low-rank factor L."""
        return self.L.shape[1]

    @property
    def shape(self):
        """(n, n): the order of the matrix it approximates (this process's rows when
        sharded), which the solvers check against A."""
        return (self.L.shape[0], self.L.shape[0])

    def with_lam(self, lam):
        """The same factor L with another ridge λ (a float; unsharded, also a per-sample
        (n,) array): (L Lᵀ + λI)⁻¹, O(n k²) to build.

        For a path of regularizations (cross-validation over λ) without new columns of K.
        """
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._sqrt = None
        n = None if self._sharded_by is not None else self.L.shape[0]
        _WoodburyPreconditioner.__init__(new, self.L, _check_lam(lam, n), self._sharded_by)
        return new

    def logdet(self) -> torch.Tensor:
        """log det(L Lᵀ + λI) = log det(λI_k + LᵀL) + (n − k)·log λ, float64, O(k) (for a
        per-sample λ, log det(I_k + Lᵀ D⁻¹ L) + Σ log λ_i, O(n))."""
        n, k = self.L.shape
        ld = 2 * self._core_chol.diagonal().log().sum()
        if self._scale is not None:
            return ld - 2 * self._scale.log().sum()
        return ld + (n - k) * math.log(self.lam)

    def inv_sqrt(self, R):
        r"""S R, S Sᵀ = (L Lᵀ + λI)⁻¹, in O(n·k) per column (float64 inside, R's dtype
        out): S = (L Lᵀ + λI)^{-1/2}, or D^{-1/2}(I + L_s L_sᵀ)^{-1/2} for a per-sample λ
        (L_s = D^{-1/2} L; :meth:`inv_sqrt_t` applies Sᵀ).

        With L = QR and R Rᵀ = WΣWᵀ, L Lᵀ = UΣUᵀ for orthonormal U = QW, so the inverse
        square root is :math:`U\,\mathrm{diag}((\Sigma + \lambda)^{-1/2} - \lambda^{-1/2})\,U^\top
        + \lambda^{-1/2} I` (U and the diagonal are computed once, on first use).
        """
        out = self._half_inv(R.to(_FLOAT64))
        if self._scale is not None:
            out = _scale_rows(self._scale, out)
        return out.to(R.dtype)

    def inv_sqrt_t(self, R):
        """Sᵀ R (:meth:`inv_sqrt`): (I + L_s L_sᵀ)^{-1/2} D^{-1/2} R for a per-sample λ."""
        R64 = R.to(_FLOAT64)
        if self._scale is not None:
            R64 = _scale_rows(self._scale, R64)
        return self._half_inv(R64).to(R.dtype)

    def _half_inv(self, R64):
        """(L_s L_sᵀ + λI)^{-1/2} R64 (L_s = L and λ, or D^{-1/2} L and 1)."""
        if getattr(self, "_sqrt", None) is None:
            Q, Rf = torch.linalg.qr(self._Ls)
            sig, W = torch.linalg.eigh(Rf @ Rf.T)
            c = self._ridge ** -0.5
            self._sqrt = (Q @ W, (sig.clamp(min=0) + self._ridge).rsqrt() - c, c)
        U, d, c = self._sqrt
        return c * R64 + U @ (d[:, None] * (U.T @ R64)) if R64.ndim == 2 else \
            c * R64 + U @ (d * (U.T @ R64))

    def __call__(self, R):
        R64 = R.to(_FLOAT64)
        vector = R64.ndim == 1
        if vector:
            R64 = R64[:, None]
        if self._scale is not None:  # D^{-1/2} (I + L_s L_sᵀ)⁻¹ D^{-1/2} R
            R64 = R64 * self._scale[:, None]
        S = torch.cholesky_solve(_reduce(self._sharded_by, self._Ls.T @ R64), self._core_chol)
        out = R64 - self._Ls @ S
        out = out * self._scale[:, None] if self._scale is not None else out / self.lam
        if vector:
            out = out[:, 0]
        return out.to(R.dtype)


class PivotedCholesky(_WoodburyPreconditioner):
    r"""Preconditioner (L Lᵀ + λI)⁻¹ for K + λI from a greedy pivoted Cholesky of K.

    The partial Cholesky factorization picks, at each step, the pivot i with the largest
    diagonal of the residual :math:`K - L L^\top` and appends the column
    :math:`\ell = (K_{:,i} - L L_{i,:}^\top) / \sqrt{d_i}`, then updates the residual
    diagonal :math:`d \leftarrow d - \ell^2`. This is the greedy incomplete Cholesky /
    Nyström approximation (Fine and Scheinberg 2001, JMLR; Bach and Jordan 2002, JMLR). It needs only ``K.diag()`` and ``rank`` columns.
    The preconditioner applies :math:`(LL^\top + \lambda I)^{-1}` through the Woodbury
    identity with a k × k Cholesky factor, all in float64.

    Parameters
    ----------
    K : torch.Tensor or kernel matrix
        The (n, n) positive semi-definite kernel matrix, without the ridge. A tensor, or an
        object with ``diag()`` and ``cols(idx)`` (module docstring).
    rank : int
        Number of pivots (columns of L). The factorization stops earlier once the residual
        diagonal falls below ``tol`` times its initial trace.
    lam : float
        The ridge λ > 0 of the system A = K + λI that CG solves; or a per-sample ridge,
        an array of n values > 0 (A = K + diag(λ), e.g. a GP's per-sample noise), for
        which the preconditioner is L Lᵀ + diag(λ) (Woodbury on D^{-1/2} L, the same
        costs).
    tol : float
        Relative trace of K − LLᵀ below which no more pivots are taken.

    Attributes
    ----------
    L : torch.Tensor
        Factor of shape (n, k), float64, K ≈ L Lᵀ.
    pivots : torch.Tensor
        Indices of the chosen columns, shape (k,).
    rank : int
        k, the number of pivots taken.

    Notes
    -----
    Cost: rank column evaluations of K (O(n d) each for a vector kernel) plus O(n rank²)
    to build; O(n rank) per application; O(n rank) memory. Used with
    :func:`cg` as ``cg(K + λI, B, preconditioner=PivotedCholesky(K, 200, λ))``.

    References
    ----------
    J. Gardner et al., "GPyTorch: blackbox matrix-matrix Gaussian process inference with
    GPU acceleration", NeurIPS 2018 (pivoted Cholesky preconditioning). F. Bach and M.
    Jordan, "Kernel independent component analysis", JMLR 2002.
    """

    def __init__(self, K, rank, lam, *, tol=1e-12):
        n = _check_operator(K, "K")
        if not is_int(rank) or rank < 1:
            raise ValueError(f"rank must be a positive int, got {rank!r}")
        lam = _check_lam(lam, n)
        # a negative or NaN tol pivoted on past the numerical rank; a string failed deep
        check_positive(tol, "tol", allow_zero=True)
        rank = min(rank, n)
        with torch.no_grad():
            d = _diagonal(K).detach().to(_FLOAT64).clone()
            if d.shape != (n,):
                raise ValueError(f"K.diag() must have shape ({n},), got {tuple(d.shape)}")
            low = float(d.min())
            if low < -torch.finfo(K.dtype).eps ** 0.5 * float(d.abs().max()):
                # pivots are taken at the largest diagonal entries: a negative one never
                # is, and -K gave rank 0 (the preconditioner λI) without a word
                raise ValueError(f"K must be positive semi-definite: its diagonal has an "
                                 f"entry {low:.3g} < 0")
            stop = tol * float(d.sum())
            # Lᵀ is built row by row: each step reads the contiguous block Lt[:j].
            Lt = torch.zeros(rank, n, dtype=_FLOAT64, device=d.device)
            pivots = []
            for j in range(rank):
                i = int(torch.argmax(d))
                di = float(d[i])
                if di <= stop:
                    break
                idx = torch.tensor([i], device=d.device)
                col = _columns(K, idx).detach().to(_FLOAT64).reshape(n)
                ell = torch.addmv(col, Lt[:j].T, Lt[:j, i], alpha=-1.0).div_(math.sqrt(di))
                Lt[j] = ell
                d.sub_(ell * ell).clamp_(min=0)
                pivots.append(i)
                d[pivots] = 0  # chosen pivots are exact; keep round-off from re-picking them
            L = Lt[: len(pivots)].T.contiguous()
        self.pivots = torch.tensor(pivots, dtype=torch.long, device=d.device)
        super().__init__(L, lam)

    def __repr__(self):
        lam = f"{self.lam:g}" if self._scale is None else f"<{self.lam.shape[0]} values>"
        return f"PivotedCholesky(rank={self.rank}, lam={lam})"


class NystromPreconditioner(_WoodburyPreconditioner):
    r"""Preconditioner (K_nm K_mm⁺ K_mn + λI)⁻¹ for K + λI from m uniform Nyström centers.

    Draws m distinct indices uniformly (the Falkon choice), takes the columns
    :math:`K_{nm} = K_{:,\mathrm{idx}}` and :math:`K_{mm} = K_{\mathrm{idx},\mathrm{idx}}`,
    and approximates :math:`K \approx K_{nm} (K_{mm} + jI)^{-1} K_{mn} = L L^\top` with
    :math:`L = K_{nm} C^{-\top}`, :math:`C C^\top = K_{mm} + jI` a float64 Cholesky
    factor and jitter :math:`j = m\,\varepsilon_{\mathrm{dtype}} \max_i (K_{mm})_{ii}`
    (the rounding level of K's entries). Should that fail (K indefinite at that level),
    the pseudo-inverse of the positive part of K_mm (eigenvalues above j) is used. It then applies
    :math:`(L L^\top + \lambda I)^{-1}` by Woodbury in float64 (Williams and Seeger
    2001; Rudi et al. 2017).

    Parameters
    ----------
    K : torch.Tensor or kernel matrix
        The (n, n) kernel matrix without the ridge: a tensor, or an object with ``cols(idx)``.
    n_centers : int
        m, the number of centers (capped at n).
    lam : float
        The ridge λ > 0 of A = K + λI.
    random_state : None, int or torch.Generator
        Draw of the centers.

    Attributes
    ----------
    L : torch.Tensor
        Factor of shape (n, k), k ≤ m, float64, with K ≈ L Lᵀ.
    centers : torch.Tensor
        Indices of the m centers.
    rank : int
        k.

    Notes
    -----
    Cost: m column evaluations (one call ``K.cols(idx)``), O(n m²) to build, O(n m) per
    application and O(n m) memory. Uniform centers need m somewhat larger than the
    pivots of :class:`PivotedCholesky` for the same iteration count, but build in one
    batched column evaluation.

    References
    ----------
    A. Rudi, L. Carratino and L. Rosasco, "FALKON: an optimal large scale kernel method",
    NeurIPS 2017. C. Williams and M. Seeger, "Using the Nyström method to speed up kernel
    machines", NeurIPS 2001.
    """

    def __init__(self, K, n_centers, lam, *, random_state=None):
        n = _check_operator(K, "K")
        if not is_int(n_centers) or n_centers < 1:
            raise ValueError(f"n_centers must be a positive int, got {n_centers!r}")
        lam = _check_lam(lam)
        m = min(n_centers, n)
        device = torch.device(K.device)
        with torch.no_grad():
            idx = uniform_centers(n, m, random_state, device)
            Knm = _columns(K, idx).detach().to(_FLOAT64)
            rows = _rows(K, n)  # a row-sharded K: this process's rows of K_nm and of L
            if Knm.shape != (rows, m):
                raise ValueError(f"K.cols(idx) must have shape ({rows}, {m}), got {tuple(Knm.shape)}")
            Kmm = K.submatrix(idx, idx).detach().to(_FLOAT64) if _sharded(K) else Knm[idx]
            Kmm = (Kmm + Kmm.T) / 2
            jitter = m * torch.finfo(K.dtype).eps * float(Kmm.diagonal().max().clamp(min=0))
            C, info = torch.linalg.cholesky_ex(Kmm + jitter * torch.eye(m, dtype=_FLOAT64, device=device))
            if int(info) == 0:
                L = torch.linalg.solve_triangular(C, Knm.T, upper=False).T
            else:
                # K_mm + jitter is indefinite (K not p.s.d. in this precision): keep the
                # eigenvalues above the jitter, a pseudo-inverse of the positive part
                theta, Q = torch.linalg.eigh(Kmm)
                keep = theta > jitter
                if not bool(keep.any()):
                    raise ValueError("K restricted to the centers has no positive eigenvalue")
                L = Knm @ (Q[:, keep] / theta[keep].sqrt())
        self.centers = idx
        super().__init__(L, lam, K if _sharded(K) else None)

    def __repr__(self):
        return f"NystromPreconditioner(n_centers={self.centers.numel()}, rank={self.rank}, lam={self.lam:g})"
