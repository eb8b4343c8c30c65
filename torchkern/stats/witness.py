r"""The MMD witness function μ̂_P − μ̂_Q."""
from __future__ import annotations

from ._common import check_kernel, check_samples
from .embedding import KernelMeanEmbedding, mean_embedding

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
    """
    X, Y = check_samples(X, Y, kernel=check_kernel(kernel))
    f = mean_embedding(X, kernel, backend=backend) - mean_embedding(Y, kernel, backend=backend)
    if normalize:
        f = f / f.norm()
    return f
