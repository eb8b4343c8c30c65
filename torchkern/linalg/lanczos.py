"""Top-k eigenpairs of a symmetric operator by thick-restart Lanczos."""

import warnings

import torch

from .._threads import num_threads, one_thread
from .._validation import check_int, check_positive, is_int
from ._common import (ConvergenceWarning, _check_operator, _check_symmetric, _col_norms,
                      _dense, _generator, _has_dense, _own, _randn, _reduce, _rows)
from .eig import _ResidualProgress

_FLOAT64 = torch.float64
_DENSE_MAX_N = 500
_SHARED_PRODUCT_MIN_N = 2048


def _default_tol(dtype):
    return 1e-8 if dtype == torch.float64 else 1e-5


def _dense_eigsh(A, k, which):
    dense = _dense(A).detach().to(_FLOAT64)
    evals, evecs = torch.linalg.eigh((dense + dense.T) / 2)
    sel = slice(-k, None) if which == "largest" else slice(0, k)
    return evals[sel].flip(0), evecs[:, sel].flip(1)


def _matvec64(A, v, threads=None):
    """A @ v for one float64 column v (n, 1), computed in A's dtype, returned in float64;
    with ``threads`` torch threads when given (the caller's, inside a one-thread loop)."""
    v = v.to(A.dtype)
    if threads is None:
        return (A @ v).to(_FLOAT64).reshape(-1, 1)
    with num_threads(threads):
        return (A @ v).to(_FLOAT64).reshape(-1, 1)


def _orthogonalize(w, V, A=None):
    """Project w off span(V) twice (classical Gram–Schmidt, reiterated); return (w, coeffs).
    The coefficients Vᵀw are inner products over all rows of A's vectors."""
    h = _reduce(A, V.T @ w)
    w = w - V @ h
    h2 = _reduce(A, V.T @ w)
    return w - V @ h2, h + h2


def _thick_restart_lanczos(A, n, k, which, tol, max_matvecs, ncv, generator, progress=None):
    """On the CPU the loop runs on one torch thread and only the products ``A @ v`` get
    the caller's threads: the reorthogonalization is many short operations on n × m
    blocks, whose parallel regions cost more than their work beside a busy process (as
    in :func:`~torchkern.linalg.eig.block_krylov_eigsh`)."""
    # a stored matrix below 2048 rows: its product (≤ 32 MB read) is too short to share
    outer = 1 if isinstance(A, torch.Tensor) and n < _SHARED_PRODUCT_MIN_N else \
        torch.get_num_threads()
    with one_thread(torch.device(A.device).type == "cpu"):
        return _lanczos_loop(A, n, k, which, tol, max_matvecs, ncv, generator, progress, outer)


def _lanczos_loop(A, n, k, which, tol, max_matvecs, ncv, generator, progress, outer):
    device = torch.device(A.device)
    m = ncv
    V = torch.empty(_rows(A, n), m + 1, dtype=_FLOAT64, device=device)
    H = torch.zeros(m, m, dtype=_FLOAT64, device=device)
    v = _own(A, _randn((n, 1), _FLOAT64, device, generator))
    V[:, :1] = v / _col_norms(A, v)
    start = 0
    matvecs = 0
    anorm = None
    # keep about half of the spare Ritz vectors at each restart (Wu & Simon 2000)
    keep = k + (m - k) // 2
    while True:
        beta = torch.zeros((), dtype=_FLOAT64, device=device)
        for j in range(start, m):
            w = _matvec64(A, V[:, j : j + 1], outer)
            matvecs += 1
            w, h = _orthogonalize(w, V[:, : j + 1], A)
            H[: j + 1, j] = h[:, 0]
            H[j, : j + 1] = h[:, 0]
            beta = _col_norms(A, w)[0]
            scale = H[: j + 1, : j + 1].abs().max()
            if float(beta) <= 1e3 * torch.finfo(_FLOAT64).eps * float(scale):
                # invariant subspace: continue from a fresh direction, coupling zero
                w = _own(A, _randn((n, 1), _FLOAT64, device, generator))
                w, _ = _orthogonalize(w, V[:, : j + 1], A)
                beta = torch.zeros((), dtype=_FLOAT64, device=device)
                V[:, j + 1 : j + 2] = w / _col_norms(A, w)
            else:
                V[:, j + 1 : j + 2] = w / beta
            if j + 1 < m:
                H[j + 1, j] = H[j, j + 1] = beta

        theta, Y = torch.linalg.eigh(H)
        if which == "largest":
            theta, Y = theta.flip(0), Y.flip(1)
        residual = beta * Y[m - 1, :].abs()
        anorm = theta.abs().max()
        bad = int((residual[:k] > tol * anorm).sum())
        if progress is not None:
            progress(matvecs, float(residual[:k].max() / anorm))
        if bad == 0 or matvecs + (m - keep) > max_matvecs:
            break
        V[:, :keep] = V[:, :m] @ Y[:, :keep]
        V[:, keep] = V[:, m]
        H.zero_()
        H[:keep, :keep] = torch.diag(theta[:keep])
        start = keep

    evecs = V[:, :m] @ Y[:, :k]
    evals = theta[:k]
    if which == "smallest":
        evals, evecs = evals.flip(0), evecs.flip(1)
    return evals, evecs, bad, matvecs, residual[:k].max() / anorm


def eigsh(A, k, *, which="largest", tol=None, max_iter=None, ncv=None, random_state=None,
          verbose=False):
    r"""k largest (or smallest) eigenpairs of a symmetric operator, by thick-restart Lanczos.

    Builds an orthonormal Krylov basis :math:`V_m` of :math:`\mathcal{K}_m(A, v_0)` with
    full reorthogonalization (Gram–Schmidt applied twice), takes the Ritz pairs
    :math:`(\theta_i, V_m y_i)` of :math:`H_m = V_m^\top A V_m`, and restarts keeping
    about :math:`k + (m-k)/2` wanted Ritz vectors plus the residual vector (thick
    restart). A pair is converged when its residual
    :math:`\|A u_i - \theta_i u_i\| = \beta_m |e_m^\top y_i| \le \mathrm{tol}\cdot\max_j|\theta_j|`.
    For n ≤ 500, when A is a tensor or has ``to_dense()``, a dense ``eigh`` is used.

    Parameters
    ----------
    A : torch.Tensor or operator
        Symmetric (n, n) matrix or any object with ``shape``, ``dtype``, ``device`` and ``@``.
    k : int
        Number of eigenpairs, 1 ≤ k ≤ n.
    which : {"largest", "smallest"}
        Algebraically largest or smallest eigenvalues.
    tol : float, optional
        Residual tolerance relative to the largest Ritz value in magnitude; default 1e-8
        for float64, 1e-5 for float32.
    max_iter : int, optional
        Cap on products ``A @ v``, at least 1 (as ``scipy.sparse.linalg.eigsh``'s
        ``maxiter``: there are no eigenpairs without a product); default
        ``max(1000, 50 * ncv)``.
    ncv : int, optional
        Size m of the Krylov basis; default ``min(n, max(2k + 1, k + 20))``.
    random_state : None, int or torch.Generator
        Start vector.
    verbose : bool or str
        Show a progress bar (tqdm, kept on screen) after each restart cycle: the digits
        of relative residual gained toward ``tol`` by the worst of the k pairs, and the
        products taken. A string is the bar's label.

    Returns
    -------
    eigenvalues : torch.Tensor
        Shape (k,), in descending order, dtype of A.
    eigenvectors : torch.Tensor
        Shape (n, k), orthonormal columns, column i for eigenvalue i. Signs are arbitrary.
        Neither output carries gradients.

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` products did not reach ``tol`` for all k pairs.

    Notes
    -----
    Cost: one product ``A @ v`` per Lanczos step (O(n²) for a dense or KeOps matrix) plus
    O(n m) for reorthogonalization; O(n m) memory. Eigenvalues converge fastest where the
    spectrum is well separated; the largest eigenvalues of a kernel matrix typically need
    a few times m products, the smallest (clustered near zero) many more.

    References
    ----------
    C. Lanczos (1950); K. Wu and H. Simon, "Thick-restart Lanczos method for large
    symmetric eigenvalue problems", SIAM J. Matrix Anal. Appl. 22 (2000).
    """
    n = _check_operator(A, "A")
    _check_symmetric(A, "A")
    if not is_int(k) or not 1 <= k <= n:
        raise ValueError(f"k must be an int with 1 <= k <= n={n}, got {k!r}")
    if which not in ("largest", "smallest"):
        raise ValueError(f"which must be 'largest' or 'smallest', got {which!r}")
    if tol is None:
        tol = _default_tol(A.dtype)
    check_positive(tol, "tol")
    if ncv is None:
        ncv = min(n, max(2 * k + 1, k + 20))
    if not is_int(ncv) or not k < ncv <= n and not ncv == n:
        raise ValueError(f"ncv must be an int with k < ncv <= n, got {ncv!r}")
    if max_iter is None:
        max_iter = max(1000, 50 * ncv)
    check_int(max_iter, "max_iter")
    gen = _generator(random_state)

    with torch.no_grad():
        if n <= _DENSE_MAX_N and _has_dense(A):
            evals, evecs = _dense_eigsh(A, k, which)
        else:
            progress = _ResidualProgress(verbose, tol, "eigsh (Lanczos)")
            try:
                evals, evecs, bad, matvecs, res = _thick_restart_lanczos(
                    A, n, k, which, tol, max_iter, ncv, gen, progress
                )
            finally:
                progress.close()
            if bad:
                warnings.warn(
                    f"eigsh: {bad} of {k} eigenpairs did not converge in {matvecs} products; "
                    f"largest relative residual {float(res):.3e} > tol={tol:.1e}; raise "
                    "max_iter or ncv",
                    ConvergenceWarning,
                    stacklevel=2,
                )
    return evals.to(A.dtype), evecs.to(A.dtype)
