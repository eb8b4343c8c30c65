r"""Kernel ridge regression: exact (Cholesky, preconditioned CG) and Nyström (Falkon)."""
from __future__ import annotations

import math
import warnings

import torch
from sklearn.base import RegressorMixin

from .._config import config
from .._progress import progress_bar
from .._estimator import Estimator, check_fitted, input_matrix, is_precomputed, kernel_matrix, resolve_kernel
from .._validation import (as_generator as _generator, as_vector, check_int, check_sample_weight,
                           is_int, is_real, real_tensor)
from ..approx.nystroem import nystrom_whitening, uniform_centers
from ..gram import DenseKernelMatrix, FormulaKernelMatrix, KernelMatrix, OperatorKernelMatrix
from ..inputs import check_fitted_input, check_precomputed, n_features, take
from ..linalg import NystromPreconditioner, cg, eigsh
from ..linalg._common import _own
from ..linalg.operators import RowBlockOperator
from ._common import r2_score

__all__ = ["KernelRidge"]

_F64 = torch.float64
_SOLVERS = ("auto", "cholesky", "cg", "nystrom")
_PRECONDITIONERS = ("nystrom", None)
# solver="auto": Cholesky up to this many samples (an n × n float64 factor of 200 MB),
# preconditioned CG up to _AUTO_CG_MAX_N, the Nyström (Falkon) solver beyond.
_AUTO_CHOLESKY_MAX_N = 5_000
_AUTO_CG_MAX_N = 50_000
_NYSTROM_DEFAULT_CENTERS = 1_000
# Nyström on float32 data: the fit's bound on the relative gap to the float64 fit above
# which the kernel is evaluated in float64 (_refine_in_float64).
_FLOAT32_GAP = 1e-4
# The same bound for "cg", which keeps float32 kernel values below it: the bound
# eps₃₂·‖K‖₂/α overestimated the measured gap of float32 CG's predictions 30-130 times
# (3,000-6,000 points in 3-d, RBF, α = 1 to 1e-3: gap 1.5e-6 at a bound of 1.7e-4, 1.3e-3
# to 5.7e-3 at 0.17), so below 3e-3 the float32 fit stays within ~1e-4 of float64.
_CG_FLOAT32_GAP = 3e-3


def _cg_centers(n: int) -> int:
    """Nyström-preconditioner centers for KernelRidge's CG: 1,000, lowered for large n so
    that the float64 factor (n × m) stays near 400 MB, never below 100 (or above n). On
    20,000 points (α = 10⁻², tol 10⁻³, float32) m = 1,000 took 1.3 s to build and 43
    iterations, against 0.5 s and 82 iterations for m = 500 and 1.9 s and 88 for a
    rank-500 pivoted Cholesky: 5.1 s in all against 8.2 and 11.1."""
    return min(n, 1000, max(100, int(5e7 // n)))


# --------------------------------------------------------------------------------------
# Helpers shared by the solvers
# --------------------------------------------------------------------------------------

def _check_alpha(alpha, r: int, strict: bool, solver: str) -> torch.Tensor:
    """α as a float64 tensor of shape (r,) (one per target), validated."""
    a = real_tensor(alpha, "alpha").reshape(-1)
    if a.numel() == 1:
        a = a.expand(r).clone()
    if a.numel() != r:
        raise ValueError(f"alpha must be a float or have one entry per target ({r}), "
                         f"got {a.numel()} entries")
    if not bool(torch.isfinite(a).all()) or bool((a < 0).any()):
        raise ValueError(f"alpha must be finite and >= 0, got {alpha!r}")
    if strict and bool((a == 0).any()):
        raise ValueError(f"alpha must be > 0 for solver={solver!r}, got {alpha!r}")
    return a


def _alpha_groups(alpha: torch.Tensor):
    """Columns sharing one α, so that each distinct α costs one (multi-column) solve."""
    groups = {}
    for j, a in enumerate(alpha.tolist()):
        groups.setdefault(a, []).append(j)
    return groups.items()


# --------------------------------------------------------------------------------------
# Solvers: each returns the coefficients c (n, r) in float64 or the data dtype
# --------------------------------------------------------------------------------------

def _solve_cholesky(K: KernelMatrix, Y: torch.Tensor, alpha: torch.Tensor,
                    verbose=False) -> torch.Tensor:
    """c = (K + αI)⁻¹ Y by a float64 Cholesky factorization; O(n³) time, O(n²) memory.

    α = 0 with a singular K falls back to least squares, as scikit-learn does. With
    ``verbose`` a bar counts the factorizations (one per distinct α) and their time.
    """
    K64 = K.to_dense().to(_F64)
    Y64 = Y.to(_F64)
    C = torch.empty_like(Y64)
    groups = list(_alpha_groups(alpha))
    # Memory: K (once, in float64) and one n × n work array that becomes the factor.
    A = torch.empty_like(K64)
    info = torch.empty((), dtype=torch.int32, device=K64.device)
    bar = progress_bar(verbose, total=len(groups), unit="factorization",
                       desc=f"KernelRidge (cholesky, n={K64.shape[0]}, float64)")
    try:
        for a, cols in groups:
            A.copy_(K64)
            A.diagonal().add_(a)
            if a == 0:
                A0 = A.clone()
            torch.linalg.cholesky_ex(A, out=(A, info))
            if int(info) == 0:
                C[:, cols] = torch.cholesky_solve(Y64[:, cols], A)
            elif a > 0:
                raise ValueError("K + alpha*I is not positive definite: the kernel matrix is "
                                 "not positive semi-definite")
            else:
                warnings.warn("Singular matrix in solving the dual problem (alpha=0); using "
                              "the least-squares solution instead.", RuntimeWarning,
                              stacklevel=3)
                C[:, cols] = torch.linalg.lstsq(A0, Y64[:, cols], driver="gelsd").solution
            if bar is not None:
                bar.update()
    finally:
        if bar is not None:
            bar.close()
    return C


def _solve_cg(K: KernelMatrix, Y, alpha, *, rank, tol, max_iter, verbose,
              generator=None) -> torch.Tensor:
    """c = (K + αI)⁻¹ Y by preconditioned CG on K (stored or lazy).

    Preconditioner: the Nyström approximation of K on ``rank`` uniformly drawn columns
    (Falkon's choice, :class:`~torchkern.linalg.NystromPreconditioner`), applied by
    Woodbury: O(n·rank) memory, the n × rank columns evaluated in one batch. Each
    iteration is one product K @ P of width r: O(n²) kernel evaluations, O(n) memory with a
    lazy backend.
    """
    C = torch.empty_like(Y)
    n_iter = 0
    groups = list(_alpha_groups(alpha))
    base = (NystromPreconditioner(K, min(rank, K.shape[0]), groups[0][0], random_state=generator)
            if rank > 0 else None)
    for a, cols in groups:
        # One factor L serves every α: only the Woodbury core depends on it.
        pc = base if base is None or base.lam == a else base.with_lam(a)
        C[:, cols], info = cg(K.add_diag(a), Y[:, cols].contiguous(), preconditioner=pc, tol=tol,
                        max_iter=max_iter, verbose="KernelRidge (cg)" if verbose else False,
                                 return_info=True)
        n_iter = max(n_iter, info.iterations)
    return C, n_iter


def _solve_nystrom(Knm: RowBlockOperator, Kmm: torch.Tensor, Y, alpha, w, *, tol, max_iter,
                   verbose) -> torch.Tensor:
    r"""β minimizing Σ_i w_i (K_nm β − y)_i² + α βᵀ K_mm β. Returns β (m, r) in float64.

    Falkon's preconditioned normal equations (Rudi, Carratino and Rosasco, NeurIPS 2017):
    with β = M θ for a whitening M of K_mm (Mᵀ K_mm M ≈ I: the inverse Cholesky factor,
    :func:`~torchkern.approx.nystroem.nystrom_whitening`), they read
    (Mᵀ K_mn W K_nm M + αI) θ = Mᵀ K_mn W y — symmetric positive definite with
    eigenvalues ≥ α even when K_mm is numerically singular, where the β-form is only
    semi-definite. For uniform centers K_mn W K_nm ≈ c K_mm² (c = Σw/m), so the system is
    ≈ c (K_mm M)ᵀ(K_mm M) + αI, whose Cholesky factor is the preconditioner. Cost per
    iteration: one pass over K_nm (stored, or evaluated in row blocks: O(n·m·d)),
    O(n·m·r) flops in float64 and O(m²·r) for M and the factor.
    """
    M = nystrom_whitening(Kmm)
    KM = Kmm.to(_F64) @ M
    G = KM.T @ KM
    Yw = Y if w is None else Y * w[:, None]
    rhs = M.T @ Knm.rmatmul(Yw)
    c = (Knm.shape[0] if w is None else float(Knm.total(w.sum()))) / M.shape[0]
    Theta = torch.empty_like(rhs)
    n_iter = 0
    r = M.shape[1]
    for a, cols in _alpha_groups(alpha):
        H = OperatorKernelMatrix(lambda V, a=a: M.T @ Knm.normal_matmul(M @ V, w) + a * V,
                                 (r, r), _F64, M.device)
        P = c * G
        P.diagonal().add_(a)
        P = torch.linalg.cholesky(P)
        Theta[:, cols], info = cg(H, rhs[:, cols].contiguous(),
                                  preconditioner=lambda R, P=P: torch.cholesky_solve(R, P),
                                  tol=tol, max_iter=max_iter,
                                  verbose="KernelRidge (nystrom)" if verbose else False,
                                  return_info=True)
        n_iter = max(n_iter, info.iterations)
    return M @ Theta, n_iter


def _float64_of_float32(kernel, X) -> bool:
    """Whether X is float32 tensor data that ``kernel`` can also evaluate in float64 — not
    a kernel whose parameters fix the inputs' dtype, such as a FeatureKernel on a float32
    network (:meth:`~torchkern.kernels.Kernel.accepts_dtype`): the solvers' float64
    refinements then keep the data's dtype."""
    return (type(X) is torch.Tensor and X.dtype == torch.float32
            and getattr(kernel, "accepts_dtype", lambda dtype: True)(_F64))


def _refine_in_float64(kernel, X, Z, alpha) -> bool:
    r"""Whether the Nyström solver evaluates the kernel in float64 for float32 data X.

    Rounding K's entries to float32 perturbs K by E with ‖E‖₂ ≈ eps₃₂‖K‖₂, which moves
    the ridge fit K(K + αI)⁻¹y by up to about ‖E‖/α relative (first-order perturbation
    of (K + αI)⁻¹; Golub and Van Loan, "Matrix Computations", 4th ed., §2.6). Where
    that bound, with ‖K‖₂ ≈ (n/m)·‖K_mm‖₂ for uniform centers, exceeds 10⁻⁴, float32
    cannot resolve the system: K_nm and K_mm are evaluated in float64 from the float32
    inputs (twice the memory; the iterations already multiply in float64). ‖K_mm‖₂ is
    estimated by Lanczos on the float64 K_mm, O(m²d) for K_mm and a few dozen products.
    """
    if not _float64_of_float32(kernel, X):
        return False
    return _float32_unresolved(kernel(Z.to(_F64), backend="dense").to_dense(), X.shape[0],
                               alpha)


def _float32_unresolved(Kmm, n: int, alpha: torch.Tensor, gap: float = _FLOAT32_GAP) -> bool:
    """eps₃₂·(n/m)·‖K_mm‖₂ / min α > ``gap`` (K_mm float64, m × m, a tensor or a
    KernelMatrix; m = n for the full K), ‖K_mm‖₂ = λ_max(K_mm) by Lanczos
    (:func:`~torchkern.linalg.eigsh`, to 10⁻³ relative: an estimate is all the test
    needs; no copy of K)."""
    m = Kmm.shape[0]
    norm = abs(float(eigsh(Kmm, 1, tol=1e-3, random_state=0)[0][0])) * n / m
    a = float(alpha.min())
    return a == 0 or torch.finfo(torch.float32).eps * norm / a > gap


def _cg_float32_unresolved(K, alpha: torch.Tensor) -> bool:
    """eps₃₂·λ̂/min α > _CG_FLOAT32_GAP for the CG solver's float32 K, with λ̂ ≤ ‖K‖₂ the
    Rayleigh quotient of K²v for v = 1 + a Gaussian vector (three steps of the power
    method; Golub and Van Loan, "Matrix Computations", 4th ed., §8.2): three products with
    K where Lanczos (:func:`_float32_unresolved`) takes 21 — this test runs before every
    float32 CG fit, whose whole solve may take a dozen products. On RBF, Laplacian and
    linear Gram matrices of 3,000-6,000 points λ̂ was 0.9-1.0 times ‖K‖₂ (0.53 for a
    nearly diagonal K, RBF(0.05) in 3-d, whose flat spectrum power steps separate
    slowly); an estimate from below keeps float32 only where the 30-130-fold slack of the
    bound (_CG_FLOAT32_GAP) covers it."""
    a = float(alpha.min())
    if a == 0:
        return True
    n = K.shape[0]
    gen = torch.Generator().manual_seed(0)
    v = (1.0 + torch.randn(n, generator=gen, dtype=_F64)).to(K.device)
    for _ in range(2):
        v = (K @ (v / v.norm()).to(K.dtype)).to(_F64)
    u = v / v.norm()
    lam = abs(float(u @ (K @ u.to(K.dtype)).to(_F64)))
    return torch.finfo(torch.float32).eps * lam / a > _CG_FLOAT32_GAP


# --------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------

class KernelRidge(RegressorMixin, Estimator):
    r"""Kernel ridge regression, exact or with Nyström centers, on lazy Gram matrices.

    Fits f(x) = Σ_i c_i k(x_i, x) with coefficients solving

    .. math:: (K + \alpha I)\, c = y,

    the minimizer of :math:`\lVert y - Kc\rVert^2 + \alpha\, c^\top K c`, i.e. of
    :math:`\sum_i (f(x_i) - y_i)^2 + \alpha \lVert f\rVert_{\mathcal H}^2` — scikit-learn's
    :class:`sklearn.kernel_ridge.KernelRidge` objective: α is *not* multiplied by n (the
    (1/n)-normalized loss with parameter λ is α = nλ; Shawe-Taylor and Cristianini,
    "Kernel Methods for Pattern Analysis", 2004, §7.3). With
    ``sample_weight`` w the squared errors are weighted and, as in scikit-learn,
    c = S (S K S + αI)⁻¹ S y with S = diag(√w). Several
    targets (y of shape (n, r)) share one factorization or one batched CG.

    Parameters
    ----------
    kernel : Kernel, "precomputed" or None
        The kernel (``None`` is ``RBF()``). With ``"precomputed"``, ``fit`` takes the
        (n, n) Gram matrix (a tensor, array or lazy :class:`~torchkern.KernelMatrix`) and
        ``predict`` the (n_test, n) matrix between test and training points.
    alpha : float or array of shape (r,)
        Ridge α ≥ 0 (> 0 for ``"cg"`` and ``"nystrom"``), one per target if an array.
    solver : {"auto", "cholesky", "cg", "nystrom"}
        ``"cholesky"``: dense float64 Cholesky of K + αI, O(n³) time, O(n²) memory.
        ``"cg"``: conjugate gradient on K + αI (:func:`torchkern.linalg.cg`; K stored
        under ``backend="auto"`` when it fits ``config.materialize_max_bytes``, else
        lazy), preconditioned (``preconditioner="nystrom"``, the default) by the Nyström
        approximation of K on ``n_centers`` uniformly drawn columns (default
        min(n, 1000, max(100, 5·10⁷/n))): O(n²) kernel evaluations per iteration,
        O(n·m) memory when lazy. ``"nystrom"``: Falkon-style Nyström KRR (below), approximate.
        ``"auto"``: cholesky for n ≤ 5,000, cg for n ≤ 50,000, nystrom beyond; on
        row-sharded data (:mod:`torchkern.distributed`) cg up to 50,000, where cholesky,
        which needs the whole matrix, is an error.
    n_centers : int, optional
        ``"nystrom"``: the number m of uniformly drawn centers (default min(n, 1000)).
        ``"cg"``: the centers of the Nyström preconditioner (default above; 0 for none).
    tol : float, optional
        Relative residual at which CG stops (``"cg"``, ``"nystrom"``). Default (None):
        :func:`torchkern.linalg.cg`'s, 1e-6, which float32 data meet without a warning
        (the float32 rounding of a solution at 1e-6 is accepted); an explicit ``tol``
        below what float32 resolves warns.
    max_iter : int, optional
        CG iteration cap, at least 1 (default that of :func:`torchkern.linalg.cg`); a
        :class:`~torchkern.linalg.ConvergenceWarning` reports the residual if reached.
    random_state : None, int or torch.Generator
        Draw of the Nyström centers.
    verbose : bool
        Show a tqdm bar: CG's residual toward ``tol`` (``"cg"``, ``"nystrom"``), the
        factorizations and their time (``"cholesky"``).
    backend : str, optional
        Gram-matrix backend (``"auto"``, ``"dense"``, ``"blocked"``, ``"keops"``) for the
        lazy products of ``"cg"`` and for ``predict``.
    preconditioner : {"nystrom", None}
        ``"cg"``: ``"nystrom"`` (default) preconditions by
        :class:`~torchkern.linalg.NystromPreconditioner` on ``n_centers`` columns of K
        (on 2,000–10,000 points, RBF in 3-d, α = 10⁻⁴·n: 6–7 CG iterations where plain
        CG takes ~90, ``bench/solvers.py``); None for plain CG.

    Attributes
    ----------
    dual_coef_ : Tensor of shape (n,) or (n, r)
        c; with ``"nystrom"`` the center coefficients β, shape (m,) or (m, r). In the
        data's dtype, except float64 for float32 data where float32 cannot resolve α
        (every solver; Notes): ``predict`` then evaluates the kernel in float64 and
        returns float32.
    X_fit_ : Tensor or KernelInput
        The points that ``predict`` evaluates the kernel against: the training data, or
        the m centers for ``"nystrom"`` (``None`` with a precomputed kernel).
    center_indices_ : Tensor of shape (m,)
        ``"nystrom"`` only: the rows of the training data used as centers.
    solver_ : str
        The solver actually used.
    n_iter_ : int
        CG iterations of the solve (``"cg"``, ``"nystrom"``; the most over targets), 1 for
        the direct ``"cholesky"`` solve.
    kernel_ : Kernel or "precomputed"
        The fitted copy of ``kernel``.

    Notes
    -----
    Nyström KRR (Rudi, Carratino, Rosasco, "FALKON", NeurIPS 2017) restricts f to the span
    of m centers z_j drawn uniformly (``random_state``): f(x) = Σ_j β_j k(z_j, x) with β
    minimizing :math:`\lVert K_{nm}\beta - y\rVert^2 + \alpha\,\beta^\top K_{mm}\beta`,
    i.e. solving :math:`(K_{mn}K_{nm} + \alpha K_{mm})\beta = K_{mn}y` by PCG after the
    change of variables β = T⁻¹θ (TᵀT the Cholesky factorization of K_mm, float64), with
    Falkon's preconditioner, the Cholesky factor of (n/m)·TTᵀ + αI; the system stays
    positive definite when K_mm is numerically singular. K_nm is evaluated once and
    stored in the data's dtype when its n·m entries fit
    ``torchkern.config.materialize_max_bytes`` (4 GiB: n = 10⁶, m = 1,000 in float32) and
    ``backend`` is None, "auto" or "dense"; otherwise each iteration evaluates it again in
    row blocks (O(n·m) kernel evaluations, O(m²) memory besides a block). Each iteration
    reads K_nm once, multiplying its entries in float64: float32 data reach tight
    tolerances. With m = n it is exact KRR.

    float32 data: rounding the kernel values to float32 perturbs K by E, ‖E‖₂ ≈
    eps₃₂‖K‖₂, which moves the fit by up to about ‖E‖/α relative. Where
    eps₃₂·‖K‖₂/α > 10⁻⁴ (‖K‖₂ estimated from K, or (n/m)‖K_mm‖₂ for ``"nystrom"``),
    ``"nystrom"`` evaluates K_nm and K_mm in float64 from the float32 inputs and keeps β
    in float64; ``"cholesky"`` always evaluates K in float64 (it factors in float64
    anyway) and keeps c in float64 there. ``"cg"`` keeps float32 kernel values while
    eps₃₂·‖K‖₂/α ≤ 3·10⁻³ (the bound overestimated its measured gap to float64 30–130
    times: ≤ ~10⁻⁴ there) and above evaluates K in float64 (twice the memory of a stored
    K, float64 products) and keeps c in float64: float32 CG's predictions were 6·10⁻³ off,
    without a warning, on 6,000 points with α = 10⁻³, where the float32 inputs themselves
    allow 4·10⁻⁸. A kernel whose parameters fix the inputs' dtype (a
    :class:`~torchkern.kernels.FeatureKernel` on a float32 network) is evaluated in
    float32 by every solver (Cholesky and the solves still run in float64).

    Examples
    --------
    >>> import torch, torchkern
    >>> X = torch.randn(200, 3, dtype=torch.float64); y = X.sin().sum(1)
    >>> model = torchkern.KernelRidge(torchkern.RBF(1.0), alpha=0.1).fit(X, y)
    >>> model.predict(X[:5]).shape
    torch.Size([5])
    """

    # learn_kernel's "lml" / "map" objectives learn it: (K + αI)c = y is the posterior
    # mean of the GP of noise variance α
    _noise_variance_param = "alpha"

    def __init__(self, kernel=None, alpha=1.0, solver="auto", n_centers=None, tol=None,
                 max_iter=None, random_state=None, verbose=False, backend=None,
                 preconditioner="nystrom"):
        self.kernel = kernel
        self.alpha = alpha
        self.solver = solver
        self.n_centers = n_centers
        self.preconditioner = preconditioner
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose
        self.backend = backend

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    # ---------------------------------------------------------------------------------
    def _choose_solver(self, n: int, sharded: bool = False) -> str:
        if self.solver not in _SOLVERS:
            raise ValueError(f"solver must be one of {_SOLVERS}, got {self.solver!r}")
        if self.solver == "cholesky" and sharded:
            raise ValueError("solver='cholesky' factors the whole n x n matrix, which a "
                             "row-sharded kernel (ShardedKernel(vectors='sharded')) never "
                             "holds: use solver='cg' (or 'auto') or 'nystrom', or "
                             "vectors='auto' / 'replicated' to factor it whole on every rank")
        if self.solver != "auto":
            return self.solver
        if n <= _AUTO_CHOLESKY_MAX_N and not sharded:
            return "cholesky"
        return "cg" if n <= _AUTO_CG_MAX_N else "nystrom"

    def fit(self, X, y, sample_weight=None):
        """Fit the coefficients; returns ``self``.

        Parameters
        ----------
        X : kernel input
            What the kernel takes (:mod:`torchkern.inputs`): an (n, d) tensor or array for
            vector kernels, a list of graphs or strings for structured kernels; the (n, n)
            Gram matrix if precomputed.
        y : Tensor or array of shape (n,) or (n, r).
        sample_weight : float or array of shape (n,), optional
            Non-negative weights of the squared errors.
        """
        kernel = resolve_kernel(self.kernel)
        precomputed = is_precomputed(kernel)
        X = check_precomputed(X, square=True) if precomputed else input_matrix(kernel, X, "X")
        n = X.shape[0]
        dtype, device = X.dtype, X.device
        Y = as_vector(y, "y", n=n).detach().to(dtype=dtype, device=device)
        ravel = Y.dim() == 1
        Y2 = Y.reshape(n, -1)
        # Row-sharded data (torchkern.distributed): CG and Nystrom keep their vectors sharded
        sharded = callable(getattr(kernel, "shard_vectors", None)) and \
            kernel.shard_vectors(X, self.solver != "cholesky")
        solver = self._choose_solver(n, sharded)
        self.__dict__.pop("center_indices_", None)  # a refit with another solver has none
        alpha = _check_alpha(self.alpha, Y2.shape[1], solver in ("cg", "nystrom"), solver)
        w = None if sample_weight is None else check_sample_weight(sample_weight, n, dtype=dtype,
                                                                    device=device)
        self._check_params(solver)

        with torch.no_grad():
            if solver == "nystrom":
                C, X_fit = self._fit_nystrom(kernel, X, Y2, alpha, w)
            else:
                C = self._fit_exact(kernel, X, Y2, alpha, w, solver)
                X_fit = None if precomputed else X
        self.kernel_ = kernel
        self.solver_ = solver
        self.dual_coef_ = C.reshape(-1) if ravel else C
        self.X_fit_ = X_fit
        d = n if precomputed else n_features(X)
        if d is not None:
            self.n_features_in_ = d
        self._n_fit = n
        return self

    def _check_params(self, solver):
        if self.tol is not None and not (is_real(self.tol) and 0 < self.tol < math.inf):
            raise ValueError(f"tol must be None or a finite positive float, got {self.tol!r}")
        if self.preconditioner not in _PRECONDITIONERS:
            raise ValueError(f"preconditioner must be one of {_PRECONDITIONERS}, "
                             f"got {self.preconditioner!r}")
        if self.n_centers is not None and (isinstance(self.n_centers, bool)
                                           or not is_int(self.n_centers)
                                           or self.n_centers < (1 if solver == "nystrom" else 0)):
            raise ValueError(f"n_centers must be a positive int, got {self.n_centers!r}")
        if self.max_iter is not None:  # 0 CG steps returned c = 0: predictions all 0
            check_int(self.max_iter, "max_iter")

    def _tol(self):
        return None if self.tol is None else float(self.tol)

    def _fit_exact(self, kernel, X, Y, alpha, w, solver):
        """c = S (S K S + αI)⁻¹ S y (S = diag(√w), or I) by Cholesky or CG."""
        # Cholesky factors K in float64: float32 data get float64 kernel values for free
        f64 = solver == "cholesky" and _float64_of_float32(kernel, X)
        K = kernel_matrix(kernel, X.to(_F64) if f64 else X,
                          backend="dense" if solver == "cholesky" else self.backend, reuse=True)
        # A row-sharded K (torchkern.distributed): this rank's rows; c stays sharded.
        Y, w = _own(K, Y), None if w is None else _own(K, w)
        s = None if w is None else w.sqrt()
        if s is not None:
            K, Y = K.scaled(s), Y * s[:, None]
        if solver == "cholesky":
            C = _solve_cholesky(K, Y, alpha, self.verbose)
            self.n_iter_ = 1  # one direct solve
            # c stays float64 where its float32 rounding would move K c by more than
            # float32 resolves (predict then evaluates the kernel in float64)
            if not (f64 and _float32_unresolved(K, K.shape[0], alpha)):
                C = C.to(Y.dtype)
        else:
            if (_float64_of_float32(kernel, X)
                    and not callable(getattr(kernel, "shard_vectors", None))
                    and _cg_float32_unresolved(K, alpha)):
                # float32 cannot resolve α: the coefficients of the ill-conditioned system
                # cancel in float32 products (predictions 6e-3 off on 6,000 points with
                # α = 1e-3, where the float32 inputs allow 4e-8), and CG's residual test
                # passes without a warning. K is evaluated in float64 from the float32
                # inputs, as for "nystrom"; c stays float64 (predict then too).
                K = kernel_matrix(kernel, X.to(_F64), backend=self.backend, reuse=True)
                Y = Y.to(_F64)
                if s is not None:
                    s = s.to(_F64)
                    K = K.scaled(s)
            n_centers = (0 if self.preconditioner is None else
                         _cg_centers(K.shape[0]) if self.n_centers is None else self.n_centers)
            C, self.n_iter_ = _solve_cg(K, Y, alpha, rank=n_centers, tol=self._tol(),
                                        max_iter=self.max_iter, verbose=self.verbose,
                                        generator=_generator(self.random_state))
        return C if s is None else C * s[:, None]

    def _fit_nystrom(self, kernel, X, Y, alpha, w):
        """β on m uniform centers (:func:`_solve_nystrom`); returns β and the centers."""
        n = X.shape[0]
        m = min(n, _NYSTROM_DEFAULT_CENTERS if self.n_centers is None else self.n_centers)
        idx = uniform_centers(n, m, self.random_state, X.device)
        self.center_indices_ = idx
        if is_precomputed(kernel):
            K = kernel_matrix(kernel, X)
            Knm, Kmm, Z = RowBlockOperator(K.cols(idx), n), K.submatrix(idx, idx), None
        else:
            Z = take(X, idx)
            if _refine_in_float64(kernel, X, Z, alpha):
                X, Z64 = X.to(_F64), Z.to(_F64)  # Z (float32) stays the predict centers
            else:
                Z64 = Z
            K = kernel(X, Z64, backend="blocked")
            if self._keep_knm(n, m, K.dtype):
                # stored for itself: written by the native loop in float32 too, where the
                # kernel has one (FormulaKernelMatrix.rows of the compiled backend)
                dense = (FormulaKernelMatrix(K.formula, "compiled").to_dense()
                         if isinstance(K, FormulaKernelMatrix) else K.to_dense())
                Knm = RowBlockOperator(dense, K.block_rows(), sharded_by=K)
            else:
                Knm = RowBlockOperator(K, K.block_rows(), sharded_by=K)
            Y, w = _own(K, Y), None if w is None else _own(K, w)  # K row-sharded: own rows
            Kmm = kernel(Z64, backend="dense").to_dense()
        B, self.n_iter_ = _solve_nystrom(Knm, Kmm, Y, alpha, w, tol=self._tol(),
                                         max_iter=self.max_iter, verbose=self.verbose)
        # β of a float64-refined fit stays float64: rounding it would cost what it gained
        return B.to(Kmm.dtype), Z

    def _keep_knm(self, n: int, m: int, dtype) -> bool:
        """Whether the Nyström solver stores K_nm (evaluated once) rather than evaluating
        it in row blocks at every CG iteration: under ``backend`` None, "auto" or "dense",
        when its n·m entries take at most ``config.materialize_max_bytes``."""
        if self.backend not in (None, "auto", "dense"):
            return False
        return n * m * torch.finfo(dtype).bits // 8 <= config.materialize_max_bytes

    def predict(self, X) -> torch.Tensor:
        """f(x) = Σ_i c_i k(x_i, x) for each row of X; O(n_test·n) kernel evaluations.

        With a precomputed kernel X is the (n_test, n_train) matrix k(test, train).
        """
        check_fitted(self, "dual_coef_")
        kernel = self.kernel_
        with torch.no_grad():
            if is_precomputed(kernel):
                K = kernel_matrix(kernel, check_precomputed(X, self._n_fit))
                if self.solver_ == "nystrom":
                    K = DenseKernelMatrix(K.cols(self.center_indices_))
                if self.dual_coef_.dtype == _F64 and K.dtype != _F64:
                    # a float64-refined fit of a float32 Gram: its coefficients cancel,
                    # which float32 products do not resolve (1.5e-2 off at α = 1e-5 on
                    # 1,000 points); the given values multiplied in float64, by row blocks
                    c = self.dual_coef_
                    return torch.cat([B.to(_F64) @ c.to(B.device)
                                      for _, _, B in K.row_blocks()]).to(K.dtype)
            else:
                X = check_fitted_input(kernel, X, self.X_fit_, estimator=self)
                if self.dual_coef_.dtype == _F64 and X.dtype != _F64:
                    # a float64-refined fit (Nyström, or Cholesky of float32 data where
                    # float32 cannot resolve α): k(x, z) evaluated in float64 too
                    K = kernel_matrix(kernel, X.to(_F64), self.X_fit_.to(_F64),
                                      backend=self.backend)
                    return (K @ self.dual_coef_).to(X.dtype)
                K = kernel_matrix(kernel, X, self.X_fit_, backend=self.backend)
            return K @ self.dual_coef_.to(K.dtype)

    def score(self, X, y, sample_weight=None) -> float:
        """Coefficient of determination R² of ``predict(X)`` (as scikit-learn's
        ``r2_score``, averaged uniformly over targets)."""
        pred = self.predict(X)
        return r2_score(y, pred, sample_weight)

