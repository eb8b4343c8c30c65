"""Kernel principal component analysis on a lazy, lazily centered Gram matrix."""
from __future__ import annotations

import copy
import math
import warnings

import torch
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.metaestimators import available_if

from .._estimator import (Estimator, check_fitted, input_matrix, is_precomputed, kernel_matrix,
                          resolve_kernel)
from .._progress import progress_bar
from .._threads import one_thread
from ..approx.nystroem import nystrom_basis, uniform_centers
from .._validation import caller_stacklevel, check_bool, check_positive, is_int
from ..gram import DenseKernelMatrix, KernelMatrix
from ..inputs import check_fitted_input, check_precomputed, n_features
from ..linalg import ConvergenceWarning, cg, eigsh
from ..linalg.eig import _block_width, _ritz_residual
from ..linalg.lanczos import _default_tol
from ..linalg.eig import block_krylov_eigsh as _randomized_eigsh
from ..linalg.tiled import SYMMETRIC_MIN_COLS, symmetric_tiled_mm, tiled_mm
from ._common import cheap_trace, warn_if_centering_cancels

__all__ = ["KernelPCA"]

_SOLVERS = ("auto", "dense", "lanczos", "randomized", "arpack")  # arpack: scikit-learn's name

# Largest order whose dense eigendecomposition runs on one thread on the CPU. LAPACK's
# tridiagonal reduction is a sequence of n matrix-vector steps, each a parallel region of
# the BLAS; with another process on the cores every region waits for a descheduled
# thread: on 2 shared cores (load ~12) SciPy's syevr for the top n/4 pairs took 41-53 s
# with 2 threads at n = 2,000 against 3.3-3.9 s with one (n = 500: 0.5 s against 0.2 s;
# n = 1,100, torch's eigh: 7.8 s against 1.3 s). Above it a quiet machine's threads pay
# (the single-threaded O(n³) work passes ~10 s).
_ONE_THREAD_DENSE_MAX = 4000


class _TiledDense(DenseKernelMatrix):
    """A materialized CPU Gram matrix whose products K V run in tiles shared by
    ``threads`` threads (default: torch's count when it is made, also inside a
    one-thread scope) with dynamic scheduling (:mod:`torchkern.linalg.tiled`); a
    ``symmetric`` one (the Gram matrix of a kernel on one set) reads only its upper
    triangle for products by ``SYMMETRIC_MIN_COLS`` columns or more. With another
    process on the cores, a descheduled thread then holds back one tile of about a
    millisecond, not half of every product."""

    def __init__(self, tensor, symmetric, threads=None):
        super().__init__(tensor)
        self.symmetric = symmetric
        self.threads = torch.get_num_threads() if threads is None else threads

    def _matmul(self, V):
        if self.symmetric and V.shape[1] >= SYMMETRIC_MIN_COLS:
            return symmetric_tiled_mm(self.tensor, V, threads=self.threads)
        return tiled_mm(self.tensor, V, threads=self.threads)


def _psd_clip(evals, dtype):
    """Round-off eigenvalues → 0: negative ones, and positive ones below 1e-12 (float64)
    or 1e-6 (float32) of the largest (as scikit-learn's ``_check_psd_eigenvalues``).

    A computed eigenvalue below −1e-5 (float64) or −5e-3 (float32) times the largest
    positive one, and below −1e-10 (−1e-6), is not round-off: the centered Gram matrix is
    indefinite (a kernel that is not positive semi-definite, or a precomputed matrix that
    is no Gram matrix), and kernel PCA, which needs the feature-space geometry, is
    refused with scikit-learn's thresholds rather than run on the clipped spectrum."""
    double = dtype == torch.float64
    ratio = 1e-12 if double else 1e-6
    neg_ratio, neg_value = (1e-5, 1e-10) if double else (5e-3, 1e-6)
    top, low = float(evals.max()), float(evals.min())
    if top < 0 and low < -neg_value:
        raise ValueError(f"kernel: every computed eigenvalue of the centered Gram matrix is "
                         f"negative (largest {top:.3g}): the kernel (or the precomputed "
                         f"matrix) is not positive semi-definite")
    if low < -neg_ratio * max(top, 0.0) and low < -neg_value:
        raise ValueError(f"kernel: the centered Gram matrix has significant negative "
                         f"eigenvalues ({low:.3g}, largest {top:.3g}): the kernel (or the "
                         f"precomputed matrix) is not positive semi-definite, or its "
                         f"entries carry rounding errors that large (e.g. a dot-product "
                         f"kernel on data far from the origin); ask for fewer components")
    top = evals.abs().max()
    return torch.where(evals < ratio * top, torch.zeros_like(evals), evals)


def _centered_symmetric(K):
    """``K.centered()`` of a symmetric Gram matrix with one product K1 instead of two:
    its column means are its row means. (Matrices with their own centering, such as
    row-sharded ones, keep it.)"""
    if type(K).centered is not KernelMatrix.centered:
        return K.centered()
    Kc = K.centered(col_mean=torch.zeros(K.shape[0], dtype=K.dtype, device=K.device))
    Kc.col_mean, Kc.mean = Kc.row_mean, Kc.row_mean.mean()
    return Kc


def _subtract_mean(K, Kc, trace, tol):
    r"""For a stored Gram K that is so nearly its mean c = 1ᵀK1/n² that products with it
    would lose the centered spectrum — ε·√n·tr K > ``tol``·tr K̃ (ε of K's dtype; ``tol``
    the solver's relative accuracy, 1e-8 / 1e-5 by default) — the centering
    :math:`H(K - c\mathbf 1\mathbf 1^\top)H` of a shifted copy (the same matrix, since
    H1 = 0) and c; else (Kc, 0).

    The lazy centering's products K V round at the size of ‖K‖ ≈ tr K, far above the
    centered eigenvalues where K ≈ c11ᵀ (an RBF on nearly constant data, entries
    1 − O(10⁻¹⁴)), while K_ij − c is exact (Sterbenz) and small: the iterative solvers then
    reach the accuracy of the entries themselves (n = 1200, 3-D data at 3 ± 1e-7, top
    eigenvalues: 1–2 % off unshifted, 6e-6 shifted). Unshifted, the top eigenvalues
    measured about 0.01–0.03·ε·tr K/tr K̃ off (wide RBFs on Gaussian data, n = 1200,
    float64: ℓ = 10³…10⁵, tr K/tr K̃ = 3·10⁵…3·10⁹, 2e-12…6e-9; float32 ℓ = 10³: 1 %),
    but the later ones up to ~36·ε·tr K/tr K̃ (n = 1100, ℓ = 10⁴, the 4th and 5th
    eigenvalues), hence the margin √n. Below the rule the shift gains nothing and is
    skipped: it is a copy (K may be the caller's or a kernel's cache), n² more memory."""
    if not isinstance(K, DenseKernelMatrix) or trace is None:
        return Kc, 0.0
    c = Kc.mean
    tr = float(trace)  # tr K (cheap_trace)
    centered = abs(tr - K.shape[0] * float(c))  # tr K̃
    if not torch.finfo(K.dtype).eps * math.sqrt(K.shape[0]) * abs(tr) > tol * centered:
        return Kc, 0.0
    shifted = copy.copy(K)  # a _TiledDense keeps its threads and symmetry
    shifted.tensor = K.tensor - c
    return _centered_symmetric(shifted), c


def _nystrom_start(Kc, b, random_state):
    r"""Start block for the block eigensolver: the Nyström extension :math:`C V` of the top
    b eigenvectors V of :math:`\tilde K` restricted to m = min(n/2, 10b) uniformly drawn
    points, C = :math:`\tilde K_{:,m}` (Williams and Seeger, NeurIPS 2001). On kernel
    matrices it starts the iteration within a few percent of the wanted eigenvectors
    (relative residual 4e-2–7e-2 against ~4 for a Gaussian block): two block products
    fewer (RBF, n = 4,000–8,000, 8 → 6 at tol 1e-6; m = 5b to 40b all gave 6). Cost: m
    rows of K̃ (m/n of one pass) and O(m³ + n m b). None where m < b, where the rows of
    K̃ are not cheaper than a product (operator matrices) or where K̃ vanishes on the
    sample."""
    n = Kc.shape[0]
    m = min(n // 2, 10 * b)
    if m < b or Kc.backend == "operator":
        return None
    idx = uniform_centers(n, m, random_state, Kc.device)
    C = Kc.rows(idx).to(torch.float64)  # K̃[idx, :] = K̃[:, idx]ᵀ
    try:
        V = nystrom_basis(C[:, idx], 1e-12).vectors.flip(1)[:, :b]
    except ValueError:  # K̃ = 0 on the sample (e.g. identical points): a Gaussian start
        return None
    return C.T @ V


def _has_inverse_transform(kpca) -> bool:
    if not kpca.fit_inverse_transform:
        raise AttributeError("inverse_transform needs fit_inverse_transform=True at fit time")
    return True


def _flip_signs(V):
    """Deterministic signs: the largest-magnitude entry of each column is positive
    (scikit-learn's ``svd_flip`` convention for ``u``)."""
    idx = V.abs().argmax(dim=0)
    signs = torch.sign(V[idx, torch.arange(V.shape[1], device=V.device)])
    signs[signs == 0] = 1
    return V * signs


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, Estimator):
    r"""Kernel principal component analysis (Schölkopf, Smola and Müller, 1998).

    The principal directions in feature space are :math:`f_j = \sum_i \alpha_{ij}
    \tilde\varphi(x_i)` with :math:`\alpha_j = u_j/\sqrt{\lambda_j}`, where
    :math:`(\lambda_j, u_j)` are the top eigenpairs of the centered Gram matrix
    :math:`\tilde K = (I - U)K(I - U)`, :math:`U = \mathbf 1\mathbf 1^\top/n` (Schölkopf
    et al. 1998, §2; the normalization α = u/√λ gives ‖f_j‖ = 1). The projection of a
    point is
    :math:`\langle f_j, \tilde\varphi(x)\rangle = \tilde k(x, X)\,\alpha_j`; on the
    training points it equals :math:`u_j\sqrt{\lambda_j}`.

    Centering is lazy (``K.centered()``: rank-one corrections of the products, never a
    centered n × n copy on the lazy path; the row sums of the symmetric training Gram,
    one product K1, give the column means too). New points are centered with the training
    statistics: :math:`\tilde k(x, x_i) = k(x, x_i) - \frac1n\sum_l k(x, x_l) -
    \bar k_i + \bar k`, with :math:`\bar k_i` the training column means and
    :math:`\bar k` the training mean.

    Parameters
    ----------
    kernel : Kernel, "precomputed" or None
        Default ``RBF()``. With ``"precomputed"``, ``fit`` takes the training Gram
        matrix (tensor, array or KernelMatrix) and ``transform`` the (m, n) Gram matrix
        of new points against the training points.
    n_components : int or None
        Number of components k; ``None`` keeps every component with a positive
        eigenvalue (dense solver).
    remove_zero_eig : bool
        Drop the components of eigenvalue 0 (after clipping), so that fewer than
        ``n_components`` may be kept; always done for ``n_components=None``
        (scikit-learn's parameter).
    eigen_solver : {"auto", "dense", "lanczos", "randomized", "arpack"}
        ``"dense"``: ``torch.linalg.eigh`` of the materialized centered Gram, O(n³)
        time, O(n²) memory. ``"lanczos"`` (``"arpack"``, scikit-learn's name, is the
        same): :func:`torchkern.linalg.eigsh` (thick-restart Lanczos, one matrix-vector
        product per step). ``"randomized"``: randomized block
        Krylov iteration with Rayleigh–Ritz (Halko et al. 2011; Musco and Musco 2015),
        one *block* product K Q (k + max(10, k) columns, rounded up to a multiple of
        12) per step, started from a Nyström estimate of the eigenvectors — the kernel
        is evaluated once per step for all columns, so it needs several times fewer
        kernel evaluations than Lanczos on lazy Gram matrices, and on a materialized
        Gram several times fewer passes over memory. ``"auto"``: dense when n ≤ 1000,
        k > n/4 or ``n_components=None``, randomized otherwise.
    tol : float or None
        Relative residual ‖K̃u − θu‖ ≤ tol·θ₁ of the iterative solvers; default 1e-8
        (float64) / 1e-5 (float32).
    max_iter : int or None
        Cap on solver steps (Lanczos: products; randomized: block products, default 200).
    fit_inverse_transform : bool
        Learn the pre-image map (see :meth:`inverse_transform`).
    alpha : float
        Ridge of the pre-image kernel ridge regression.
    backend : str or None
        Gram-matrix backend passed to the kernel (``None`` = ``torchkern.config``).
    random_state : None, int or torch.Generator
        Start vectors of the iterative solvers (and the Nyström sample of the randomized
        solver's start block).
    verbose : bool
        Show a progress bar (tqdm, kept on screen): for the iterative solvers the digits
        of relative residual gained toward ``tol`` by the worst of the k eigenpairs, and
        the products taken.

    Attributes
    ----------
    eigenvalues_ : Tensor (k,)
        Eigenvalues of the centered training Gram matrix K̃ (not divided by n), in
        descending order — scikit-learn's ``eigenvalues_``.
    eigenvectors_ : Tensor (n, k)
        Unit-norm eigenvectors of K̃; the largest-magnitude entry of each is positive.
    X_fit_ : Tensor or KernelInput
        Training data (or training Gram for ``"precomputed"``).
    kernel_ : Kernel or "precomputed"
    dual_coef_, X_transformed_fit_ : Tensor
        Pre-image model (when ``fit_inverse_transform``).

    Notes
    -----
    Cost with an iterative solver: O(s · n² d) kernel evaluations for s solver steps
    (s products K V) and O(n k) memory on the lazy backends; ``transform`` of m points
    costs one (m × n) product.

    Where the Gram matrix is nearly its mean c11ᵀ (an RBF on nearly constant data; the
    centering ``RuntimeWarning`` says so) a stored Gram is copied as K − c11ᵀ before the
    solve (its centering is the same matrix; n² more memory, only where ε·tr K exceeds
    ``tol`` times the centered trace, i.e. where products with K would round off the
    centered spectrum: not for an ordinary wide RBF), so the iterative solvers keep the
    precision of the entries
    (n = 1,200 points at 3 ± 10⁻⁷: top eigenvalues 6·10⁻⁶ from an uncancelled reference,
    a dense ``eigh`` of the explicitly centered Gram 6·10⁻⁴). A lazy Gram
    (``backend="blocked"`` or ``"keops"``) cannot be shifted entry by entry: its products
    round at the size of ‖K‖ ≈ n·c, and there the same data gave 1 % errors — materialize
    it (``backend="dense"``) for such data.

    Threads on the CPU (the caller's setting is never changed): with a stored Gram the
    iterative solvers' products K V run in tiles of its upper triangle (half the memory
    traffic of a GEMM) that ``torch.get_num_threads()`` threads take one at a time
    (:func:`torchkern.linalg.tiled.symmetric_tiled_mm`), and the rest of the fit —
    centering, the Nyström start, orthogonalization and Ritz steps — on one thread, so
    that a core held by another process slows the fit by its share of the CPU rather than
    stalling every parallel region. The dense solver's LAPACK call runs on one thread up
    to n = 4,000.

    Examples
    --------
    >>> import torch, torchkern
    >>> X = torch.randn(200, 3, dtype=torch.float64)
    >>> Z = torchkern.KernelPCA(torchkern.RBF(1.0), n_components=2).fit_transform(X)
    >>> Z.shape
    torch.Size([200, 2])
    """

    def __init__(self, kernel=None, n_components=None, *, eigen_solver="auto", tol=None,
                 max_iter=None, fit_inverse_transform=False, alpha=1.0,
                 remove_zero_eig=False, backend=None, random_state=None, verbose=False):
        self.kernel = kernel
        self.n_components = n_components
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.fit_inverse_transform = fit_inverse_transform
        self.alpha = alpha
        self.remove_zero_eig = remove_zero_eig
        self.backend = backend
        self.random_state = random_state
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = is_precomputed(self.kernel)
        return tags

    @property
    def _n_features_out(self):
        """Number of components (``get_feature_names_out``: kernelpca0, kernelpca1, …)."""
        return self.eigenvalues_.shape[0]

    # ---------------------------------------------------------------------------------
    def _check_params(self, n):
        check_bool(self.fit_inverse_transform, "fit_inverse_transform")
        check_bool(self.remove_zero_eig, "remove_zero_eig")
        if self.eigen_solver not in _SOLVERS:
            raise ValueError(f"eigen_solver must be one of {_SOLVERS}, got {self.eigen_solver!r}")
        k = self.n_components
        if k is not None and (not is_int(k) or k < 1):
            raise ValueError(f"n_components must be None or a positive int, got {k!r}")
        if k is not None and k > n:
            # scikit-learn's KernelPCA takes min(n, n_components) (a grid over
            # n_components with small CV folds); this says so
            warnings.warn(f"KernelPCA: n_components={k} is larger than the number of "
                          f"samples n={n}; n components are computed", UserWarning,
                          stacklevel=caller_stacklevel())
            k = n
        if self.tol is not None:
            check_positive(self.tol, "tol")
        if self.max_iter is not None and (not is_int(self.max_iter) or self.max_iter < 1):
            raise ValueError(f"max_iter must be a positive int, got {self.max_iter!r}")
        check_positive(self.alpha, "alpha")
        # scikit-learn's "arpack" (implicitly restarted Lanczos) is our Lanczos solver
        solver = "lanczos" if self.eigen_solver == "arpack" else self.eigen_solver
        if k is None:
            if solver not in ("auto", "dense"):
                raise ValueError("n_components=None needs eigen_solver='dense' or 'auto'")
            return n, "dense"
        return k, solver

    def fit(self, X, y=None):
        """Fit the model on X — any input of the kernel (:mod:`torchkern.inputs`), or a
        training Gram with ``"precomputed"``."""
        self._fit(X)
        return self

    @torch.no_grad()
    def _fit(self, X):
        kernel = resolve_kernel(self.kernel)
        if is_precomputed(kernel):
            if self.fit_inverse_transform:
                raise ValueError("fit_inverse_transform=True cannot be used with "
                                 "kernel='precomputed'")
            X = check_precomputed(X, square=True)
        else:
            X = input_matrix(kernel, X, "X")
            if self.fit_inverse_transform and n_features(X) is None:
                raise ValueError(f"fit_inverse_transform=True needs vector inputs: the "
                                 f"pre-image map regresses onto points of R^d, and X is a "
                                 f"{type(X).__name__}")
        K = kernel_matrix(kernel, X, backend=self.backend, reuse=True)
        n = K.shape[0]
        k, solver = self._check_params(n)
        if solver == "auto":
            # Block Krylov for both representations: a lazy Gram costs one kernel
            # evaluation per product whatever its width, and on a materialized one a
            # product with b ≈ 24 columns costs about 3 matrix-vector products (one pass
            # over memory, BLAS-3) while Lanczos needs ~5k single products.
            solver = "dense" if n <= 1000 or k > n // 4 else "randomized"
        tiled = solver != "dense" and type(K) is DenseKernelMatrix and K.device.type == "cpu"
        if tiled:
            K = _TiledDense(K.tensor, symmetric=not is_precomputed(kernel))
        # With a tiled Gram the products share their tiles over the caller's threads by
        # themselves; everything else (centering corrections, the Nyström start, the
        # solver's bookkeeping: short operations on n × b blocks) runs on one thread, so
        # that none of it waits at a parallel region for a thread another process holds.
        with one_thread(tiled):
            Kc = _centered_symmetric(K)
            trace = cheap_trace(K)
            if trace is not None:
                warn_if_centering_cancels(trace, Kc.mean, n, K.dtype, "KernelPCA")
            tol = self.tol if self.tol is not None else _default_tol(K.dtype)
            Kc, shift = _subtract_mean(K, Kc, trace, tol)
            evals, evecs = self._top_eigenpairs(Kc, k, solver)
            evals = _psd_clip(evals, K.dtype)
            evecs = _flip_signs(evecs)
        if self.n_components is None or self.remove_zero_eig:
            keep = evals > 0
            evals, evecs = evals[keep], evecs[:, keep]
        self.kernel_ = kernel
        self.X_fit_ = X
        self._col_mean = (Kc.col_mean + shift).detach()  # statistics of K itself
        self._mean = (Kc.mean + shift).detach()
        self.eigenvalues_ = evals.to(K.dtype)
        self.eigenvectors_ = evecs.to(K.dtype)
        d = n if is_precomputed(kernel) else n_features(X)
        if d is not None:
            self.n_features_in_ = d
        X_t = self.eigenvectors_ * self.eigenvalues_.sqrt()
        if self.fit_inverse_transform:
            self._fit_preimage(X_t, X)
        return X_t

    def _top_eigenpairs(self, Kc, k, solver):
        """The k largest eigenpairs of the centered Gram, descending, by ``solver``."""
        desc = f"KernelPCA ({solver})"
        if solver == "dense":
            bar = progress_bar(self.verbose, 1, desc, unit="eigh")
            D = Kc.to_dense().to(torch.float64)
            D = (D + D.T) / 2
            one = D.device.type == "cpu" and D.shape[0] <= _ONE_THREAD_DENSE_MAX
            if D.device.type == "cpu" and k < D.shape[0]:
                # LAPACK's subset driver (syevr) computes only the k eigenvectors wanted:
                # about half the time of a full eigendecomposition at k ≪ n.
                import scipy.linalg
                from threadpoolctl import threadpool_limits
                n = D.shape[0]
                with threadpool_limits(1 if one else None, user_api="blas"):
                    w, V = scipy.linalg.eigh(D.numpy(), subset_by_index=[n - k, n - 1],
                                             driver="evr", check_finite=False)
                evals, evecs = torch.from_numpy(w), torch.from_numpy(V)
            else:
                with one_thread(one):
                    evals, evecs = torch.linalg.eigh(D)
            if bar is not None:
                bar.update(1)
                bar.close()
            return evals[-k:].flip(0), evecs[:, -k:].flip(1)
        verbose = desc if self.verbose else False
        if solver == "lanczos":
            return eigsh(Kc, k, tol=self.tol, max_iter=self.max_iter,
                         random_state=self.random_state, verbose=verbose)
        b = _block_width(Kc.shape[0], k, max(10, k))
        start = _nystrom_start(Kc, b, self.random_state)
        evals, evecs, ok, steps = _randomized_eigsh(Kc, k, tol=self.tol, max_iter=self.max_iter,
                                                    random_state=self.random_state, start=start,
                                                    verbose=verbose)
        if not ok:
            res = _ritz_residual(Kc, evals, evecs)
            tol = self.tol if self.tol is not None else _default_tol(Kc.dtype)
            warnings.warn(f"KernelPCA: randomized eigensolver did not reach tol in {steps} "
                          f"steps: largest relative residual {res:.3e} > tol={tol:.1e}; "
                          f"raise max_iter", ConvergenceWarning, stacklevel=4)
        return evals, evecs

    def fit_transform(self, X, y=None, **params):
        """Fit and return the training projections u_j √λ_j, shape (n, k)."""
        return self._fit(X)

    def _scaled_alphas(self):
        nz = self.eigenvalues_ > 0
        alphas = torch.zeros_like(self.eigenvectors_)
        alphas[:, nz] = self.eigenvectors_[:, nz] / self.eigenvalues_[nz].sqrt()
        return alphas

    @torch.no_grad()
    def transform(self, X):
        r"""Project new points: :math:`\tilde k(X, X_{fit})\,U\Lambda^{-1/2}`, shape (m, k).

        With ``"precomputed"``, X is the (m, n) Gram matrix against the training points.
        Cost: one (m × n) kernel product.
        """
        check_fitted(self, "eigenvalues_")
        if is_precomputed(self.kernel_):
            K = kernel_matrix("precomputed", check_precomputed(X, self.X_fit_.shape[0]))
        else:
            X = check_fitted_input(self.kernel_, X, self.X_fit_, estimator=self)
            K = kernel_matrix(self.kernel_, X, self.X_fit_, backend=self.backend)
        with torch.no_grad():
            Kc = K.centered(col_mean=self._col_mean, mean=self._mean)
            return Kc @ self._scaled_alphas().to(K.dtype)

    # -- pre-images --------------------------------------------------------------------
    def _fit_preimage(self, X_t, X):
        # Kernel ridge regression from the projections back to the inputs, with the same
        # kernel (as scikit-learn): dual_coef = (k(Z, Z) + αI)⁻¹ X.
        with torch.no_grad():
            Kz = kernel_matrix(self.kernel_, X_t, backend=self.backend)
            if isinstance(Kz, DenseKernelMatrix):
                A = Kz.to_dense().to(torch.float64)
                A = A + self.alpha * torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
                L = torch.linalg.cholesky(A)
                dual = torch.cholesky_solve(X.to(torch.float64), L).to(X.dtype)
            else:
                dual = cg(Kz.add_diag(self.alpha), X.contiguous(), tol=1e-10
                          if X.dtype == torch.float64 else 1e-6)
        self.dual_coef_ = dual
        self.X_transformed_fit_ = X_t

    @available_if(_has_inverse_transform)
    @torch.no_grad()
    def inverse_transform(self, X):
        r"""Approximate pre-images: :math:`k(Z, Z_{fit})\,(k(Z_{fit}, Z_{fit}) + \alpha
        I)^{-1} X_{fit}` — kernel ridge regression learned at fit time from the training
        projections :math:`Z_{fit}` to the training inputs (Bakır, Weston and Schölkopf,
        2004; scikit-learn's method). Exists only with ``fit_inverse_transform=True``
        (``hasattr(kpca, "inverse_transform")`` says whether pre-images are available).
        """
        check_fitted(self, "dual_coef_")
        Z = check_fitted_input(self.kernel_, X, self.X_transformed_fit_, estimator=self)
        K = kernel_matrix(self.kernel_, Z, self.X_transformed_fit_, backend=self.backend)
        return K @ self.dual_coef_
