r"""The Newton step of a kernel model with a smooth per-sample loss.

For :math:`\min_{A, b}\ C \sum_i \ell_i(F_i) + \tfrac12 \operatorname{tr}(A^\top K A)`
with decision values :math:`F = KA + \mathbf 1 b^\top` (n samples, c outputs; A is
n × c, the intercept b unpenalized), let :math:`G_i = \nabla\ell_i(F_i)` and
:math:`S_i = (\nabla^2\ell_i(F_i))^{1/2}` (c × c). The full Newton step — exact Hessian,
cross-output terms included — is one symmetric positive definite system

.. math::

    (I + C\, S K S)\,\beta = C\, S\,(F + C K G) - C\, S\,\mathbf 1\, b^\top,
    \qquad A^{+} = -C\,G + S\beta,

(S = blockdiag(S_i)), with b⁺ fixed by the optimality of the intercept,
Σ_i A⁺_i = 0: one extra right-hand side per output and a c × c system (a Schur
complement). This is iteratively reweighted least squares, each step a weighted kernel
ridge regression (J. Zhu and T. Hastie, "Kernel logistic regression and the import vector
machine", JCGS 2005). :func:`newton_direction` solves it by preconditioned CG
(:func:`~torchkern.linalg.cg`) with :class:`NewtonPreconditioner`, the Woodbury inverse
of I + C S L Lᵀ S for a low-rank K ≈ L Lᵀ — or, when no factor is given (small stored
Grams), by one Cholesky factorization of the dense (n·c) × (n·c) system.
"""
from __future__ import annotations

import torch

from .cg import cg

__all__ = ["apply_blocks", "NewtonSystem", "NewtonPreconditioner", "newton_direction",
           "dense_newton_system"]

_FLOAT64 = torch.float64


def apply_blocks(S: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """Per-sample products S_i V_i for V of shape (n, c, r): S is (n, c, c), or (n, 1)
    for scalar weights (c = 1)."""
    if S.dim() == 2:
        return S[:, :, None] * V
    return S @ V


class NewtonSystem:
    """M = I + C S K S on vectors of length n·c (float64; K used in its own dtype).

    K is anything with ``shape`` and ``K @ V``; one product M V of width r costs one
    product K V of width c·r.
    """

    def __init__(self, K, S, C: float, c: int):
        self.K, self.S, self.C, self.c = K, S, C, c
        n = K.shape[0]
        self.shape = (n * c, n * c)
        self.dtype = _FLOAT64
        self.device = K.device

    def __matmul__(self, V):
        n, c = self.K.shape[0], self.c
        vec = V.dim() == 1
        V3 = V.reshape(n, c, -1)
        r = V3.shape[2]
        SV = apply_blocks(self.S, V3).reshape(n, c * r).to(self.K.dtype)
        KSV = (self.K @ SV).to(_FLOAT64).reshape(n, c, r)
        out = V3 + self.C * apply_blocks(self.S, KSV)
        return out.reshape(n * c) if vec else out.reshape(n * c, r)


class NewtonPreconditioner:
    """(I + C S L Lᵀ S)⁻¹ by Woodbury, for K ≈ L Lᵀ (L: n × k, float64).

    The core I/C + Σ_i (L_i L_iᵀ) ⊗ H_i (H_i = S_i²) is (k·c) × (k·c), factored once:
    O(n k² c²) to build, O(n k c r) per application to r columns.
    """

    def __init__(self, L, S, C: float, c: int):
        self.L, self.S, self.c = L, S, c
        n, k = L.shape
        if S.dim() == 2:
            H = (S[:, 0] ** 2)
            core = L.T @ (H[:, None] * L)
        else:
            H = S @ S
            core = torch.einsum("na,nb,njl->ajbl", L, L, H).reshape(k * c, k * c)
        core.diagonal().add_(1.0 / C)
        self.chol = torch.linalg.cholesky(core)

    def __call__(self, R):
        n, k = self.L.shape
        c = self.c
        R3 = R.reshape(n, c, -1)
        r = R3.shape[2]
        SR = apply_blocks(self.S, R3)  # (n, c, r)
        UtR = torch.einsum("na,ncr->acr", self.L, SR).reshape(k * c, r)
        Z = torch.cholesky_solve(UtR, self.chol).reshape(k, c, r)
        UZ = apply_blocks(self.S, torch.einsum("na,acr->ncr", self.L, Z))
        return (R3 - UZ).reshape(R.shape)


def dense_newton_system(K: torch.Tensor, S: torch.Tensor, C: float) -> torch.Tensor:
    """The matrix I + C S K S of :class:`NewtonSystem`, stored: (n·c) × (n·c), float64.

    Its (i, a), (j, b) entry is δ + C K_ij (S_i S_j)_ab; for c = 1 it is I + C s sᵀ ∘ K.
    O(n²c²) memory: for small n·c only.
    """
    K = K.to(_FLOAT64)
    if S.dim() == 2:
        s = S[:, 0]
        M = (C * s[:, None]) * K * s[None, :]
    else:
        n, c, _ = S.shape
        M = C * torch.einsum("ij,iap,jpb->iajb", K, S, S).reshape(n * c, n * c)
    M.diagonal().add_(1.0)
    return M


def newton_direction(K, F, G, S, C: float, L, *, b=None, fit_intercept: bool = True,
                     tol: float = 1e-12):
    r"""The Newton iterate (A⁺, b⁺) of the module docstring.

    Parameters
    ----------
    K : operator
        The (n, n) kernel matrix (``shape``, ``dtype``, ``device``, ``K @ V``).
    F, G : Tensor (n, c), float64
        Current decision values and loss gradients.
    S : Tensor (n, c, c), or (n, 1) when c = 1
        Square roots of the per-sample loss Hessians.
    C : float
        Weight of the loss.
    L : Tensor (n, k), float64, or None
        Low-rank factor K ≈ L Lᵀ for the preconditioner; None solves the system
        directly by a Cholesky factorization of :func:`dense_newton_system` (K is then
        made dense: for small n·c).
    b : Tensor (c,), optional
        The intercept, kept as is when ``fit_intercept`` is false.
    tol : float
        Relative residual of the CG solve.

    Returns
    -------
    A : Tensor (n, c), float64
    b : Tensor (c,), float64

    Notes
    -----
    Cost: the CG steps, each one product of K with c·(c + 1) columns, plus one product
    K G; O(n·c²) memory besides the preconditioner. Direct (L = None): O((nc)³/3) time
    and O((nc)²) memory.
    """
    n, c = G.shape
    KG = (K @ G.to(K.dtype)).to(_FLOAT64)
    S3 = S[:, :, None] if S.dim() == 2 else S
    cols = [(C * apply_blocks(S, (F + C * KG)[:, :, None])).reshape(n * c, 1)]
    if fit_intercept:  # C S e_k, one column per output (the Schur complement of b)
        cols.append((C * S3).reshape(n * c, c))
    B = torch.cat(cols, dim=1)
    if L is None:
        M = dense_newton_system(K.to_dense() if hasattr(K, "to_dense") else K, S, C)
        X = torch.cholesky_solve(B, torch.linalg.cholesky(M))
    else:
        X = cg(NewtonSystem(K, S, C, c), B, preconditioner=NewtonPreconditioner(L, S, C, c),
               tol=tol)
    SX = apply_blocks(S, X.reshape(n, c, -1))  # (n, c, 1 + c)
    if fit_intercept:
        # Σ_i A_i = 0 with A = −C G + S(β_F − Σ_k b_k β_k): a c × c system for b.
        lhs = SX[:, :, 1:].sum(0)
        rhs = SX[:, :, 0].sum(0) - C * G.sum(0)
        b = rhs / lhs[0] if c == 1 else torch.linalg.pinv(lhs, rtol=1e-10, hermitian=True) @ rhs
        beta_S = SX[:, :, 0] - SX[:, :, 1:] @ b
    else:
        beta_S = SX[:, :, 0]
    return -C * G + beta_S, b
