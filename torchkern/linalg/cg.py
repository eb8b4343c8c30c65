"""Batched preconditioned conjugate gradient for symmetric positive definite operators."""

import warnings
from typing import NamedTuple

import torch

from ._common import ConvergenceWarning, _check_operator, _check_rhs, _dot, _maybe_requires_grad

_FLOAT64 = torch.float64
_MAX_ITER_CAP = 1000


class CGInfo(NamedTuple):
    """What :func:`cg` reached.

    Attributes
    ----------
    iterations : int
        Number of CG steps taken (one product ``A @ P`` of width r each). The true
        residual ``B - A @ X`` is recomputed when the recurrences claim convergence;
        those products are not counted.
    residual : torch.Tensor
        Final true relative residual ``‖b_j - A x_j‖ / ‖b_j‖`` of each column, shape (r,)
        (a 0-d tensor when ``B`` was 1-D), in float64.
    converged : bool
        Whether every column reached ``tol``.
    """

    iterations: int
    residual: torch.Tensor
    converged: bool


def _default_max_iter(n):
    return min(10 * n, _MAX_ITER_CAP)


def _pcg(A, B, precond, tol, max_iter, X0=None):
    """Solve A X = B column by column; B is (n, r). No autograd. Returns (X, CGInfo).

    Scalars (pᵀAp, rᵀz) are accumulated in float64 so that float32 operators keep
    accurate step lengths. When the recursive residuals of all columns pass ``tol``
    the true residual B − AX is recomputed; columns it rejects restart CG from their
    true residual (the recursive residual drifts from the true one in float32).
    """
    dtype = B.dtype
    b_norm = B.to(_FLOAT64).norm(dim=0)
    nonzero = b_norm > 0
    b_den = torch.where(nonzero, b_norm, torch.ones_like(b_norm))

    if X0 is None:
        X = torch.zeros_like(B)
        R = B.clone()
    else:
        X = X0.clone()
        X[:, ~nonzero] = 0
        R = B - A @ X
    res = R.to(_FLOAT64).norm(dim=0) / b_den
    active = nonzero & (res > tol)

    it = 0
    while bool(active.any()) and it < max_iter:
        Z = precond(R)
        P = Z.clone()
        rz = _dot(R, Z)
        while it < max_iter:
            AP = A @ P
            it += 1
            pAp = _dot(P, AP)
            bad = active & ~(pAp > 0)
            alpha = torch.where(active & ~bad, rz / pAp, torch.zeros_like(pAp))
            X.add_(alpha.to(dtype) * P)
            R.sub_(alpha.to(dtype) * AP)
            res = R.to(_FLOAT64).norm(dim=0) / b_den
            active = active & (res > tol)
            any_active, any_bad = torch.stack([active.any(), bad.any()]).tolist()
            if any_bad:
                raise ValueError(
                    "A is not positive definite (or contains NaN): cg met pᵀAp <= 0 "
                    f"at iteration {it}"
                )
            if not any_active:
                break
            Z = precond(R)
            rz_new = _dot(R, Z)
            beta = torch.where(active, rz_new / rz, torch.zeros_like(rz))
            rz = rz_new
            P = Z + beta.to(dtype) * P
        # Verify with the true residual; restart the columns it rejects.
        R = B - A @ X
        res = R.to(_FLOAT64).norm(dim=0) / b_den
        active = nonzero & (res > tol)

    converged = not bool(active.any())
    return X, CGInfo(iterations=it, residual=res, converged=converged)


def _warn_not_converged(info, tol, what="cg"):
    if not info.converged:
        warnings.warn(
            f"{what} did not converge in {info.iterations} iterations: largest relative "
            f"residual {float(info.residual.max()):.3e} > tol={tol:.1e}; raise max_iter "
            "or use a preconditioner",
            ConvergenceWarning,
            stacklevel=3,
        )


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


def cg(A, B, *, preconditioner=None, tol=1e-6, max_iter=None, x0=None, return_info=False):
    r"""Solve :math:`A X = B` for symmetric positive definite A by (preconditioned) CG.

    Runs the conjugate gradient method of Hestenes and Stiefel on the r columns of
    ``B`` at once: one product ``A @ P`` of shape (n, r) per iteration, a step length
    :math:`\alpha_j = r_j^\top z_j / p_j^\top A p_j` and direction update
    :math:`\beta_j = r_{j+1}^\top z_{j+1} / r_j^\top z_j` per column
    (:math:`z = M r`, M the preconditioner). A column stops, and is frozen, once its
    relative residual :math:`\|b_j - A x_j\| / \|b_j\| \le` ``tol``. Inner products are
    taken in float64; before stopping the true residual is recomputed and columns whose
    true residual fails ``tol`` are restarted from it, so float32 solves do not report
    false convergence.

    Parameters
    ----------
    A : torch.Tensor or operator
        Symmetric positive definite (n, n) matrix, or any object with ``shape``,
        ``dtype``, ``device`` and ``A @ V`` for V of shape (n, r) (a lazy KernelMatrix).
        A is only multiplied, never materialized.
    B : torch.Tensor
        Right-hand side(s) of shape (n,) or (n, r), same dtype and device as A.
    preconditioner : callable, optional
        ``preconditioner(R) ≈ A⁻¹ R`` for R of shape (n, r), symmetric positive
        definite (e.g. :class:`PivotedCholesky`, :class:`NystromPreconditioner`).
    tol : float
        Relative residual at which a column stops.
    max_iter : int, optional
        Cap on iterations; default ``min(10 n, 1000)``. CG never runs past it.
    x0 : torch.Tensor, optional
        Initial guess, same shape as ``B``.
    return_info : bool
        Also return a :class:`CGInfo` (iterations, per-column residual, converged).

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
        When ``max_iter`` is reached before ``tol``, with the residual reached.

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
    (batched CG on kernel matrices).

    Examples
    --------
    >>> import torch
    >>> from torchkern.linalg import cg
    >>> A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    >>> cg(A, torch.tensor([1.0, 2.0], dtype=torch.float64), tol=1e-12)
    tensor([0.0909, 0.6364], dtype=torch.float64)
    """
    n = _check_operator(A, "A")
    _check_rhs(B, n, A, "B")
    if not tol > 0:
        raise ValueError(f"tol must be positive, got {tol}")
    if max_iter is None:
        max_iter = _default_max_iter(n)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 0:
        raise ValueError(f"max_iter must be a non-negative int, got {max_iter!r}")
    if x0 is not None:
        if not isinstance(x0, torch.Tensor) or x0.shape != B.shape:
            raise ValueError(f"x0 must be a tensor of the shape of B {tuple(B.shape)}")
        _check_rhs(x0, n, A, "x0")
    precond = _identity if preconditioner is None else preconditioner
    if not callable(precond):
        raise TypeError(f"preconditioner must be callable, got {type(preconditioner).__name__}")

    vector = B.ndim == 1
    B2 = B.detach().reshape(n, -1)
    X0 = None if x0 is None else x0.detach().reshape(n, -1)
    with torch.no_grad():
        X, info = _pcg(A, B2, precond, tol, max_iter, X0)
    _warn_not_converged(info, tol)

    if torch.is_grad_enabled():
        needs = B.requires_grad or _maybe_requires_grad(A) is not False
        if needs:
            AX = A @ X
            if B.requires_grad or AX.requires_grad:

                def solve(G):
                    with torch.no_grad():
                        Y, back_info = _pcg(A, G.reshape(n, -1), precond, tol, max_iter)
                    _warn_not_converged(back_info, tol, "cg (backward solve)")
                    return Y.reshape(G.shape)

                X = X + _AdjointSolve.apply(B.reshape(n, -1) - AX, solve)

    if vector:
        X = X.reshape(n)
        info = info._replace(residual=info.residual.reshape(()))
    return (X, info) if return_info else X
