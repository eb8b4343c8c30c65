r"""The MMD witness function μ̂_P − μ̂_Q."""
from __future__ import annotations

import torch

from .._validation import check_bool
from ._common import check_kernel, check_samples
from .embedding import KernelMeanEmbedding, mean_embedding
from .mmd import _statistic

__all__ = ["witness"]


def witness(X, Y, kernel, *, normalize: bool = False, backend=None) -> KernelMeanEmbedding:
    r"""The witness function f = μ̂_P − μ̂_Q of the maximum mean discrepancy.

    .. math:: f(z) = \frac1n\sum_{i=1}^n k(x_i, z) - \frac1m\sum_{j=1}^m k(y_j, z)

    It is large where P has more mass than Q and negative where Q has more. Its RKHS norm
    ‖f‖_H is the biased MMD estimate, and f/‖f‖_H is the function of the unit ball that
    attains the supremum in MMD(P, Q) = sup_{‖f‖≤1} E_P f − E_Q f (Gretton et al. 2012,
    "A kernel two-sample test", JMLR 13, §2.3 and Lemma 4).

    Evaluating it at m points costs O(m·(n + m')) kernel evaluations, lazily.

    Parameters
    ----------
    X : (n, d) samples of P.
    Y : (m, d) samples of Q.
    kernel : Kernel
    normalize : bool, default False
        Return f/‖f‖_H (the maximizer f*) instead of f; costs one O((n + m)²) product.
    backend : str, optional

    Returns
    -------
    KernelMeanEmbedding
        Callable on a (k, d) tensor; also offers ``norm()`` and ``inner()``.

    Raises
    ------
    ValueError
        With ``normalize=True``, where ‖f‖²_H is zero up to its rounding error (16·√N
        units of max k(z, z)·‖w‖₁² for the N pooled points): X and Y have the same
        empirical distribution (e.g. one is a permutation of the other), and f/‖f‖_H
        would be NaN or amplified rounding noise.
    """
    check_bool(normalize, "normalize")  # normalize="no" was read as True
    X, Y = check_samples(X, Y, kernel=check_kernel(kernel))
    f = mean_embedding(X, kernel, backend=backend) - mean_embedding(Y, kernel, backend=backend)
    if normalize:
        K = kernel(f.points, backend=backend)
        sq = f.weights @ (K @ f.weights)
        # ‖f‖² = wᵀKw sums N² terms of size up to max k(z, z)·|w_i w_j| (a p.d. kernel):
        # its rounding error grows like √N units of max k(z, z)·‖w‖₁², ‖w‖₁ = 2
        N = f.n_points
        floor = (16 * torch.finfo(K.dtype).eps * N ** 0.5 * 4.0
                 * float(K.diag().detach().abs().max()))
        if not float(sq.detach()) > floor:
            raise ValueError(f"the witness of X and Y is zero up to rounding (‖f‖² = "
                             f"{float(sq.detach()):.3g}, rounding level {floor:.3g}): X and Y "
                             f"have the same empirical distribution, so normalize=True has no "
                             f"direction to return")
        f = f / _statistic(sq.sqrt())
    return f
