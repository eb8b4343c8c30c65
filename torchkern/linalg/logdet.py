"""Log-determinants and traces: exact Cholesky, stochastic Lanczos quadrature, Hutchinson."""

import math

import torch

from .._validation import is_int
from ._common import (
    _check_operator,
    _check_rhs,
    _col_norms,
    _dense,
    _generator,
    _has_dense,
    _inner,
    _maybe_requires_grad,
    _own,
    _rademacher,
    _reduce,
    _rows,
    _sharded,
)
from .cg import _identity, _pcg, _warn_not_converged

_FLOAT64 = torch.float64
_EXACT_MAX_N = 3000


def _exact_cholesky(A):
    dense = _dense(A)
    if dense is None:
        raise TypeError(f"method='exact' needs A as a tensor or with to_dense(), got {type(A).__name__}")
    L, info = torch.linalg.cholesky_ex(dense.to(_FLOAT64))
    if int(info) != 0:
        raise ValueError("A is not positive definite: its Cholesky factorization failed")
    return L


def _choose_method(A, n, method):
    if method not in ("auto", "exact", "slq"):
        raise ValueError(f"method must be 'auto', 'exact' or 'slq', got {method!r}")
    if method == "auto":
        return "exact" if n <= _EXACT_MAX_N and _has_dense(A) else "slq"
    return method


def _check_count(value, name):
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _lanczos_quadrature(A, Q0, AQ0, steps, n):
    """Σ_columns-mean of ‖z‖² e₁ᵀ log(T) e₁ for block Q0 of unit columns (float64 result).

    Runs one Lanczos process per column of Q0 (all in one product A @ Q per step), with
    full reorthogonalization against the stored basis. ``AQ0`` is A @ Q0, already known;
    n is A's order (Q0 holds this process's rows of the vectors when A is sharded).
    Returns the per-column quadratures e₁ᵀ log(T_m) e₁ (shape (p,), float64).
    """
    rows, p = Q0.shape
    m = min(steps, n)
    dtype = Q0.dtype
    # basis[i, j] is the j-th Lanczos vector of column i: batched GEMVs reorthogonalize
    basis = torch.empty(p, m, rows, dtype=dtype, device=Q0.device)
    alpha = torch.zeros(m, p, dtype=_FLOAT64, device=Q0.device)
    beta = torch.zeros(m, p, dtype=_FLOAT64, device=Q0.device)
    q = Q0
    w = AQ0
    for j in range(m):
        basis[:, j] = q.T
        if j > 0:
            w = A @ q
        a = _inner(A, q, w)
        alpha[j] = a
        w = w - a.to(dtype) * q
        if j > 0:
            w = w - beta[j - 1].to(dtype) * basis[:, j - 1].T
        Vj = basis[:, : j + 1]
        wt = w.T.unsqueeze(-1)
        for _ in range(2):
            wt = wt - Vj.transpose(1, 2) @ _reduce(A, Vj @ wt)
        w = wt.squeeze(-1).T
        b = _col_norms(A, w)
        beta[j] = b
        q = w / torch.where(b > 0, b, torch.ones_like(b)).to(dtype)

    # A column whose Krylov space became invariant (β ≈ 0) has an exact smaller T: cut it.
    scale = alpha.abs().amax(dim=0)
    tiny = beta <= 1e2 * torch.finfo(dtype).eps * scale
    alive = torch.ones_like(tiny)
    alive[1:] = torch.cumprod(~tiny[:-1], dim=0).bool()
    diag = torch.where(alive, alpha, torch.ones_like(alpha)).T
    off = torch.where(alive[1:], beta[:-1], torch.zeros_like(beta[:-1])).T
    T = torch.diag_embed(diag) + torch.diag_embed(off, 1) + torch.diag_embed(off, -1)
    theta, Y = torch.linalg.eigh(T)
    live_theta = torch.where(Y[:, 0, :].abs() > 0, theta, torch.ones_like(theta))
    if not bool((live_theta > 0).all()):
        raise ValueError("A is not positive definite: Lanczos found a non-positive Ritz value")
    return (Y[:, 0, :] ** 2 * theta.clamp(min=torch.finfo(_FLOAT64).tiny).log()).sum(dim=1)


class _Whitened:
    """B = M^{-1/2} A M^{-1/2} for a preconditioner M that offers ``inv_sqrt``."""

    def __init__(self, A, M):
        self.A, self.M = A, M
        self.shape, self.dtype, self.device = A.shape, A.dtype, A.device

    def __matmul__(self, V):
        return self.M.inv_sqrt(self.A @ self.M.inv_sqrt(V))


def _whitens(preconditioner):
    return callable(getattr(preconditioner, "inv_sqrt", None)) and \
        callable(getattr(preconditioner, "logdet", None))


def _slq_logdet(A, n, num_probes, lanczos_steps, generator, preconditioner, cg_tol, cg_max_iter):
    if _whitens(preconditioner):
        if _sharded(A):
            raise ValueError("logdet: a whitening preconditioner is not supported on a "
                             "row-sharded A (its square root needs a distributed QR); "
                             "pass preconditioner=None")
        # log det A = log det M + log det(M^{-1/2} A M^{-1/2}); M is held fixed, so the
        # gradient is the SLQ surrogate's on the whitened operator, tr(A⁻¹ ∂A).
        B = _Whitened(A, preconditioner)
        ld = _slq_logdet(B, n, num_probes, lanczos_steps, generator, None, cg_tol, cg_max_iter)
        return ld + preconditioner.logdet().to(ld.dtype)
    Z = _own(A, _rademacher((n, num_probes), A.dtype, torch.device(A.device), generator))
    grad_possible = torch.is_grad_enabled() and _maybe_requires_grad(A) is not False
    AZ = A @ Z if grad_possible else None
    with torch.no_grad():
        AZ0 = AZ.detach() if AZ is not None else A @ Z
        scale = math.sqrt(n)
        quad = _lanczos_quadrature(A, Z / scale, AZ0 / scale, lanczos_steps, n)
        estimate = n * quad.mean()
    value = estimate.to(A.dtype)
    if AZ is not None and AZ.requires_grad:
        # Gradient surrogate: d/dθ mean_i (A⁻¹z_i)ᵀ A z_i = Hutchinson tr(A⁻¹ dA/dθ).
        with torch.no_grad():
            W, info = _pcg(A, Z, preconditioner or _identity, cg_tol, cg_max_iter)
        _warn_not_converged(info, cg_tol, "logdet (cg solves for the gradient)")
        # On a sharded A this is each process's share: the surrogate's value is 0 and the
        # hyperparameter gradients are summed over the processes by the sharded products.
        s = (W * AZ).sum() / num_probes
        value = value + (s - s.detach())
    return value


def logdet(
    A,
    *,
    method="auto",
    num_probes=30,
    lanczos_steps=50,
    preconditioner=None,
    cg_tol=1e-4,
    cg_max_iter=None,
    random_state=None,
):
    r"""log det A of a symmetric positive definite matrix or operator.

    ``"exact"``: :math:`2\sum_i \log L_{ii}` from a float64 Cholesky factor of the dense
    A (``A`` itself or ``A.to_dense()``), O(n³) time and O(n²) memory.

    ``"slq"``: stochastic Lanczos quadrature. With p Rademacher probes z_i,
    :math:`\log\det A = \mathrm{tr}\log A \approx \frac{n}{p}\sum_i e_1^\top \log(T_i) e_1
    = \frac{n}{p}\sum_i\sum_j \tau_{ij}^2 \log\theta_{ij}`, where T_i is the m × m Lanczos
    tridiagonal started from z_i/√n, θ its eigenvalues and τ the first components of its
    eigenvectors (Gauss quadrature of z_iᵀ log(A) z_i). Its gradient is taken through the
    surrogate :math:`s = \frac1p\sum_i (A^{-1}z_i)^\top (A z_i)` with the solve detached,
    whose gradient :math:`\frac1p\sum_i (A^{-1}z_i)^\top \frac{\partial A}{\partial\theta} z_i`
    is the Hutchinson estimate of :math:`\mathrm{tr}(A^{-1}\partial A/\partial\theta)` —
    one batched CG solve, only when a gradient is needed.

    ``"auto"``: exact when n ≤ 3000 and A is a tensor or has ``to_dense()``, else SLQ.

    Parameters
    ----------
    A : torch.Tensor or operator
        Symmetric positive definite (n, n), a tensor or anything with ``shape``,
        ``dtype``, ``device`` and ``@`` (and ``to_dense()`` for ``"exact"``).
    method : {"auto", "exact", "slq"}
    num_probes : int
        p, the number of Rademacher probes (SLQ). The standard error decreases as 1/√p.
    lanczos_steps : int
        m, Lanczos steps per probe (SLQ).
    preconditioner : optional
        A low-rank-plus-ridge preconditioner M ≈ A (:class:`PivotedCholesky`,
        :class:`NystromPreconditioner`, or anything with ``inv_sqrt(V)`` and
        ``logdet()``): SLQ then runs on the whitened M^{-1/2} A M^{-1/2}, whose spectrum is
        clustered near 1, and adds log det M exactly — the Hutchinson variance drops by
        orders of magnitude (the preconditioned log-determinant of Gardner et al. 2018).
        Any other callable (R ↦ M⁻¹R) only preconditions the CG solves of the gradient.
    cg_tol : float
        Relative residual of those solves.
    cg_max_iter : int, optional
        Iteration cap of those solves (default as in :func:`cg`).
    random_state : None, int or torch.Generator
        Probes.

    Returns
    -------
    torch.Tensor
        0-d tensor in A's dtype, differentiable with respect to what A depends on.

    Raises
    ------
    ValueError
        When A is not positive definite (Cholesky fails or a Ritz value is ≤ 0).

    Notes
    -----
    SLQ cost: m products ``A @ Z`` with Z of shape (n, p) (O(n² p m) for a dense or KeOps
    matrix), O(n p m) memory for the reorthogonalized bases, plus a CG solve of width p
    for the gradient. Its error is the Hutchinson error of tr log A (relative error
    ~ √(2/p)·‖log A − diag‖_F / abs(log det A)) plus the quadrature error, which decays
    geometrically in m.

    References
    ----------
    S. Ubaru, J. Chen and Y. Saad, "Fast estimation of tr(f(A)) via stochastic Lanczos
    quadrature", SIAM J. Matrix Anal. Appl. 38 (2017). J. Gardner et al., "GPyTorch",
    NeurIPS 2018. M. Hutchinson, "A stochastic estimator of the trace of the influence
    matrix", 1989.
    """
    n = _check_operator(A, "A")
    method = _choose_method(A, n, method)
    if method == "exact":
        return 2 * _exact_cholesky(A).diagonal().log().sum().to(A.dtype)
    _check_count(num_probes, "num_probes")
    _check_count(lanczos_steps, "lanczos_steps")
    return _slq_logdet(
        A, n, num_probes, lanczos_steps, _generator(random_state), preconditioner, cg_tol,
        cg_max_iter if cg_max_iter is not None else min(10 * n, 1000),
    )


def trace(A, *, num_probes=30, random_state=None):
    r"""tr A: exact from the diagonal when available, else Hutchinson's estimator.

    If A is a tensor or has ``diag()``, returns :math:`\sum_i A_{ii}` exactly (O(n)).
    Otherwise :math:`\mathrm{tr} A \approx \frac1p\sum_{i=1}^p z_i^\top A z_i` with
    Rademacher probes z_i (unbiased, variance :math:`\frac2p\sum_{i\ne j} A_{ij}^2` for
    symmetric A), from one product ``A @ Z`` of width p.

    Parameters
    ----------
    A : torch.Tensor or operator
        Square (n, n).
    num_probes : int
        p, probes for the Hutchinson estimator.
    random_state : None, int or torch.Generator
        Probes.

    Returns
    -------
    torch.Tensor
        0-d tensor, differentiable with respect to what A depends on.

    References
    ----------
    M. Hutchinson, "A stochastic estimator of the trace of the influence matrix for
    Laplacian smoothing splines", Comm. Stat. Simul. Comput. 18 (1989).
    """
    n = _check_operator(A, "A")
    _check_count(num_probes, "num_probes")  # checked even where the diagonal is exact
    if isinstance(A, torch.Tensor):
        return A.diagonal().sum()
    if callable(getattr(A, "diag", None)):
        return _reduce(A, A.diag().sum())
    Z = _own(A, _rademacher((n, num_probes), A.dtype, torch.device(A.device),
                            _generator(random_state)))
    return _reduce(A, (Z * (A @ Z)).sum()) / num_probes


def inv_quad_logdet(
    A,
    b,
    *,
    method="auto",
    num_probes=30,
    lanczos_steps=50,
    preconditioner=None,
    tol=1e-6,
    max_iter=None,
    random_state=None,
):
    r"""(bᵀA⁻¹b, log det A) together, as the Gaussian-process marginal likelihood needs them.

    ``-log p(y) = ½ yᵀ(K + σ²I)⁻¹y + ½ log det(K + σ²I) + (n/2) log 2π``.

    Exact method: one float64 Cholesky factor serves both. SLQ method: one batched CG
    solve of width r + p, :math:`[x, w_1..w_p] = A^{-1}[b, z_1..z_p]`, gives the quadratic
    term and the log-det gradient; the log-det value is the SLQ estimate (see
    :func:`logdet`). Gradients use detached solves and the surrogates
    :math:`2 b^\top x - x^\top A x` (value bᵀx, gradient 2x·db − xᵀ dA x, exact at the
    solution) and :math:`\frac1p\sum_i w_i^\top A z_i`, evaluated in one product of A.

    Parameters
    ----------
    A : torch.Tensor or operator
        Symmetric positive definite (n, n).
    b : torch.Tensor
        Shape (n,) or (n, r).
    method, num_probes, lanczos_steps, random_state
        As in :func:`logdet`.
    preconditioner : callable, optional
        For the CG solve (SLQ method).
    tol, max_iter
        CG relative residual and iteration cap (SLQ method).

    Returns
    -------
    inv_quad : torch.Tensor
        bᵀA⁻¹b: 0-d for 1-D b, shape (r,) (one per column) for 2-D b.
    logdet : torch.Tensor
        0-d.

    Notes
    -----
    Cost (SLQ): one CG solve of width r + p, m Lanczos products of width r + p (the b
    columns ride along so that every product has one width, which matters for KeOps
    formulas compiled per width), one product with gradient.

    References
    ----------
    J. Gardner et al., "GPyTorch: blackbox matrix-matrix Gaussian process inference with
    GPU acceleration", NeurIPS 2018.
    """
    n = _check_operator(A, "A")
    rows = _rows(A, n)  # a row-sharded A: this process's rows of b
    _check_rhs(b, rows, A, "b")
    method = _choose_method(A, n, method)
    vector = b.ndim == 1
    b2 = b[:, None] if vector else b
    r = b2.shape[1]
    if method == "exact":
        L = _exact_cholesky(A)
        y = torch.linalg.solve_triangular(L, b2.to(_FLOAT64), upper=False)
        quad = (y * y).sum(0).to(A.dtype)
        ld = (2 * L.diagonal().log().sum()).to(A.dtype)
        return (quad[0] if vector else quad), ld

    _check_count(num_probes, "num_probes")
    _check_count(lanczos_steps, "lanczos_steps")
    if max_iter is None:
        max_iter = min(10 * n, 1000)
    gen = _generator(random_state)
    Z = _own(A, _rademacher((n, num_probes), A.dtype, torch.device(A.device), gen))
    rhs = torch.cat([b2.detach(), Z], dim=1)
    with torch.no_grad():
        sol, info = _pcg(A, rhs, preconditioner or _identity, tol, max_iter)
        _warn_not_converged(info, tol, "inv_quad_logdet (cg)")
        norms = _col_norms(A, rhs).clamp(min=torch.finfo(_FLOAT64).tiny)
        Q0 = rhs / norms.to(A.dtype)
        quad_all = _lanczos_quadrature(A, Q0, A @ Q0, lanczos_steps, n)
        ld_value = n * quad_all[r:].mean()
    X, W = sol[:, :r], sol[:, r:]
    quad_value = _inner(A, b2.detach(), X).to(A.dtype)
    quad, ld = quad_value, ld_value.to(A.dtype)
    need = torch.is_grad_enabled() and (b.requires_grad or _maybe_requires_grad(A) is not False)
    if need:
        Ar = A @ torch.cat([X, Z], dim=1)
        AX, AZ = Ar[:, :r], Ar[:, r:]
        quad_sur = 2 * (b2 * X).sum(0) - (X * AX).sum(0)
        ld_sur = (W * AZ).sum() / num_probes
        quad = quad + (quad_sur - quad_sur.detach())
        ld = ld + (ld_sur - ld_sur.detach())
    return (quad[0] if vector else quad), ld
