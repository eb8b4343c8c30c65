"""Batched preconditioned conjugate gradient for symmetric positive definite operators."""

import warnings
from typing import NamedTuple

import torch

from .._validation import check_int, check_positive
from ._common import (ConvergenceWarning, _check_operator, _check_preconditioner, _check_rhs,
                      _check_symmetric, _col_norms, _inner,
                      _maybe_requires_grad, _rows)

_FLOAT64 = torch.float64
_MAX_ITER_CAP = 1000
# cg's default tol (relative residual), for float64 and float32 alike; in float32 the
# default accepts the rounding of the returned X (cg's docstring, "tol").
DEFAULT_TOL = 1e-6
# Iterative refinement: each float32 correction solve asks for this relative reduction at
# most (the float32 recursion stays close to the true residual down to here), and a round
# that shrinks the true residual by less than _STALL is at the floor set by rounding.
_INNER_TOL = 1e-4
_STALL = 0.5


class CGInfo(NamedTuple):
    """What :func:`cg` reached.

    Attributes
    ----------
    iterations : int
        Number of CG steps taken (one product ``A @ P`` of width r each). The true
        residual ``B - A @ X`` is recomputed when the recurrences claim convergence;
        those products are not counted.
    residual : torch.Tensor
        Final true relative residual ``‖b_j - A x_j‖ / ‖b_j‖`` of each column of the
        returned X, shape (r,) (a 0-d tensor when ``B`` was 1-D), in float64. For a
        float32 operator known only through ``@`` (no rows) it is computed from float32
        products, so it is right only to within their rounding.
    converged : bool
        Whether every column reached ``tol`` (with the default ``tol`` in float32: the
        float64 X before rounding did; ``residual`` may then exceed 1e-6 by the rounding).
    stalled : bool
        Whether CG stopped because the residual no longer decreased: the products with A
        (or, in float32, the returned X) are not accurate enough for ``tol``. More
        iterations or a preconditioner would not help.
    """

    iterations: int
    residual: torch.Tensor
    converged: bool
    stalled: bool = False


def _default_max_iter(n):
    return min(10 * n, _MAX_ITER_CAP)


def _cg_steps(A, X, R, active, precond, tol, max_iter, it, b_den, report=None):
    """CG iterations on the columns ``active`` of A X = B from X with R = B − A X.

    Updates X and R in place and stops when every active column's recursive residual
    ‖R_j‖ / b_den_j is ≤ tol (a float or one value per column) or after ``max_iter``
    steps in all (``it`` counts those already taken). Scalars (pᵀAp, rᵀz) are accumulated
    in float64 so that float32 operators keep accurate step lengths.
    Returns (it, claimed): claimed is True when the recursion passed ``tol``.
    """
    dtype = R.dtype
    Z = precond(R)
    P = Z.clone()
    rz = _inner(A, R, Z)
    while it < max_iter:
        AP = A @ P
        it += 1
        pAp = _inner(A, P, AP)
        bad = active & ~(pAp > 0)
        alpha = torch.where(active & ~bad, rz / pAp, torch.zeros_like(pAp))
        X.add_(alpha.to(dtype) * P)
        R.sub_(alpha.to(dtype) * AP)
        res = _col_norms(A, R) / b_den
        active = active & (res > tol)
        any_active, any_bad = torch.stack([active.any(), bad.any()]).tolist()
        if any_bad:
            raise ValueError(
                "A is not positive definite (or contains NaN): cg met pᵀAp <= 0 "
                f"at iteration {it}"
            )
        if report is not None:
            report(it, res)
        if not any_active:
            return it, True
        Z = precond(R)
        rz_new = _inner(A, R, Z)
        beta = torch.where(active, rz_new / rz, torch.zeros_like(rz))
        rz = rz_new
        P = Z + beta.to(dtype) * P
    return it, False


def _pcg(A, B, precond, tol, max_iter, X0=None, progress=None, accept_rounding=False):
    """Solve A X = B column by column; B is (n, r). No autograd. Returns (X, CGInfo).

    float64: CG whose claimed convergence is checked against the true residual B − AX;
    columns that fail restart from it, and stop as stalled when a restart gains less than
    a factor 2. float32: mixed-precision iterative refinement (:func:`_refine`, which
    takes ``accept_rounding``).
    ``progress(iterations, residuals)`` is called after every step with the estimated
    relative residual of each column.
    """
    if B.dtype != _FLOAT64:
        return _refine(A, B, precond, tol, max_iter, X0, progress, accept_rounding)
    b_den, nonzero = _norms(B, A)
    if X0 is None:
        X = torch.zeros_like(B)
        R = B.clone()
    else:
        X = X0.clone()
        X[:, ~nonzero] = 0
        R = B - A @ X
    res = _col_norms(A, R) / b_den
    active = nonzero & (res > tol)
    stalled = torch.zeros_like(active)
    it = 0
    while bool(active.any()) and it < max_iter:
        before = res
        it, claimed = _cg_steps(A, X, R, active, precond, tol, max_iter, it, b_den, progress)
        # Verify with the true residual; restart the columns it rejects.
        R = B - A @ X
        res = _col_norms(A, R) / b_den
        if claimed:
            stalled |= active & (res > tol) & (res > _STALL * before)
        active = nonzero & (res > tol) & ~stalled
    return X, _info(it, res, nonzero, tol, stalled)


def _norms(B, A=None):
    """Column norms of B in float64 (over all rows of A's vectors), with 1 for zero
    columns, and the non-zero mask."""
    b_norm = _col_norms(A, B)
    nonzero = b_norm > 0
    return torch.where(nonzero, b_norm, torch.ones_like(b_norm)), nonzero


def _info(it, res, nonzero, tol, stalled, crit=None):
    """CGInfo reporting ``res``; converged when ``crit`` (default ``res``) meets tol."""
    converged = not bool((nonzero & ((res if crit is None else crit) > tol)).any())
    return CGInfo(iterations=it, residual=res, converged=converged,
                  stalled=not converged and bool(stalled.any()))


# Kernel-matrix backends whose rows cost more than a product: an operator has none, and
# a row of a feature matrix Φ_X Φ_Yᵀ costs O(m·p) where a product with it costs O(p).
_NO_ROWS = ("operator", "features")


def _float64_products(A):
    """``V ↦ A V`` with A's entries (in A's dtype) multiplied and summed in float64, read
    in row blocks of at most ~2²⁴ entries; None when A offers no rows, or none cheaper than
    its products (an operator known only through ``@``, a low-rank feature matrix)."""
    if isinstance(A, torch.Tensor):
        rows = max(1, 2**24 // max(A.shape[1], 1))
        blocks = lambda: ((s, min(s + rows, A.shape[0]), A[s:s + rows])  # noqa: E731
                          for s in range(0, A.shape[0], rows))
    elif callable(getattr(A, "row_blocks", None)) and \
            not any(b in str(getattr(A, "backend", "operator")) for b in _NO_ROWS):
        blocks = A.row_blocks
    else:
        return None

    def matmul(V):
        out = torch.empty(A.shape[0], V.shape[1], dtype=_FLOAT64, device=V.device)
        for s, e, block in blocks():
            torch.mm(block.to(_FLOAT64), V, out=out[s:e])
        return out

    return matmul


def _refine(A, B, precond, tol, max_iter, X0=None, progress=None, accept_rounding=False):
    r"""Mixed-precision iterative refinement with CG in A's precision (float32).

    X is accumulated in float64 and the residual R = B − A X is formed in float64: with
    A's entries multiplied in float64 when A offers its rows (a tensor or a kernel
    matrix), else from products in A's precision with X split into its rounding and the
    rest, A X = A x_hi + A x_lo, so that rounding X does not cap the accuracy. Each round
    solves the correction equation A D = R by CG in A's precision to the relative
    residual that reaches ``tol`` (at most ``_INNER_TOL``: the float32 recursion is
    reliable to there), then X += D. The reported residual is that of X rounded to A's
    precision, which is what is returned. Rounds stop at ``tol``, after ``max_iter`` CG
    steps in all, or when a round gains less than a factor 2 (the floor set by rounding).
    With ``accept_rounding`` a column is done once the float64 X meets ``tol``: the
    returned X is then its rounding to A's precision, whose own residual (reported) may
    lie above ``tol`` by that rounding, about eps·‖A‖‖x‖/‖b‖.

    Reference: J. H. Wilkinson, *Rounding Errors in Algebraic Processes* (1963), ch. 3;
    E. Carson and N. J. Higham, "Accelerating the solution of linear systems by iterative
    refinement in three precisions", SIAM J. Sci. Comput. 40 (2018).
    """
    dtype = B.dtype
    r = B.shape[1]
    B64 = B.to(_FLOAT64)
    b_den, nonzero = _norms(B, A)
    X64 = torch.zeros_like(B64) if X0 is None else X0.to(_FLOAT64) * nonzero
    exact = _float64_products(A)

    def residuals(X64):
        """B − A X and the relative residuals of X and of X rounded to A's dtype."""
        hi = X64.to(dtype)
        if exact is not None:
            AX = exact(torch.cat([X64, hi.to(_FLOAT64)], dim=1))
            R, R_out = B64 - AX[:, :r], B64 - AX[:, r:]
        else:
            lo = (X64 - hi.to(_FLOAT64)).to(dtype)
            AX = (A @ torch.cat([hi, lo], dim=1)).to(_FLOAT64)
            R_out = B64 - AX[:, :r]
            R = R_out - AX[:, r:]
        return R, _col_norms(A, R) / b_den, _col_norms(A, R_out) / b_den

    def unmet(res, res_out):
        """The residual judged against tol: the returned X's, or either."""
        return torch.minimum(res, res_out) if accept_rounding else res_out

    if X0 is None:
        R, res = B64, nonzero.to(_FLOAT64)
        res_out = res
    else:
        R, res, res_out = residuals(X64)
    active = nonzero & (unmet(res, res_out) > tol)
    stalled = torch.zeros_like(active)
    it = 0
    while bool(active.any()) and it < max_iter:
        scale = torch.where(active, res * b_den, torch.zeros_like(res))
        Rw = (R / torch.where(active, scale, torch.ones_like(scale))).to(dtype) * active
        inner_tol = (tol / res).clamp(min=_INNER_TOL)
        D = torch.zeros_like(Rw)
        report = None
        if progress is not None:
            def report(k, inner, res=res, res_out=res_out, active=active):
                progress(k, torch.where(active, inner * res, res_out))
        it, claimed = _cg_steps(A, D, Rw, active, precond, inner_tol, max_iter, it,
                                torch.ones_like(res), report)
        X64 += D.to(_FLOAT64) * scale
        before = unmet(res, res_out)
        R, res, res_out = residuals(X64)
        crit = unmet(res, res_out)
        if claimed:
            stalled |= active & (crit > tol) & (crit > _STALL * before)
        stalled |= (res == 0) & (crit > tol)  # X is exact; only its rounding is off
        active = nonzero & (crit > tol) & ~stalled
    return X64.to(dtype), _info(it, res_out, nonzero, tol, stalled, unmet(res, res_out))


def _warn_not_converged(info, tol, what="cg", dtype=None):
    """One ConvergenceWarning whose advice fits why ``tol`` was not reached."""
    if info.converged:
        return
    reached = float(info.residual.max())
    if info.stalled:
        if dtype == torch.float32:
            why = ("that is as far as float32 resolves this system (rounding in the float32 "
                   "products with A and in the float32 solution itself: about "
                   "eps·‖A‖·‖x‖ with eps = 6e-8, up to a factor n for the products)")
            fix = "pass float64 data for a smaller residual, or use a tol above it"
        else:
            why = ("the products with A are not accurate enough for a smaller residual "
                   "(e.g. an operator evaluated in float32)")
            fix = "compute the products in float64, or use a tol above it"
        msg = (f"{what} stopped at relative residual {reached:.3e} > tol={tol:.1e} after "
               f"{info.iterations} iterations: {why}; more iterations or a preconditioner "
               f"will not help — {fix}")
    else:
        msg = (f"{what} did not converge in {info.iterations} iterations: largest relative "
               f"residual {reached:.3e} > tol={tol:.1e}; raise max_iter or use a (better) "
               "preconditioner")
    warnings.warn(msg, ConvergenceWarning, stacklevel=3)


class _AdjointSolve(torch.autograd.Function):
    """Identity-zero node whose backward applies A⁻¹ (A symmetric).

    Used as ``X + _AdjointSolve.apply(B − A @ X)`` with X detached: the value is X and
    the vector-Jacobian product is that of X = A⁻¹B, i.e. dX = A⁻¹(dB − dA·X), without
    differentiating through the CG iterations.
    """

    @staticmethod
    def forward(ctx, residual, solve):
        ctx.solve = solve
        return torch.zeros_like(residual)

    @staticmethod
    def backward(ctx, grad_out):
        return ctx.solve(grad_out), None


def _identity(R):
    return R


def _columns(B):
    """B as (rows, r): a vector becomes one column (rows may be 0 on a sharded rank)."""
    return B[:, None] if B.ndim == 1 else B


def cg(A, B, *, preconditioner=None, tol=None, max_iter=None, x0=None, return_info=False,
       verbose=False):
    r"""Solve :math:`A X = B` for symmetric positive definite A by (preconditioned) CG.

    Runs the conjugate gradient method of Hestenes and Stiefel on the r columns of
    ``B`` at once: one product ``A @ P`` of shape (n, r) per iteration, a step length
    :math:`\alpha_j = r_j^\top z_j / p_j^\top A p_j` and direction update
    :math:`\beta_j = r_{j+1}^\top z_{j+1} / r_j^\top z_j` per column
    (:math:`z = M r`, M the preconditioner). A column stops, and is frozen, once its
    relative residual :math:`\|b_j - A x_j\| / \|b_j\| \le` ``tol``. Inner products are
    taken in float64; before stopping the true residual is recomputed and columns whose
    true residual fails ``tol`` are restarted from it, so no solve reports false
    convergence.

    float32 operators are solved by mixed-precision iterative refinement: X is accumulated
    in float64, the residual B − AX is formed in float64 from float32 products (X split
    into its float32 rounding and the remainder), and float32 CG solves each correction
    equation A D = R to a moderate accuracy. float32 solves thus reach ``tol`` = 1e-6 in
    about the products a float64 solve takes, down to the floor set by float32 rounding
    of the returned X and, for operators known only through ``@``, of the products
    (about eps₃₂·‖A‖‖x‖ / ‖b‖, eps₃₂ = 6e-8; e.g. 1.6e-6 for an RBF Gram of 50,000
    points in 3-d plus I, 1.8e-6 for K + 0.1·I on 3,000 such points). With the default
    ``tol`` that floor is accepted: a column is done when its float64 X meets 1e-6,
    and the float32 rounding of that X is returned — the best float32 answer, whose own
    residual ``info.residual`` may lie above 1e-6 by the rounding. An explicit ``tol``
    is asked of the returned X itself: below the floor CG stops early with a warning
    rather than running to ``max_iter``.

    Parameters
    ----------
    A : torch.Tensor or operator
        Symmetric positive definite (n, n) matrix, or any object with ``shape``,
        ``dtype``, ``device`` and ``A @ V`` for V of shape (n, r) (a lazy KernelMatrix).
        A is only multiplied, never materialized. A row-sharded operator
        (:mod:`torchkern.distributed`) takes and returns this process's rows of B and X,
        with every inner product and norm all-reduced.
    B : torch.Tensor
        Right-hand side(s) of shape (n,) or (n, r), same dtype and device as A.
    preconditioner : callable, optional
        ``preconditioner(R) ≈ A⁻¹ R`` for R of shape (n, r), symmetric positive
        definite (e.g. :class:`PivotedCholesky`, :class:`NystromPreconditioner`).
    tol : float, optional
        Relative residual at which a column stops. Default (None): 1e-6, met in float32
        by the float64-accumulated X before its rounding to float32 (above); in float64
        the same as ``tol=1e-6``.
    max_iter : int, optional
        Cap on iterations; default ``min(10 n, 1000)``. CG never runs past it. 0 is
        allowed (as ``scipy.sparse.linalg.cg``'s ``maxiter=0``): the start ``x0`` (else 0)
        is returned, with a warning unless it already meets ``tol``.
    x0 : torch.Tensor, optional
        Initial guess, same shape as ``B``.
    return_info : bool
        Also return a :class:`CGInfo` (iterations, per-column residual, converged).
    verbose : bool or str
        Show a tqdm bar of the digits of residual gained toward ``tol`` (a string labels
        the bar). It stays on screen when the solve ends.

    Returns
    -------
    X : torch.Tensor
        Solution, shape of ``B``. Differentiable with respect to ``B`` and to whatever
        ``A @ V`` depends on (kernel hyperparameters, inputs) by the implicit-function
        rule dX = A⁻¹(dB − dA X): the backward pass is one more CG solve with the same
        settings, not a backward through the iterations.
    info : CGInfo
        Only when ``return_info=True``.

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` is reached before ``tol``, with the residual reached; or when
        the residual stops decreasing above ``tol`` because the products with A (float32)
        cannot resolve it, saying so.

    Raises
    ------
    ValueError
        Shapes that do not match, NaN/inf in ``B`` or ``x0``, non-positive curvature
        (A not positive definite).

    Notes
    -----
    Cost: k products with A (O(n² r) each for a dense or KeOps matrix, O(n r) memory
    besides A), plus O(n r) per iteration, k ≲ √κ log(2/tol) for condition number κ of
    the preconditioned system. For A = K + λI with a kernel matrix K, a preconditioner
    cuts k by orders of magnitude when λ is small.

    References
    ----------
    M. R. Hestenes and E. Stiefel, "Methods of conjugate gradients for solving linear
    systems", J. Res. NBS 49 (1952). J. Gardner et al., "GPyTorch: blackbox
    matrix-matrix Gaussian process inference with GPU acceleration", NeurIPS 2018
    (batched CG on kernel matrices). E. Carson and N. J. Higham, "Accelerating the
    solution of linear systems by iterative refinement in three precisions", SIAM J.
    Sci. Comput. 40 (2018) (refinement with low-precision inner solves).

    Examples
    --------
    >>> import torch
    >>> from torchkern.linalg import cg
    >>> A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    >>> cg(A, torch.tensor([1.0, 2.0], dtype=torch.float64), tol=1e-12)
    tensor([0.0909, 0.6364], dtype=torch.float64)
    """
    n = _check_operator(A, "A")
    _check_symmetric(A, "A")
    rows = _rows(A, n)  # a row-sharded A: this process's rows of B and X
    _check_rhs(B, rows, A, "B")
    # The default tol accepts the rounding of a float32 X (see the docstring); an
    # explicit tol is asked of the returned X itself.
    accept_rounding = tol is None
    if tol is None:
        tol = DEFAULT_TOL
    check_positive(tol, "tol")  # an infinite tol returned X = 0 as converged
    if max_iter is None:
        max_iter = _default_max_iter(n)
    check_int(max_iter, "max_iter", low=0)
    if x0 is not None:
        if not isinstance(x0, torch.Tensor) or x0.shape != B.shape:
            raise ValueError(f"x0 must be a tensor of the shape of B {tuple(B.shape)}")
        _check_rhs(x0, rows, A, "x0")
    precond = _check_preconditioner(preconditioner, rows) or _identity

    vector = B.ndim == 1
    B2 = _columns(B.detach())
    X0 = None if x0 is None else _columns(x0.detach())
    bar = None
    if verbose:
        from .._progress import ResidualBar
        bar = ResidualBar(tol, verbose if isinstance(verbose, str) else "cg")
    with torch.no_grad():
        try:
            X, info = _pcg(A, B2, precond, tol, max_iter, X0,
                           None if bar is None else lambda k, res: bar.update(k, float(res.max())),
                           accept_rounding)
            if bar is not None:
                bar.update(info.iterations, float(info.residual.max()))
        finally:
            if bar is not None:
                bar.close()
    _warn_not_converged(info, tol, dtype=B.dtype)

    if torch.is_grad_enabled():
        needs = B.requires_grad or _maybe_requires_grad(A) is not False
        if needs:
            AX = A @ X
            if B.requires_grad or AX.requires_grad:

                def solve(G):
                    with torch.no_grad():
                        Y, back_info = _pcg(A, _columns(G), precond, tol, max_iter,
                                            accept_rounding=accept_rounding)
                    _warn_not_converged(back_info, tol, "cg (backward solve)", B.dtype)
                    return Y.reshape(G.shape)

                X = X + _AdjointSolve.apply(_columns(B) - AX, solve)

    if vector:
        X = X.reshape(rows)
        info = info._replace(residual=info.residual.reshape(()))
    return (X, info) if return_info else X
