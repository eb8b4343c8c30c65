r"""Estimators of the squared maximum mean discrepancy.

MMD²(P, Q) = ‖μ_P − μ_Q‖²_H = E k(X, X') + E k(Y, Y') − 2 E k(X, Y)
(Gretton, Borgwardt, Rasch, Schölkopf and Smola 2012, "A kernel two-sample test", JMLR
13, Lemma 6).

The quadratic-time estimators read Gram matrices only through matrix-vector products and
their diagonals, so they run on lazy (blocked / KeOps) Gram matrices in O(n + m) memory
and are differentiable with respect to the samples and the kernel's hyperparameters —
``mmd2`` is a loss for training generative models (Li, Swersky and Zemel 2015,
"Generative moment matching networks", ICML; Dziugaite, Roy and Ghahramani 2015, UAI).
"""
from __future__ import annotations

import torch

from ..inputs import concat
from ._common import (as_gram, check_kernel, check_samples, cheap_trace, total,
                      warn_if_centering_cancels)

__all__ = ["mmd2", "mmd2_biased", "mmd2_unbiased", "mmd2_linear"]

ESTIMATORS = ("unbiased", "biased", "linear")


class _Statistic(torch.Tensor):
    """A differentiable 0-d estimate that converts to a plain float without torch's
    requires-grad warning.

    The kernel's hyperparameters are ``nn.Parameter``s, so an estimate carries a graph even
    when the samples do not require grad; ``float(mmd2(...))`` is then the value (the
    graph is dropped knowingly) while ``mmd2(...).backward()`` still reaches the samples
    and the hyperparameters. Arithmetic on it gives plain tensors.
    """

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __float__(self):
        return float(self.detach())

    def __repr__(self, *, tensor_contents=None):
        return repr(self.as_subclass(torch.Tensor))


def _statistic(value: torch.Tensor) -> torch.Tensor:
    return value.as_subclass(_Statistic) if value.requires_grad else value


def _check_grams(Kxx, Kyy, Kxy):
    Kxx = as_gram(Kxx, "Kxx", square=True)
    Kyy = as_gram(Kyy, "Kyy", square=True)
    Kxy = as_gram(Kxy, "Kxy")
    n, m = Kxx.shape[0], Kyy.shape[0]
    if Kxy.shape != (n, m):
        raise ValueError(f"Kxy must have shape ({n}, {m}) to match Kxx and Kyy, "
                         f"got {tuple(Kxy.shape)}")
    return Kxx, Kyy, Kxy, n, m


def mmd2_biased(Kxx, Kyy, Kxy) -> torch.Tensor:
    r"""The biased (V-statistic) estimate of MMD² from three Gram matrices.

    .. math::
        \widehat{\mathrm{MMD}}{}^2_b = \frac{1}{n^2}\sum_{i,j} k(x_i, x_j)
        + \frac{1}{m^2}\sum_{i,j} k(y_i, y_j) - \frac{2}{nm}\sum_{i,j} k(x_i, y_j)
        = \lVert \hat\mu_P - \hat\mu_Q \rVert_H^2

    (the square of Gretton et al.'s 2012 MMD_b). It is ≥ 0 and has a positive bias of order 1/n.

    Cost: three matrix-vector products, O(n² + m² + nm) kernel evaluations, O(n + m)
    memory for lazy inputs. Sums are accumulated in float64.

    Parameters
    ----------
    Kxx : KernelMatrix or Tensor of shape (n, n)
    Kyy : KernelMatrix or Tensor of shape (m, m)
    Kxy : KernelMatrix or Tensor of shape (n, m)

    Returns
    -------
    Tensor
        0-d, in the dtype of ``Kxx``; differentiable.
    """
    Kxx, Kyy, Kxy, n, m = _check_grams(Kxx, Kyy, Kxy)
    txx, tyy, txy = total(Kxx), total(Kyy), total(Kxy)
    dx, dy = cheap_trace(Kxx), cheap_trace(Kyy)
    if dx is not None and dy is not None:
        _warn_pooled(dx + dy, txx, tyy, txy, n, m, Kxx.dtype)
    out = txx / n**2 + tyy / m**2 - 2.0 * txy / (n * m)
    return _statistic(out.to(Kxx.dtype))


def _warn_pooled(trace, txx, tyy, txy, n, m, dtype):
    """The cancellation warning of the pooled Gram matrix [[Kxx, Kxy], [Kyx, Kyy]]."""
    N = n + m
    warn_if_centering_cancels(trace, float((txx + tyy + 2.0 * txy).detach()) / N**2, N,
                              dtype, "mmd2")


def mmd2_unbiased(Kxx, Kyy, Kxy) -> torch.Tensor:
    r"""The unbiased (U-statistic) estimate of MMD² from three Gram matrices.

    .. math::
        \widehat{\mathrm{MMD}}{}^2_u = \frac{1}{n(n-1)}\sum_{i\ne j} k(x_i, x_j)
        + \frac{1}{m(m-1)}\sum_{i\ne j} k(y_i, y_j) - \frac{2}{nm}\sum_{i,j} k(x_i, y_j)

    (Gretton et al. 2012, eq. 3). The sums over
    i ≠ j are 1ᵀK1 − tr K. Unbiased, hence negative with positive probability when P = Q.

    Cost: three matrix-vector products and two diagonals, O(n² + m² + nm) kernel
    evaluations, O(n + m) memory for lazy inputs. Sums are accumulated in float64.

    Parameters
    ----------
    Kxx : KernelMatrix or Tensor of shape (n, n), n ≥ 2
    Kyy : KernelMatrix or Tensor of shape (m, m), m ≥ 2
    Kxy : KernelMatrix or Tensor of shape (n, m)

    Returns
    -------
    Tensor
        0-d, in the dtype of ``Kxx``; differentiable.
    """
    Kxx, Kyy, Kxy, n, m = _check_grams(Kxx, Kyy, Kxy)
    if n < 2 or m < 2:
        raise ValueError(f"the unbiased MMD estimator needs at least 2 samples on each side, "
                         f"got n={n} and m={m}")
    txx, tyy, txy = total(Kxx), total(Kyy), total(Kxy)
    dx, dy = Kxx.diag().sum(dtype=torch.float64), Kyy.diag().sum(dtype=torch.float64)
    _warn_pooled(dx.detach() + dy.detach(), txx, tyy, txy, n, m, Kxx.dtype)
    sxx, syy = txx - dx, tyy - dy
    out = sxx / (n * (n - 1)) + syy / (m * (m - 1)) - 2.0 * txy / (n * m)
    return _statistic(out.to(Kxx.dtype))


def mmd2_linear(X, Y, kernel) -> torch.Tensor:
    r"""The linear-time estimate of MMD² (Gretton et al. 2012, Lemma 14).

    With n = m samples split into ⌊n/2⌋ disjoint pairs,

    .. math::
        \widehat{\mathrm{MMD}}{}^2_l = \frac{1}{\lfloor n/2\rfloor}\sum_{i=1}^{\lfloor n/2\rfloor}
        h(z_{2i-1}, z_{2i}),\quad
        h(z, z') = k(x, x') + k(y, y') - k(x, y') - k(x', y),

    an unbiased estimate with variance O(1/n) (a sample of i.i.d. terms, so its null law
    is asymptotically normal). When n is odd, the last sample of each side is left out.

    Cost: 2n kernel evaluations, O(n) time and memory.

    Parameters
    ----------
    X : Tensor of shape (n, d), n ≥ 2
    Y : Tensor of shape (n, d)
    kernel : Kernel

    Returns
    -------
    Tensor
        0-d, in the dtype of X; differentiable.
    """
    kernel = check_kernel(kernel)
    X, Y = check_samples(X, Y, kernel=kernel)
    n = X.shape[0]
    if Y.shape[0] != n:
        raise ValueError(f"the linear-time MMD estimator pairs x_i with y_i and needs as many "
                         f"samples in Y as in X, got {n} and {Y.shape[0]}")
    if n < 2:
        raise ValueError(f"the linear-time MMD estimator needs at least 2 samples, got {n}")
    h = n // 2
    x1, x2, y1, y2 = X[0:2 * h:2], X[1:2 * h:2], Y[0:2 * h:2], Y[1:2 * h:2]

    def pairs(a, b):
        return kernel.pairs(a, b)

    terms = pairs(x1, x2) + pairs(y1, y2) - pairs(x1, y2) - pairs(x2, y1)
    return _statistic(terms.mean())


def mmd2(X, Y, kernel, estimator: str = "unbiased", *, backend=None) -> torch.Tensor:
    r"""Squared maximum mean discrepancy between the samples X ∼ P and Y ∼ Q.

    MMD²(P, Q) = ‖μ_P − μ_Q‖²_H = E k(X, X') + E k(Y, Y') − 2 E k(X, Y)
    (Gretton et al. 2012, Lemma 6), estimated by

    - ``"unbiased"`` — the U-statistic, :func:`mmd2_unbiased` (n, m ≥ 2);
    - ``"biased"`` — the V-statistic ‖μ̂_P − μ̂_Q‖²_H, :func:`mmd2_biased` (≥ 0);
    - ``"linear"`` — the linear-time statistic of Gretton et al. (2012),
      :func:`mmd2_linear` (needs n = m).

    Differentiable with respect to X, Y and the kernel's hyperparameters on every backend,
    so it serves as a loss for generative models. The quadratic estimators cost
    O((n + m)²·d) time; with a lazy backend (``"blocked"``, ``"keops"``, or ``"auto"`` on
    large inputs) they use O((n + m)·d) memory — autograd keeps no n × m state either.

    Parameters
    ----------
    X : Tensor or ndarray of shape (n, d)
    Y : Tensor or ndarray of shape (m, d)
    kernel : Kernel
        Used as is (not copied).
    estimator : {"unbiased", "biased", "linear"}, default "unbiased"
    backend : str, optional
        Gram-matrix backend for the quadratic estimators.

    Returns
    -------
    Tensor
        0-d tensor in X's dtype, on X's device.

    Examples
    --------
    >>> import torch, torchkern
    >>> from torchkern.stats import mmd2
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(200, 2, generator=g, dtype=torch.float64)
    >>> Y = torch.randn(200, 2, generator=g, dtype=torch.float64) + 1.0
    >>> bool(mmd2(X, Y, torchkern.RBF(1.0)) > 0.1)
    True
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    kernel = check_kernel(kernel)
    X, Y = check_samples(X, Y, kernel=kernel)
    if estimator == "linear":
        return mmd2_linear(X, Y, kernel)
    n, m = X.shape[0], Y.shape[0]
    if estimator == "unbiased" and (n < 2 or m < 2):
        raise ValueError(f"the unbiased MMD estimator needs at least 2 samples in X and in Y, "
                         f"got {n} and {m}")
    if getattr(kernel, "fits_data", False):
        # a kernel that fits a basis on the set it is called on (MultiscaleLaplacian): the
        # three blocks must come from one call on the pooled sample, or K_XX and K_YY are
        # in different bases
        K = kernel(concat([X, Y]), backend=backend).to_dense()
        Kxx, Kyy, Kxy = K[:n, :n], K[n:, n:], K[:n, n:]
    else:
        Kxx = kernel(X, backend=backend)
        Kyy = kernel(Y, backend=backend)
        Kxy = kernel(X, Y, backend=backend)
    if estimator == "unbiased":
        return mmd2_unbiased(Kxx, Kyy, Kxy)
    return mmd2_biased(Kxx, Kyy, Kxy)
