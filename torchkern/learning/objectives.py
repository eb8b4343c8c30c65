r"""Differentiable objectives for learning kernels, in the style of ``torch.nn.functional``.

Each function takes a kernel (an ``nn.Module`` whose hyperparameters are learnable), data
and a regularization, and returns a 0-d tensor differentiable with respect to the kernel's
parameters, the regularization (when it is a tensor) and the inputs. Small problems are
solved exactly (float64 Cholesky, autograd through the factorization); large ones
matrix-free on the lazy Gram matrix (preconditioned CG with gradients by one adjoint solve,
stochastic Lanczos quadrature, Hutchinson probes), chosen by ``method="auto"``.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from .._sharding import in_sharded_fit
from .._validation import (as_generator, as_vector, check_bool, check_int, check_positive,
                           real_tensor)
from ..gram import KernelMatrix
from ..inputs import check_fitted_input
from ..kernels.base import _in_dtype
from ..linalg import ConvergenceWarning, PivotedCholesky, cg
from ..linalg._common import _rademacher
from ..stats._common import check_kernel, row_sums
from ..stats.hsic import hsic_biased
from .likelihood import _check_max_iter, lml_cg, lml_cholesky

__all__ = ["log_marginal_likelihood", "log_posterior", "log_prior", "kernel_alignment",
           "loo_error", "gcv", "kernel_ridge_predict", "mmd_test_power", "sgpr_bound",
           "nystrom_complexity_reg"]

_F64 = torch.float64
_LOG_2PI = math.log(2 * math.pi)
#: method="auto" is exact (dense float64 Cholesky) up to this many samples.
EXACT_MAX_N = 3000
_METHODS = ("auto", "exact", "cg")
#: Rank of the pivoted-Cholesky preconditioner of the matrix-free paths.
_PRECOND_RANK = 200


# -- shared checks ---------------------------------------------------------------------
def _sharded(kernel, X, what, supported=True):
    """Refuse row-sharded data (:class:`~torchkern.distributed.ShardedInput`, recognized by
    its ``align_rows``) where ``what`` has no sharded form, or under a
    ``ShardedKernel(vectors="sharded")``: the objectives read whole vectors, which the
    default ``vectors="auto"`` gives (products gathered on every rank)."""
    if not callable(getattr(X, "align_rows", None)):
        return
    if not supported:
        raise ValueError(f"{what} has no form for row-sharded data (a ShardedInput): use "
                         f"log_marginal_likelihood, kernel_alignment, loo_error, gcv, "
                         f"kernel_ridge_predict or mmd_test_power, or one process")
    if getattr(kernel, "vectors", None) == "sharded":
        raise ValueError(f"{what} on row-sharded data reads whole vectors: use "
                         f"ShardedKernel(vectors='auto') (the default), not "
                         f"vectors='sharded'")


_NO_TARGET = object()  # the objective takes no y (kernel_alignment reads its own)


def _inputs(kernel, X, y=_NO_TARGET, y_name="y", what="the objective", sharded=True):
    """(kernel, X as the kernel takes it, y as an (n, r) tensor of X's dtype, was y 1-D).
    Row-sharded X: each rank's own rows of y are gathered (or a whole y with ``rows=``
    taken as it is); ``what`` names the objective in the refusal of :func:`_sharded`."""
    kernel = check_kernel(kernel)
    X = kernel.check_input(X, "X")
    _sharded(kernel, X, what, sharded)
    if y is _NO_TARGET:
        return kernel, X, None, False
    n = X.shape[0]
    Y = as_vector(_whole(X, y, y_name), y_name, n=n).to(dtype=X.dtype, device=X.device)
    if Y.numel() == 0:  # (n, 0): the objectives' sums were 0 or 0/0 = NaN
        raise ValueError(f"{y_name} must have at least one column, got shape "
                         f"{tuple(Y.shape)}")
    return kernel, X, Y.reshape(n, -1), Y.dim() == 1


def _whole(X, y, name):
    """``y`` with all n rows on every rank when X is row-sharded
    (:class:`~torchkern.distributed.ShardedInput`, which gathers each rank's own rows, as
    the estimators' fits do); as it is otherwise, and inside an estimator's fit on X
    (``fit(..., learn_kernel=...)``), which has gathered it."""
    align = getattr(X, "align_rows", None)
    if not callable(align) or in_sharded_fit(X):  # inside a fit: y is whole already
        return y
    return align(y, name)


def _positive(value, name, like):
    """A positive scalar as a 0-d tensor of ``like``'s dtype (gradients kept)."""
    t = value if isinstance(value, torch.Tensor) and value.is_floating_point() else \
        real_tensor(value, name)
    if t.numel() != 1:
        raise ValueError(f"{name} must be a scalar, got shape {tuple(t.shape)}")
    if not bool(torch.isfinite(t.detach()).all()) or float(t.detach()) <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {float(t.detach())!r}")
    return t.reshape(()).to(dtype=like.dtype, device=like.device)


def _method(method, n):
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if method == "auto":
        return "exact" if n <= EXACT_MAX_N else "cg"
    return method


def _dense_system(kernel, X, lam):
    """K + λI as a dense float64 tensor (differentiable)."""
    K = kernel(X, backend="dense").to_dense().to(_F64)
    return K + lam.to(_F64) * torch.eye(K.shape[0], dtype=_F64, device=K.device)


def _cholesky(A, what):
    L, info = torch.linalg.cholesky_ex(A)
    if int(info) != 0:
        raise ValueError(f"{what} is not positive definite; increase the regularization")
    return L


def _lazy_system(kernel, X, lam, backend):
    """(K + λI lazily, a rank-r pivoted-Cholesky preconditioner of it)."""
    K = kernel(X, backend=backend)
    n = K.shape[0]
    with torch.no_grad():
        P = PivotedCholesky(K, min(n, _PRECOND_RANK), float(lam.detach()))
    return K.add_diag(lam), P


# -- Gaussian-process marginal likelihood ----------------------------------------------
def log_marginal_likelihood(kernel, X, y, noise, *, method="auto", num_probes=30,
                            tol=1e-6, max_iter=None, backend=None, random_state=None):
    r"""Log marginal likelihood log p(y | X) of a zero-mean Gaussian process.

    .. math::
        \log p(y\mid X) = -\tfrac12\, y^\top (K + \sigma^2 I)^{-1} y
        - \tfrac12 \log\det(K + \sigma^2 I) - \tfrac n2 \log 2\pi

    summed over the columns of a 2-D ``y`` and *not* divided by n — scikit-learn's
    ``GaussianProcessRegressor.log_marginal_likelihood`` convention (Rasmussen and
    Williams 2006, "Gaussian Processes for Machine Learning", eq. 2.30). ``noise`` is the
    noise *variance* σ².

    Parameters
    ----------
    kernel : Kernel
    X : kernel input of n samples
    y : Tensor or array of shape (n,) or (n, r)
    noise : float or 0-d Tensor
        σ² > 0; a tensor that requires grad is learned with the kernel.
    method : {"auto", "exact", "cg"}
        ``"exact"``: float64 Cholesky of the dense K + σ²I, O(n³) time, O(n²) memory;
        the gradient is the closed form ½ tr((aaᵀ − A⁻¹)∂A) − aᵀ∂y (ibid., eq. 5.9), one
        ``cholesky_inverse`` in backward, autograd only through the kernel's entries.
        ``"cg"``: matrix-free — the quadratic term by preconditioned CG and the
        log-determinant by stochastic Lanczos quadrature with a rank-200 pivoted-Cholesky
        preconditioner (:func:`torchkern.linalg.logdet`); O(n² (r + p)) kernel
        evaluations per CG / Lanczos step and O(n (r + p)) memory on a lazy Gram matrix.
        Both are the implementation of :class:`torchkern.GaussianProcessRegressor`'s
        likelihood (``lml_cholesky`` and ``lml_cg`` in ``torchkern.learning.likelihood``).
        Its value and gradient are stochastic (relative error of the log-determinant
        ~ 1e-3 with p = 30 probes and the preconditioner). ``"auto"``: exact for
        n ≤ 3000.
    num_probes : int
        p, Rademacher probes of the log-determinant (``"cg"``).
    tol, max_iter
        CG relative residual and iteration cap (``"cg"``).
    backend : str, optional
        Gram-matrix backend of ``"cg"``.
    random_state : None, int or torch.Generator
        Probes (``"cg"``).

    Returns
    -------
    Tensor
        0-d, differentiable (first derivatives) with respect to the kernel's parameters,
        ``noise``, X and y.

    References
    ----------
    C. E. Rasmussen and C. K. I. Williams, "Gaussian Processes for Machine Learning",
    MIT Press 2006, §2.2 and §5.4.1. J. Gardner et al., "GPyTorch: blackbox matrix-matrix
    Gaussian process inference with GPU acceleration", NeurIPS 2018 (the matrix-free
    estimate).
    """
    kernel, X, Y, _ = _inputs(kernel, X, y, what="log_marginal_likelihood")
    s2 = _positive(noise, "noise", Y)
    _check_max_iter(max_iter)
    if _method(method, Y.shape[0]) == "exact":
        lml, _ = lml_cholesky(kernel(X, backend="dense").to_dense(), Y, s2)
        return lml.to(Y.dtype)
    K = kernel(X, backend=backend)
    with torch.no_grad():
        P = PivotedCholesky(K, min(K.shape[0], _PRECOND_RANK), float(s2.detach()))
    lml, _ = lml_cg(K, Y, s2, P, tol=tol, max_iter=max_iter, num_probes=num_probes,
                    generator=as_generator(random_state))
    return lml


# -- priors and the log posterior (MAP) ------------------------------------------------
def log_prior(kernel, noise=None, noise_prior=None):
    r"""log p(θ) of the kernel's hyperparameters (and of the noise variance): the sum of
    the log densities of the priors registered on the kernel and the kernels inside it
    (:meth:`torchkern.kernels.Kernel.register_prior`, ``RBF(lengthscale_prior=...)``), plus
    ``noise_prior.log_prob(noise)`` when a noise prior is given.

    Returns
    -------
    Tensor
        0-d float64, differentiable in the hyperparameters and ``noise`` (0 without
        priors).
    """
    kernel = check_kernel(kernel)
    total = kernel.log_prior()
    if noise_prior is not None:
        if not callable(getattr(noise_prior, "log_prob", None)):
            raise TypeError(f"noise_prior must be a torch.distributions.Distribution (or "
                            f"have a log_prob method), got {type(noise_prior).__name__}")
        if noise is None:
            raise ValueError("noise_prior needs the noise variance: noise is None")
        # a named error for a noise that is no variance (the prior's support error did not
        # say which argument, float('a') neither)
        like = torch.empty((), dtype=_F64, device=noise.device if isinstance(
            noise, torch.Tensor) else None)
        s2 = _positive(noise, "noise", like)
        lp = _in_dtype(noise_prior, _F64, s2.device).log_prob(s2).sum()
        total = total.to(lp.device) + lp.to(_F64)
    return total


def log_posterior(kernel, X, y, noise, *, noise_prior=None, **likelihood_options):
    r"""The unnormalized log posterior of the hyperparameters of a Gaussian process:
    the MAP objective log p(y | X, θ) + log p(θ).

    .. math::
        \log p(y \mid X, \theta) + \sum_{\text{priors}} \log p(\theta_j)
        + \log p(\sigma^2)

    with the log marginal likelihood of :func:`log_marginal_likelihood` (summed over the
    columns of y, not divided by n), the priors registered on the kernel
    (``RBF(lengthscale_prior=Gamma(3.0, 6.0))``, ``kernel.set_prior("outputscale",
    HalfCauchy(1.0))``, :meth:`~torchkern.kernels.Kernel.register_prior`) and
    ``noise_prior`` on the noise variance σ² (:func:`log_prior`). Divided by n it is
    GPyTorch's ``ExactMarginalLogLikelihood`` of a zero-mean ``ExactGP`` with a
    ``GaussianLikelihood`` and the same priors (that is the convention GPyTorch users
    know: its MLL adds the log priors and divides the sum by n). Maximizing it gives the
    maximum a posteriori (MAP) hyperparameters (Rasmussen and Williams 2006, §5.2); it is
    the objective of ``learn_kernel(..., "lml")`` / ``"map"`` and of
    :class:`torchkern.GaussianProcessRegressor`'s ``fit(optimize=True)`` when priors are
    set. Cost: that of the likelihood plus one ``log_prob`` per prior.

    Parameters
    ----------
    kernel : Kernel
    X : kernel input of n samples
    y : Tensor or array of shape (n,) or (n, r)
    noise : float or 0-d Tensor
        σ² > 0.
    noise_prior : torch.distributions.Distribution, optional
        Prior on σ² (anything with ``log_prob``).
    **likelihood_options
        ``method``, ``num_probes``, ``tol``, ``max_iter``, ``backend``,
        ``random_state`` of :func:`log_marginal_likelihood`.

    Returns
    -------
    Tensor
        0-d, differentiable with respect to the kernel's parameters and ``noise``.

    Examples
    --------
    >>> import torch, torchkern
    >>> from torch.distributions import Gamma
    >>> from torchkern.learning import log_posterior, log_marginal_likelihood
    >>> X = torch.linspace(0, 1, 20, dtype=torch.float64)[:, None]; y = torch.sin(6 * X[:, 0])
    >>> k = torchkern.RBF(0.3, lengthscale_prior=Gamma(3.0, 6.0))
    >>> lp = log_posterior(k, X, y, 0.1) - log_marginal_likelihood(k, X, y, 0.1)
    >>> bool(torch.isclose(lp, Gamma(3.0, 6.0).log_prob(torch.tensor(0.3)).double()))
    True
    """
    lml = log_marginal_likelihood(kernel, X, y, noise, **likelihood_options)
    return lml + log_prior(kernel, noise, noise_prior).to(lml)


# -- kernel-target alignment -----------------------------------------------------------
def _targets(y, n, dtype, device):
    """y as an (n, r) matrix: class labels one-hot, real values as they are."""
    from sklearn.utils.multiclass import type_of_target
    if isinstance(y, torch.Tensor) and y.dim() == 2:  # NaN, length: errors naming y
        return as_vector(y, "y", n=n).to(dtype=dtype, device=device)
    arr = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else y
    if y is None or np.asarray(arr).dtype.kind in "fc":
        as_vector(y, "y", n=n)  # a clear error for None, NaN, infinity, complex, length
    kind = type_of_target(arr)
    if kind in ("binary", "multiclass"):
        _, codes = np.unique(np.asarray(arr).reshape(-1), return_inverse=True)
        codes = torch.as_tensor(codes, device=device)
        return torch.nn.functional.one_hot(codes).to(dtype)
    Y = as_vector(y, "y", n=n)
    return Y.to(dtype=dtype, device=device).reshape(n, -1)


def kernel_alignment(kernel, X, y, centered=True, *, backend=None):
    r"""Kernel-target alignment, centered by default.

    .. math::
        \hat A(K, yy^\top) = \frac{\langle K_c, Y_cY_c^\top\rangle_F}
        {\lVert K_c\rVert_F\,\lVert Y_cY_c^\top\rVert_F},\qquad K_c = HKH,\;
        Y_c = HY,\; H = I - \tfrac1n\mathbf 1\mathbf 1^\top

    (Cortes, Mohri and Rostamizadeh 2012, "Algorithms for learning kernels based on
    centered alignment", JMLR 13, Definition 4). ``centered=False`` gives the uncentered
    alignment of Cristianini et al. (2002). Class labels (a 1-D ``y`` that scikit-learn's
    ``type_of_target`` calls binary or multiclass) are one-hot encoded; real targets and
    2-D ``y`` are used as they are.

    The numerator is tr(Y_cᵀ K Y_c) (H Y_c = Y_c), one product K @ Y_c; ‖K_c‖²_F is a
    blocked pass over the entries of K (:func:`torchkern.stats.hsic_biased` of K with
    itself). Cost O(n² (r + 1)) kernel evaluations, O(n · block) memory on a lazy Gram
    matrix without gradients (autograd keeps the blocks: O(n²)).

    Returns
    -------
    Tensor
        0-d in [−1, 1] (in [0, 1] centered with a p.s.d. kernel); differentiable.
    """
    kernel, X, _, _ = _inputs(kernel, X, what="kernel_alignment")
    n = X.shape[0]
    Y = _targets(_whole(X, y, "y"), n, X.dtype, X.device)
    if Y.shape[0] != n:
        raise ValueError(f"y has {Y.shape[0]} samples but X has {n}")
    K = kernel(X, backend=backend)
    # The alignment does not change with the scales of K and Y: both are brought to order
    # 1 (|K_ij| <= max K_ii for a p.s.d. kernel), where ‖K_c‖²_F overflowed (outputscale
    # 1e200: alignment 0) or underflowed (1e-200: "Gram matrix is zero")
    s = float(kernel.diag(X).detach().abs().max())
    if 0 < s < math.inf and s != 1:
        K = K * (1.0 / s)
    if check_bool(centered, "centered"):
        Y = Y - Y.mean(0)
        k_norm2 = hsic_biased(K, K).to(_F64) * n ** 2
    else:
        k_norm2 = _frobenius2(K)
    top = float(Y.detach().abs().max()) if Y.numel() else 0.0
    if 0 < top < math.inf:
        Y = Y / top
    G = Y.T.to(_F64) @ Y.to(_F64)
    y_norm = G.norm()
    if float(y_norm) == 0:
        raise ValueError("y is constant: its (centered) target matrix is zero")
    if float(k_norm2.detach()) == 0:  # 0/0: NaN, silently
        raise ValueError(f"the kernel's {'centered ' if centered else ''}Gram matrix on X is "
                         f"zero: its alignment with y is undefined")
    num = (Y.to(_F64) * (K @ Y).to(_F64)).sum()
    return (num / (k_norm2.sqrt() * y_norm)).to(X.dtype)


def _frobenius2(K: KernelMatrix) -> torch.Tensor:
    out = torch.zeros((), dtype=_F64, device=K.device)
    for _, _, B in K.row_blocks():
        out = out + (B.to(_F64) ** 2).sum()
    return out


# -- kernel ridge regression: leave-one-out, GCV, differentiable fit + predict ---------
# The LOO value's first-order relative error from the probes' spread above which
# loo_error warns.
_LOO_PROBE_RTOL = 0.1


def _check_loo_probes(what, C, d, d_in, ZW, p):
    """Warn when the probe estimate of diag A⁻¹ leaves the LOO value rough. With
    r_i = c_i / d_i and u_i = se_i / d_i (se_i the standard error of d_i from the spread of
    the p products z ⊙ A⁻¹z), the relative error of Σ r_i² is estimated as
    √(Σ (2 r_i² u_i)²) / Σ r_i² (first order, rows independent) plus Σ 3 r_i² u_i² / Σ r_i²
    (the second-order bias of 1/d²); also an estimate ≤ 0 (impossible for an SPD A)."""
    se = ZW.std(dim=1) / math.sqrt(p)
    r2 = (C / d_in[:, None]) ** 2
    u = (se / d_in)[:, None]
    total = r2.sum().clamp(min=1e-300)
    # standard error (the rows' errors taken as independent) plus the bias of 1/d² (3u²)
    rel = float(((2 * r2 * u) ** 2).sum().sqrt() / total + (3 * r2 * u ** 2).sum() / total)
    bad = int((d <= 0).sum())
    if bad or rel > _LOO_PROBE_RTOL:
        why = f"; it was <= 0 in {bad} of {d.numel()} rows" if bad else ""
        warnings.warn(f"{what} (cg): the {p}-probe estimate of diag (K + alpha*I)⁻¹ leaves the "
                      f"value uncertain by about {rel:.0%} (from the probes' spread){why}; "
                      f"raise num_probes (the error falls as 1/√num_probes), raise alpha, "
                      f"or use method='exact'", ConvergenceWarning, stacklevel=4)


def _inverse_diag_and_solve(kernel, X, Y, lam, method, num_probes, tol, max_iter, backend,
                            random_state, what=None):
    """(c = (K + λI)⁻¹Y, diag (K + λI)⁻¹ or its estimate, tr (K + λI)⁻¹ or its estimate)."""
    n = X.shape[0]
    if _method(method, n) == "exact":
        L = _cholesky(_dense_system(kernel, X, lam), "K + alpha*I")
        C = torch.cholesky_solve(Y.to(_F64), L)
        Ainv = torch.cholesky_inverse(L)
        d = Ainv.diagonal()
        return C, d, d.sum()
    A, P = _lazy_system(kernel, X, lam, backend)
    Z = _rademacher((n, num_probes), X.dtype, X.device, as_generator(random_state))
    S = cg(A, torch.cat([Y, Z], 1), preconditioner=P, tol=tol, max_iter=max_iter)
    C, W = S[:, :Y.shape[1]].to(_F64), S[:, Y.shape[1]:].to(_F64)
    # diag(A⁻¹) ≈ mean_p z ⊙ A⁻¹z (Bekas, Kokiopoulou and Saad 2007), tr A⁻¹ ≈ mean zᵀA⁻¹z.
    d = (Z.to(_F64) * W).mean(1)
    # Each entry lies in [1/A_ii, 1/λ] (Cauchy–Schwarz: (eᵢᵀA⁻¹eᵢ)(eᵢᵀAeᵢ) ≥ 1; A ⪰ λI):
    # an estimate outside is moved to the nearer end, which only brings it closer.
    lo = 1 / A.diag().to(_F64)
    d_in = torch.minimum(torch.maximum(d, lo), 1 / lam.to(_F64))
    if what is not None:
        _check_loo_probes(what, C.detach(), d.detach(), d_in.detach(),
                          (Z.to(_F64) * W).detach(), num_probes)
    return C, d_in, d.sum()


def loo_error(kernel, X, y, alpha, *, method="auto", num_probes=64, tol=1e-6,
              max_iter=None, backend=None, random_state=None):
    r"""Mean squared leave-one-out residual of kernel ridge regression.

    With the ``KernelRidge`` convention (K + αI)c = y and hat matrix H = K(K + αI)⁻¹, the
    leave-one-out residuals have the closed form

    .. math::
        r_i = \frac{y_i - \hat y_i}{1 - H_{ii}} = \frac{c_i}{[(K + \alpha I)^{-1}]_{ii}},
        \qquad \mathrm{LOO} = \frac1{nr}\sum_{i, j} r_{ij}^2

    (Wahba 1990, "Spline Models for Observational Data", Thm 4.2.1; Cawley and Talbot
    2004 for its use in kernel learning), since y − ŷ = αc and I − H = α(K + αI)⁻¹.

    ``method="exact"``: one float64 Cholesky, O(n³). ``"cg"``: one batched CG solve of
    width r + p on the lazy Gram matrix, with the diagonal of (K + αI)⁻¹ estimated by p
    Rademacher probes, d ≈ (1/p) Σ z ⊙ (K + αI)⁻¹z (Bekas, Kokiopoulou and Saad 2007);
    the per-entry error of that estimate is about ‖off-diagonal row of (K + αI)⁻¹‖ / √p,
    so the large-n value is an approximation, good when α is not tiny. Each estimate is
    moved into [1/(K_ii + α), 1/α], where the true entry lies, and a
    :class:`~torchkern.linalg.ConvergenceWarning` gives the value's relative error
    estimated from the probes' spread when it exceeds 10 % (or an estimate was ≤ 0):
    RBF(0.5) on 300 points with α = 1e-5 gave 7000 times the exact value, silently before.
    ``"auto"``: exact for n ≤ 3000.

    Returns
    -------
    Tensor
        0-d, differentiable with respect to the kernel, ``alpha`` and X.
    """
    kernel, X, Y, _ = _inputs(kernel, X, y, what="loo_error")
    lam = _positive(alpha, "alpha", Y)
    check_int(num_probes, "num_probes")
    _check_max_iter(max_iter)
    C, d, _ = _inverse_diag_and_solve(kernel, X, Y, lam, method, num_probes, tol, max_iter,
                                      backend, random_state, what="loo_error")
    return ((C / d[:, None]) ** 2).mean().to(Y.dtype)


def gcv(kernel, X, y, alpha, *, method="auto", num_probes=32, tol=1e-6, max_iter=None,
        backend=None, random_state=None):
    r"""Generalized cross-validation score of kernel ridge regression.

    .. math::
        \mathrm{GCV}
        = \frac{\frac1n\lVert (I - H) y\rVert^2}{\left(\frac1n\mathrm{tr}(I - H)\right)^2}
        = \frac{n\,\lVert c\rVert^2}{\left(\mathrm{tr}(K + \alpha I)^{-1}\right)^2}

    (Golub, Heath and Wahba 1979, "Generalized cross-validation as a method for choosing a
    good ridge parameter", Technometrics 21), averaged over the r columns of y, with
    (K + αI)c = y. ``"exact"``: float64 Cholesky, O(n³). ``"cg"``: one CG solve of width
    r + p and Hutchinson's estimate of the trace (relative error ~ √(2/p)·‖A⁻¹‖_F/tr A⁻¹,
    typically 1e-2 with p = 32). ``"auto"``: exact for n ≤ 3000.
    """
    kernel, X, Y, _ = _inputs(kernel, X, y, what="gcv")
    lam = _positive(alpha, "alpha", Y)
    check_int(num_probes, "num_probes")
    _check_max_iter(max_iter)
    C, _, t = _inverse_diag_and_solve(kernel, X, Y, lam, method, num_probes, tol, max_iter,
                                      backend, random_state)
    n = X.shape[0]
    # ‖c / t‖², not ‖c‖² / t²: with K and alpha of order 1e200 both underflowed (0/0 = NaN)
    return (n * ((C / t) ** 2).sum(0).mean()).to(Y.dtype)


def kernel_ridge_predict(kernel, X, y, X_test, alpha, *, solver="auto", tol=1e-8,
                         max_iter=None, backend=None):
    r"""Fit kernel ridge regression on (X, y) and predict at ``X_test``, differentiably.

    .. math:: \hat f(X_{test}) = K(X_{test}, X)\,(K + \alpha I)^{-1} y

    Gradients of the solve come by implicit differentiation: with c = A⁻¹y, A = K + αI,
    dc = A⁻¹(dy − dA c), so the backward pass is one more solve with A (a float64
    triangular solve for ``"cholesky"``; one adjoint CG solve for ``"cg"``, see
    :func:`torchkern.linalg.cg`) and never differentiates through solver iterations. Any
    validation loss of the predictions can then be minimized over the kernel's parameters,
    α, the training inputs and targets.

    Parameters
    ----------
    kernel : Kernel
    X : kernel input of n samples
    y : Tensor of shape (n,) or (n, r)
    X_test : kernel input of t samples
    alpha : float or 0-d Tensor, > 0
    solver : {"auto", "cholesky", "cg"}
        ``"auto"``: Cholesky for n ≤ 3000, else CG with a pivoted-Cholesky
        preconditioner on the lazy Gram matrix.
    tol, max_iter : CG settings.

    Returns
    -------
    Tensor of shape (t,) or (t, r)
        In X's dtype. Cost: O(n³) (Cholesky) or O(n² r) per CG step, plus O(t n r).
    """
    kernel, X, Y, vector = _inputs(kernel, X, y, what="kernel_ridge_predict")
    X_test = check_fitted_input(kernel, X_test, X, "X_test", allow_1d=True)
    lam = _positive(alpha, "alpha", Y)
    _check_max_iter(max_iter)
    methods = {"auto": "auto", "cholesky": "exact", "cg": "cg"}
    if solver not in methods:
        raise ValueError(f"solver must be 'auto', 'cholesky' or 'cg', got {solver!r}")
    if _method(methods[solver], X.shape[0]) == "exact":
        L = _cholesky(_dense_system(kernel, X, lam), "K + alpha*I")
        C = torch.cholesky_solve(Y.to(_F64), L).to(Y.dtype)
    else:
        A, P = _lazy_system(kernel, X, lam, backend)
        C = cg(A, Y, preconditioner=P, tol=tol, max_iter=max_iter)
    out = kernel(X_test, X, backend=backend) @ C
    return out.reshape(-1) if vector else out


# -- two-sample test power -------------------------------------------------------------
def mmd_test_power(kernel, X, Y, *, reg=1e-8, backend=None):
    r"""The test-power criterion MMD²_u / σ̂_{H1} for learning two-sample-test kernels.

    With n = m paired samples and h_ij = k(x_i, x_j) + k(y_i, y_j) − k(x_i, y_j) −
    k(y_i, x_j), the unbiased MMD² of Gretton et al. (2012, eq. 3) and the estimate of its
    asymptotic variance under H1 (Liu et al. 2020, eq. 5; Sutherland et al. 2017)

    .. math::
        \hat\sigma^2_{H_1} = 4\Big(\frac1{n^3}\sum_i\Big(\sum_j h_{ij}\Big)^2
        - \Big(\frac1{n^2}\sum_{ij} h_{ij}\Big)^2\Big),\qquad
        J = \frac{\widehat{\mathrm{MMD}}{}^2_u}{\sqrt{\hat\sigma^2_{H_1} + \lambda}}

    give the criterion J (λ = ``reg``): the asymptotic power of the MMD test grows with
    J, so maximizing it on a training split and testing on held-out data gives a powerful
    test at the right level. Cost: four products with the lazy Gram matrices
    (O(n²) kernel evaluations, O(n) memory).

    References
    ----------
    F. Liu, W. Xu, J. Lu, G. Zhang, A. Gretton and D. J. Sutherland, "Learning deep kernels
    for non-parametric two-sample tests", ICML 2020. D. J. Sutherland et al., "Generative
    models and model criticism via optimized maximum mean discrepancy", ICLR 2017.
    """
    from ..stats.mmd import mmd2_unbiased
    kernel = check_kernel(kernel)
    X, Y = kernel.check_input(X, "X"), kernel.check_input(Y, "Y")
    _sharded(kernel, X, "mmd_test_power")
    _sharded(kernel, Y, "mmd_test_power")
    n = X.shape[0]
    if Y.shape[0] != n or n < 2:
        raise ValueError(f"mmd_test_power needs as many samples in Y as in X (>= 2), got "
                         f"{n} and {Y.shape[0]}")
    check_positive(reg, "reg", allow_zero=True)
    Kxx, Kyy, Kxy = kernel(X, backend=backend), kernel(Y, backend=backend), \
        kernel(X, Y, backend=backend)
    kmax = max(float(Kxx.diag().detach().abs().max()), float(Kyy.diag().detach().abs().max()))
    # In units of s = max k(x, x): J = (MMD²/s) / √(σ̂²/s² + λ/s²) is the same, and h²
    # no longer overflows (outputscale 1e200: an OverflowError, σ̂² = ∞)
    s = kmax if 0 < kmax < math.inf else 1.0
    mmd2 = mmd2_unbiased(Kxx, Kyy, Kxy).as_subclass(torch.Tensor).to(_F64) / s
    h = (row_sums(Kxx) + row_sums(Kyy) - row_sums(Kxy) - row_sums(Kxy.T)).to(_F64) / s
    var = 4 * ((h ** 2).sum() / n ** 3 - (h.sum() / n ** 2) ** 2)
    r = math.sqrt(float(reg)) / s  # √λ in those units; r² may overflow (s = 1e-200)
    # Each h_i sums 4n kernel values, each within ε·max k(x, x) of its own (|k(x, y)| ≤
    # max k(x, x) for a positive definite kernel): σ̂² below (8ε max k(x, x))², well above
    # that rounding's 16ε²max²/n, is the rounding itself (X and Y alike to the kernel),
    # and J = MMD²/σ̂ a ratio of two roundings (−5e15 for X = Y with an RBF).
    floor = (8 * torch.finfo(X.dtype).eps) ** 2
    if float(var.detach()) + r * r <= floor:  # √ of 0 or of a rounding: NaN or noise
        raise ValueError(f"mmd_test_power: the variance estimate σ̂²_H1 is "
                         f"{float(var.detach()) * s * s:.3g}, at or below the rounding of the "
                         f"kernel values ({floor * s * s:.3g}; X and Y look alike to the "
                         f"kernel, or it is a zero kernel) and reg = {float(reg)!r}: pass "
                         f"reg > 0")
    sd = r * (var / r / r + 1).sqrt() if r > 1 else (var + r * r).sqrt()
    return (mmd2 / sd).to(X.dtype)


# -- Nyström (inducing-point) objective ------------------------------------------------
def sgpr_bound(kernel, X, y, centers, noise, *, jitter=1e-6):
    r"""Titsias' variational lower bound on log p(y | X) with m inducing points.

    .. math::
        \mathcal F = \log\mathcal N(y \mid 0, Q + \sigma^2 I)
        - \frac{1}{2\sigma^2}\mathrm{tr}(K - Q),\qquad Q = K_{nm}K_{mm}^{-1}K_{mn}

    (Titsias 2009, eq. 9), summed over the columns of a 2-D ``y``. 𝓕 ≤ log p(y | X), with
    equality when the centres are the training points. Maximizing it over the kernel, the
    noise and the ``centers`` (a tensor that requires grad) learns a Nyström model on large
    n: by Woodbury with B = I + σ⁻²L⁻¹K_mnK_nmL⁻ᵀ (K_mm = LLᵀ) it costs O(n m²) time and
    O(n m) memory (K_nm materialized), never n × n.

    Parameters
    ----------
    centers : Tensor of shape (m, d)
        Inducing inputs; learned when they require grad.
    noise : float or 0-d Tensor, > 0
        Noise variance σ².
    jitter : float
        Added to K_mm's diagonal (relative to its mean diagonal).

    References
    ----------
    M. Titsias, "Variational learning of inducing variables in sparse Gaussian processes",
    AISTATS 2009.
    """
    kernel, X, Y, _ = _inputs(kernel, X, y, what="sgpr_bound", sharded=False)
    n, r = Y.shape
    s2 = _positive(noise, "noise", Y).to(_F64)
    A, LB = _nystrom_factors(kernel, X, centers, s2, jitter)
    Y64 = Y.to(_F64)
    c = torch.linalg.solve_triangular(LB, A @ Y64, upper=False)
    log_n = (-0.5 * n * r * (_LOG_2PI + s2.log()) - r * LB.diagonal().log().sum()
             - 0.5 * ((Y64 * Y64).sum() - (c * c).sum()) / s2)
    trace = kernel.diag(X).to(_F64).sum() / s2 - (A * A).sum()
    return (log_n - 0.5 * r * trace).to(Y.dtype)


def _nystrom_factors(kernel, X, centers, s2, jitter):
    """(A = L⁻¹K_mn/σ, L_B) with K_mm + jitter·I = LLᵀ and I + AAᵀ = L_B L_Bᵀ (float64):
    Q = K_nm K_mm⁻¹ K_mn = σ²AᵀA, in O(n m²) time and O(n m) memory."""
    Z = check_fitted_input(kernel, centers, X, "centers", allow_1d=True)
    check_positive(jitter, "jitter", allow_zero=True)
    m = Z.shape[0]
    eye = torch.eye(m, dtype=_F64, device=Z.device)
    Kmm = kernel(Z, backend="dense").to_dense().to(_F64)
    Kmm = Kmm + jitter * Kmm.diagonal().mean().detach() * eye
    Knm = kernel(X, Z, backend="dense").to_dense().to(_F64)
    L = _cholesky(Kmm, "K_mm of the centers")
    A = torch.linalg.solve_triangular(L, Knm.T, upper=False) / s2.sqrt()  # (m, n)
    return A, _cholesky(eye + A @ A.T, "I + A Aᵀ")


def nystrom_complexity_reg(kernel, X, y, centers, penalty, *, jitter=1e-6):
    r"""The complexity-regularized objective of Nyström kernel ridge regression.

    With the Nyström approximation Q = K_nm K_mm⁻¹ K_mn of the Gram matrix on m centres
    and v = nλ (``penalty`` λ, the ridge of Falkon; ``KernelRidge(alpha=nλ)``),

    .. math::
        \mathcal L = \mathrm{tr}\,Q(Q + vI)^{-1}
        + v\,\mathrm{tr}\,Y^\top(Q + vI)^{-1}Y
        \Big(1 + \frac{\mathrm{tr}(K - Q)}{v\,n}\Big)

    summed over the columns of Y: the effective dimension (first term) penalizes complex
    models, the data fit (second) is the ridge residual, and the trace factor charges the
    Nyström approximation error (Meanti, Carratino, De Vito and Rosasco, "Efficient
    hyperparameter tuning for large scale kernel ridge regression", AISTATS 2022, the
    complexity-regularization objective). Minimizing it over the kernel, λ (a tensor that
    requires grad) and the ``centers`` learns a Nyström model on large n. Cost O(n m²)
    time, O(n m) memory (K_nm materialized), never n × n: with A = L⁻¹K_mn/√v
    (K_mm = LLᵀ) and I + AAᵀ = L_B L_Bᵀ, the effective dimension is ‖L_B⁻¹A‖²_F and the
    data fit ‖Y‖²_F − ‖L_B⁻¹AY‖²_F.

    Parameters
    ----------
    kernel : Kernel
    X : kernel input of n samples
    y : Tensor or array of shape (n,) or (n, r)
    centers : Tensor of shape (m, d)
        Nyström centres; learned when they require grad.
    penalty : float or 0-d Tensor, > 0
        λ.
    jitter : float
        Added to K_mm's diagonal (relative to its mean diagonal).

    Returns
    -------
    Tensor
        0-d, to minimize; differentiable.
    """
    kernel, X, Y, _ = _inputs(kernel, X, y, what="nystrom_complexity_reg", sharded=False)
    n = Y.shape[0]
    v = _positive(penalty, "penalty", Y).to(_F64) * n
    A, LB = _nystrom_factors(kernel, X, centers, v, jitter)
    Y64 = Y.to(_F64)
    d_eff = torch.linalg.solve_triangular(LB, A, upper=False).square().sum()
    AY = torch.linalg.solve_triangular(LB, A @ Y64, upper=False)
    fit = (Y64 * Y64).sum() - AY.square().sum()
    trace = kernel.diag(X).to(_F64).sum() - v * (A * A).sum()
    return (d_eff + fit * (1 + trace / (v * n))).to(Y.dtype)
