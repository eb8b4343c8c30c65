r"""The Gaussian-process log marginal likelihood, exact and matrix-free.

One implementation of log p(y) and its gradient, below the estimators: the likelihood of
:class:`torchkern.GaussianProcessRegressor` (its fit and ``log_marginal_likelihood``) and
the objective :func:`torchkern.learning.log_marginal_likelihood` both call
:func:`lml_cholesky` (dense float64 Cholesky with the closed-form gradient) or
:func:`lml_cg` (preconditioned CG and stochastic Lanczos quadrature on a lazy Gram
matrix). They take a Gram matrix, not a kernel: the caller evaluates it.
"""
from __future__ import annotations

import math

import torch

from .._optimize import SINGLE_THREAD_MAX_N
from .._threads import one_thread
from .._validation import check_int
from ..linalg import cg, logdet

__all__ = ["lml_cholesky", "lml_cg", "threads_for"]

_F64 = torch.float64
_LOG_2PI = math.log(2 * math.pi)


def threads_for(X):
    """One torch thread (restored afterwards) for GP work on the CPU on at most
    ``SINGLE_THREAD_MAX_N`` (1,000) points, either method — there the factorizations and
    the CG/Lanczos products are too small to gain from threads, and the pool's spin-waits
    cost more than they save (``"cg"`` at n = 60 on a busy 2-core machine: 11.7 s on 2
    threads, 0.39 s on 1) —; the current setting otherwise (see docs/performance.md on
    threads). ``X``: the training inputs or a matrix with n rows."""
    return one_thread(X.device.type == "cpu" and X.shape[0] <= SINGLE_THREAD_MAX_N)


class _CholeskyLML(torch.autograd.Function):
    """log p(Y) from A = K + σ²I with the closed-form backward of Rasmussen and Williams
    (2006, eq. 5.9): ∂/∂K = ½(aaᵀ − r A⁻¹), ∂/∂σ² = its trace, ∂/∂Y = −a, a = A⁻¹(Y − μ).
    The O(n³) factorization is never differentiated and A⁻¹ is formed only in backward."""

    @staticmethod
    def forward(ctx, K, noise, Y, constant_mean, out):
        with threads_for(K):
            return _CholeskyLML._forward(ctx, K, noise, Y, constant_mean, out)

    @staticmethod
    def _forward(ctx, K, noise, Y, constant_mean, out):
        n, r = Y.shape
        A = K.detach().to(_F64, copy=True)
        A.diagonal().add_(noise.detach().to(_F64))
        L, info = torch.linalg.cholesky_ex(A)
        del A
        if int(info) != 0:
            raise ValueError("K + noise*I is not positive definite; increase noise")
        Y64 = Y.detach().to(_F64)
        mu = torch.zeros(r, dtype=_F64, device=Y.device)
        if constant_mean:  # the maximum-likelihood constant (generalized least squares)
            ones = torch.ones(n, 1, dtype=_F64, device=Y.device)
            S = torch.cholesky_solve(torch.cat([Y64, ones], 1), L)
            mu = S[:, :r].sum(0) / S[:, r].sum()
        Yc = Y64 - mu
        a = torch.cholesky_solve(Yc, L)
        lml = -0.5 * (Yc * a).sum() - r * L.diagonal().log().sum() - 0.5 * n * r * _LOG_2PI
        out.update(mu=mu, a=a, L=L)
        ctx.save_for_backward(L, a)
        ctx.dtypes = (K.dtype, noise.dtype, Y.dtype)
        return lml

    @staticmethod
    def backward(ctx, g):
        L, a = ctx.saved_tensors
        gK = gs2 = gY = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            with threads_for(L):
                W = torch.cholesky_inverse(L)
                W.mul_(-a.shape[1]).addmm_(a, a.T).mul_(0.5 * g)  # ½ g (aaᵀ − r A⁻¹)
            if ctx.needs_input_grad[1]:
                gs2 = W.diagonal().sum().to(ctx.dtypes[1])
            if ctx.needs_input_grad[0]:
                gK = W.to(ctx.dtypes[0])
        if ctx.needs_input_grad[2]:
            # μ is profiled out: by the envelope theorem it adds nothing to ∂/∂Y
            gY = (-g * a).to(ctx.dtypes[2])
        return gK, gs2, gY, None, None


def lml_cholesky(K, Y, noise, *, constant_mean=False):
    r"""Exact log p(Y) of a GP with Gram matrix ``K`` (dense, any float dtype) and noise
    variance ``noise``: the one implementation behind
    :meth:`torchkern.GaussianProcessRegressor.log_marginal_likelihood` and
    :func:`torchkern.learning.log_marginal_likelihood`.

    .. math::
        \log p(Y) = \sum_j -\tfrac12 (y_j - \mu_j)^\top A^{-1}(y_j - \mu_j)
        - \tfrac r2 \log\det A - \tfrac{nr}2\log 2\pi,\qquad A = K + \sigma^2 I

    (Rasmussen and Williams 2006, eq. 2.30), μ = 0 or, with ``constant_mean``, its
    maximum-likelihood value 1ᵀA⁻¹Y / 1ᵀA⁻¹1. One float64 Cholesky factorization
    (n³/3 flops); the gradient with respect to K, ``noise`` and Y is the closed form
    ½ tr((aaᵀ − rA⁻¹) ∂A) − aᵀ∂Y (ibid., eq. 5.9): one ``cholesky_inverse`` (2n³/3) in
    backward and autograd only through the kernel's entries.

    Returns
    -------
    (lml, mu, a, L): 0-d float64 tensor, the constant (r,), a = A⁻¹(Y − μ) of shape
    (n, r) and the lower Cholesky factor of A (float64, no gradients).
    """
    if not isinstance(noise, torch.Tensor):
        noise = torch.tensor(float(noise), dtype=_F64, device=K.device)
    out = {}
    lml = _CholeskyLML.apply(K, noise.reshape(()), Y, bool(constant_mean), out)
    return lml, (out["mu"].to(Y.dtype), out["a"], out["L"])


def _check_max_iter(max_iter):
    """None or at least one CG step: with none the solve A⁻¹y reads 0 (the constant mean
    0/0 = NaN, loo_error 0.0 — a perfect score —, gcv NaN, ridge predictions 0)."""
    if max_iter is not None:
        check_int(max_iter, "max_iter")


def lml_cg(K, Y, noise, preconditioner, *, constant_mean=False, tol=1e-6, max_iter=None,
           num_probes=30, lanczos_steps=100, generator=None):
    r"""Matrix-free estimate of log p(Y) on a lazy Gram matrix ``K``, differentiable.

    A⁻¹(Y − μ) by preconditioned CG (:func:`torchkern.linalg.cg`); the quadratic term
    through the surrogate 2yᵀx − xᵀAx (x = A⁻¹y detached: value yᵀA⁻¹y, gradient
    −xᵀ(∂A)x, exact at the solution); log det A by stochastic Lanczos quadrature on the
    ``preconditioner``-whitened A with its Hutchinson gradient
    (:func:`torchkern.linalg.logdet`; Gardner et al. 2018). O(n²) kernel evaluations per
    product, O(n (r + p)) memory. ``lanczos_steps`` caps the quadrature's Lanczos steps: it
    stops once its error bound is 1e-3 of the whitened tr|log|, and warns (a
    ConvergenceWarning) if the cap comes first.

    Returns
    -------
    (lml, mu, a, preconditioner)
    """
    _check_max_iter(max_iter)
    n, r = Y.shape
    A = K.add_diag(noise)
    with torch.no_grad():
        rhs = Y if not constant_mean else torch.cat(
            [Y, torch.ones(n, 1, dtype=Y.dtype, device=Y.device)], 1)
        S = cg(A, rhs.detach(), preconditioner=preconditioner, tol=tol, max_iter=max_iter)
    mu = torch.zeros(r, dtype=Y.dtype, device=Y.device)
    a = S[:, :r]
    if constant_mean:
        mu = S[:, :r].sum(0) / S[:, r].sum()
        a = S[:, :r] - mu * S[:, r:]  # A⁻¹(Y − μ1)
    Yc = Y - mu
    quad = (Yc * a).sum()
    if torch.is_grad_enabled():
        sur = 2 * (Yc * a).sum() - (a * (A @ a)).sum()
        quad = quad + (sur - sur.detach())
    ld = logdet(A, method="slq", num_probes=num_probes, lanczos_steps=lanczos_steps,
                preconditioner=preconditioner, random_state=generator)
    lml = -0.5 * quad - 0.5 * r * ld - 0.5 * n * r * _LOG_2PI
    return lml, (mu, a.detach(), preconditioner)
