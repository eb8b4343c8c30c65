r"""Predictions of infinitely wide networks trained by gradient flow on the squared loss."""
from __future__ import annotations

import math
import warnings

import torch

from .._validation import as_vector, check_bool, check_int, check_positive, real_tensor
from ..gram import DenseKernelMatrix
from ..inputs import check_fitted_input, check_input
from ..kernels.base import Kernel
from ..linalg import ConvergenceWarning, PivotedCholesky, cg

__all__ = ["infinite_width_predict"]

_F64 = torch.float64
_PRECONDITIONER_RANK = 200


def _phi(lam: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """(1 − e^{−cλ})/λ, equal to c at λ = 0; λ below 0 (round-off) is read as 0."""
    lam = lam.clamp_min(0.0)
    z = c * lam
    small = z < 1e-12
    return torch.where(small, c * (1 - z / 2), -torch.expm1(-z) / torch.where(small, 1.0, lam))


def _dense_phi(A: torch.Tensor, Y: torch.Tensor, cs: torch.Tensor) -> torch.Tensor:
    """φ_c(A) Y for each c of ``cs`` by one eigendecomposition; shape (len(cs), n, r)."""
    lam, U = torch.linalg.eigh(A)
    UtY = U.T @ Y
    return torch.stack([U @ (_phi(lam, c)[:, None] * UtY) for c in cs])


def _krylov_phi(A, Y: torch.Tensor, cs: torch.Tensor, tol: float, max_iter: int):
    r"""φ_c(A) Y ≈ ‖y‖ Q_m φ_c(T_m) e₁ per column y by Lanczos with full
    reorthogonalization (Saad 1992, "Analysis of some Krylov subspace approximations to
    the matrix exponential operator", SIAM J. Numer. Anal.). Stops when the coefficients
    change by less than ``tol``·‖y‖ between steps for every c and column.
    Returns (len(cs), n, r) in float64 and the number of steps."""
    n, r = Y.shape
    nrm = Y.norm(dim=0)
    safe = torch.where(nrm > 0, nrm, torch.ones_like(nrm))
    Q = [Y / safe]
    alphas, betas = [], []
    prev, change = None, float("inf")
    for j in range(max_iter):
        w = (A @ Q[-1].to(A.dtype)).to(_F64)
        a = (Q[-1] * w).sum(0)
        alphas.append(a)
        B = torch.stack(Q)                                   # (j+1, n, r)
        for _ in range(2):                                   # twice is enough (Kahan)
            w = w - torch.einsum("knr,kr->nr", B, torch.einsum("knr,nr->kr", B, w))
        b = w.norm(dim=0)
        T = torch.diag_embed(torch.stack(alphas).T)          # (r, j+1, j+1)
        if betas:
            off = torch.stack(betas).T
            T = T + torch.diag_embed(off, 1) + torch.diag_embed(off, -1)
        theta, S = torch.linalg.eigh(T)
        coef = torch.stack([(S * (_phi(theta, c) * S[:, 0, :])[:, None, :]).sum(-1)
                            for c in cs])                    # (len(cs), r, j+1)
        if prev is not None:
            pad = torch.nn.functional.pad(prev, (0, 1))
            change = float(((coef - pad).norm(dim=-1) / coef.norm(dim=-1).clamp_min(1e-300)).max())
        prev = coef
        broken = b <= 1e-12 * torch.stack(alphas).abs().amax(0).clamp_min(1e-300)
        if change <= tol or bool(broken.all()) or j + 1 == n:
            break
        betas.append(torch.where(broken, torch.zeros_like(b), b))
        Q.append(w / torch.where(broken, torch.full_like(b, math.inf), b))
    else:
        warnings.warn(f"Lanczos for the finite-time prediction stopped at max_iter={max_iter} "
                      f"steps with relative change {change:.1e} > tol={tol:.1e}",
                      ConvergenceWarning, stacklevel=3)
    B = torch.stack(Q)
    return torch.einsum("knr,crk->cnr", B, coef) * nrm, len(alphas)


def infinite_width_predict(kernel, X_train, y_train, X_test=None, t=None, *, reg: float = 0.0,
                           learning_rate: float = 1.0, backend: str | None = None,
                           tol: float = 1e-6, max_iter: int | None = None,
                           compute_cov: bool = False, nngp=None):
    r"""Mean output of an infinitely wide network trained by gradient flow on the squared
    loss for time t: kernel regression with the NTK at t = ∞.

    Convention (neural-tangents' ``predict.gradient_descent_mse_ensemble``): the loss is
    :math:`\mathcal L = \frac1{2N}\sum_i \lVert f(x_i) - y_i\rVert^2` with N the number of
    entries of ``y_train``, trained by :math:`\dot\theta = -\eta\nabla_\theta\mathcal L`,
    so that at infinite width :math:`\dot f = -\frac\eta N\,\Theta\,(f - y)` (Jacot et al.
    2018; Lee et al. 2019, "Wide neural networks of any depth evolve as linear models
    under gradient descent", NeurIPS). With the output at initialization of mean zero, the
    mean prediction is

    .. math::
        \mu_t(x) = \Theta(x, X)\,(\Theta + \rho I)^{-1}
                   \big(I - e^{-\eta t(\Theta + \rho I)/N}\big)\, y, \qquad
        \mu_\infty(x) = \Theta(x, X)\,(\Theta + \rho I)^{-1} y,

    Θ = Θ(X, X) and ρ = ``reg`` (neural-tangents' ``diag_reg`` with
    ``diag_reg_absolute_scale=True``). With an :class:`~torchkern.ntk.NNGP` kernel it is
    the same for training only the readout layer.

    Parameters
    ----------
    kernel : Kernel
        The NTK (:class:`~torchkern.ntk.NTK`, :class:`~torchkern.ntk.EmpiricalNTK`) or any
        torchkern kernel.
    X_train : kernel input, n samples
    y_train : Tensor or array of shape (n,) or (n, r)
    X_test : kernel input, optional
        Where to predict (default: ``X_train``).
    t : float, sequence of floats or None
        Training time(s); ``None`` is t = ∞.
    reg : float
        ρ ≥ 0 (must be > 0 if Θ is singular and t = ∞).
    learning_rate : float
        η > 0.
    backend : str, optional
        Backend of the Gram matrices (``"dense"``, ``"blocked"``, ...; default the
        kernel's ``"auto"``).
    tol, max_iter :
        Relative tolerance (> 0) and iteration cap of CG (t = ∞; an int >= 0, 0 returns
        the start with a ConvergenceWarning) and Lanczos (finite t; an int >= 1) on lazy
        Gram matrices (default ``max_iter``:
        :func:`~torchkern.linalg.cg`'s, and min(n, 1000) Lanczos steps).
    compute_cov : bool
        Also return the covariance over initializations of the outputs on ``X_test``
        (per output unit; neural-tangents' ``compute_cov=True``).
    nngp : Kernel, optional
        The NNGP kernel K of the same network, for the covariance of the ensemble trained
        with the NTK Θ = ``kernel``. With ``nngp=None`` and ``compute_cov=True``, ``kernel``
        is taken as the NNGP and only the readout trains (neural-tangents' ``get="nngp"``).

    Returns
    -------
    Tensor of shape (n_test,) or (n_test, r)
        With a leading time axis when ``t`` is a sequence; in the Gram matrices' dtype.
        With ``compute_cov`` a pair (mean, cov), cov of shape (n_test, n_test) (with the
        same leading time axis).

    Notes
    -----
    The covariance (Lee et al. 2019, eq. 16; neural-tangents' ``predict``) is, with
    :math:`A_t = \Theta_\rho^{-1}(I - e^{-\eta t\Theta_\rho/N})`,
    Θ_ρ = Θ + ρI,

    .. math::
        \Sigma_t = K_{**} + \Theta_{*X} A_t K A_t \Theta_{X*}
                  - (\Theta_{*X} A_t K_{X*} + K_{*X} A_t \Theta_{X*}),

    and for the NNGP :math:`\Sigma_t = K_{**} - K_{*X}\,K_\rho^{-1}(I - e^{-2\eta t
    K_\rho/N})K_{X*}` (A_∞ = Θ_ρ⁻¹). It is computed from dense Gram matrices and one
    eigendecomposition: O(n³ + n²·n_test) time, O(n² + n_test²) memory.

    A dense Θ (n ≤ a few thousand) is solved exactly: a Cholesky factorization for t = ∞,
    one eigendecomposition for all finite t (O(n³)). A lazy Θ is never formed: t = ∞ by
    preconditioned CG (:func:`torchkern.linalg.cg`, pivoted-Cholesky preconditioner when
    ρ > 0), finite t by Lanczos on the Krylov space of each target column
    (f(Θ)y ≈ ‖y‖ Q_m f(T_m) e₁, one product with Θ per step, all times from one basis);
    O(n·m) memory for m steps, O(n²) kernel evaluations per step.
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a torchkern Kernel, got {type(kernel).__name__}")
    check_positive(reg, "reg", allow_zero=True)
    check_positive(learning_rate, "learning_rate")
    check_bool(compute_cov, "compute_cov")
    # checked here, not only by cg: the Lanczos of finite t took max_iter=0 to an
    # UnboundLocalError, 1.5 to a TypeError naming nothing, and tol=-1 silently. CG
    # (t = ∞) takes 0, as scipy's cg: the start, with a ConvergenceWarning.
    check_positive(tol, "tol")
    if max_iter is not None:
        check_int(max_iter, "max_iter", 0 if t is None else 1)
    reg, learning_rate = float(reg), float(learning_rate)
    times = None
    if t is not None:
        times = real_tensor(t, "t").reshape(-1)
        if times.numel() == 0 or not bool(torch.isfinite(times).all()) or bool((times < 0).any()):
            raise ValueError(f"t must be None or finite times >= 0, got {t!r}")
    if nngp is not None and not isinstance(nngp, Kernel):
        raise TypeError(f"nngp must be a torchkern Kernel or None, got {type(nngp).__name__}")
    X = check_input(kernel, X_train, "X_train")
    Xt = X if X_test is None else check_fitted_input(kernel, X_test, X, "X_test")
    n = X.shape[0]
    Y = as_vector(y_train, "y_train", n=n).detach().to(dtype=_F64, device=X.device)
    if Y.numel() == 0:
        raise ValueError(f"y_train must have at least one column, got shape {tuple(Y.shape)}")
    vec = Y.dim() == 1
    Y2 = Y.reshape(n, -1)
    with torch.no_grad():
        K = kernel(X, backend=backend)
        dense = isinstance(K, DenseKernelMatrix)
        if times is None:
            C = _solve(K, Y2, reg, dense, tol, max_iter)[None]
        else:
            cs = learning_rate * times / Y.numel()
            if dense:
                A = K.to_dense().to(_F64)
                A.diagonal().add_(reg)
                C = _dense_phi(A, Y2, cs)
            else:
                C, _ = _krylov_phi(K.add_diag(reg) if reg else K, Y2, cs, tol,
                                   min(n, 1000) if max_iter is None else max_iter)
        Kt = K if X_test is None else kernel(Xt, X, backend=backend)
        out = torch.stack([Kt @ c.to(Kt.dtype) for c in C])
    out = out[..., 0] if vec else out
    out = out if t is not None and not _is_scalar(t) else out[0]
    if not compute_cov:
        return out
    with torch.no_grad():
        cov = _covariance(kernel, nngp, X, Xt, times, reg, learning_rate, Y.numel(), backend)
    cov = cov.to(out.dtype)
    return out, (cov if t is not None and not _is_scalar(t) else cov[0])


def _covariance(kernel, nngp, X, Xt, times, reg, lr, size, backend):
    """Σ_t of the ensemble (see :func:`infinite_width_predict`), shape (len(t), m, m)."""
    def dense(k, A, B=None):
        return k(A, B, backend=backend).to_dense().to(_F64)

    main = kernel if nngp is None else nngp
    K_tt = dense(main, Xt)
    T = dense(kernel, X)
    T.diagonal().add_(reg)
    lam, U = torch.linalg.eigh(T)
    ts = [math.inf] if times is None else times.tolist()
    if math.inf in ts and float(lam.min()) <= 0:  # 1/λ: the mean's solve may have passed
        raise ValueError("the kernel matrix plus reg*I is singular to working precision, so "
                         "the t = ∞ covariance is undefined (repeated inputs?); pass reg > 0")
    lam = lam.clamp_min(0.0)
    T_tx = dense(kernel, Xt, X) @ U                                   # (m, n) in eigenbasis
    if nngp is not None:  # the NNGP's Gram matrices, once for every time
        K = U.T @ dense(nngp, X) @ U
        K_xt = U.T @ dense(nngp, X, Xt)
    out = []
    for t in ts:
        c = lr * t / size
        if nngp is None:
            f = (_phi(lam, torch.tensor(2 * c, dtype=_F64)) if math.isfinite(c) else
                 1 / lam)
            out.append(K_tt - (T_tx * f) @ T_tx.T)
            continue
        f = _phi(lam, torch.tensor(c, dtype=_F64)) if math.isfinite(c) else 1 / lam
        B = T_tx * f                                                  # Θ_*X A_t in U basis
        cross = B @ K_xt
        out.append(K_tt + B @ K @ B.T - cross - cross.T)
    return torch.stack(out)


def _is_scalar(t) -> bool:
    return torch.as_tensor(t).dim() == 0


def _solve(K, Y, reg, dense, tol, max_iter):
    """(K + ρI)⁻¹ Y: Cholesky when K is dense, preconditioned CG otherwise (float64 out)."""
    if dense:
        A = K.to_dense().to(_F64)
        A.diagonal().add_(reg)
        L, info = torch.linalg.cholesky_ex(A)
        if int(info) != 0:
            raise ValueError("the kernel matrix plus reg*I is not positive definite: Θ is "
                             "singular (repeated inputs?); pass reg > 0")
        return torch.cholesky_solve(Y, L)
    pc = PivotedCholesky(K, min(_PRECONDITIONER_RANK, K.shape[0]), reg) if reg > 0 else None
    A = K.add_diag(reg) if reg else K
    return cg(A, Y.to(K.dtype), preconditioner=pc, tol=tol, max_iter=max_iter).to(_F64)
