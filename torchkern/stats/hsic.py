r"""The Hilbert–Schmidt independence criterion (HSIC).

HSIC(X, Y) is the squared Hilbert–Schmidt norm of the cross-covariance operator between
the RKHSs of k (on X) and l (on Y); with characteristic kernels it is zero exactly when X
and Y are independent (Gretton et al., 2005). It is the MMD between the joint law P_XY and
the product of its marginals P_X ⊗ P_Y, for the product kernel k ⊗ l (Smola, Gretton,
Song and Schölkopf 2007, "A Hilbert space embedding for distributions", ALT; Muandet et
al. 2017, "Kernel mean embedding of distributions: a review and beyond").

Both estimators need S = Σ_ij K_ij L_ij, an elementwise (Frobenius) product that no
matrix-vector product gives: on lazy Gram matrices it is accumulated over row blocks of
both matrices in O(n·block) memory; everything else is row sums and diagonals.
"""
from __future__ import annotations

import torch

from .._config import config
from ..inputs import check_input
from ..gram import DenseKernelMatrix, KernelMatrix
from ..linalg._common import _check_symmetric
from ._common import as_gram, check_kernel, cheap_trace, row_sums, warn_if_centering_cancels
from .mmd import _statistic

__all__ = ["hsic", "hsic_biased", "hsic_unbiased"]

ESTIMATORS = ("biased", "unbiased")


def _check_pair(K, L):
    K = as_gram(K, "K", square=True)
    L = as_gram(L, "L", square=True)
    if K.shape != L.shape:
        raise ValueError(f"K and L must have the same shape, got {tuple(K.shape)} and "
                         f"{tuple(L.shape)}")
    if K.dtype != L.dtype:
        raise TypeError(f"K and L must have the same dtype, got {K.dtype} and {L.dtype}")
    for M, name in ((K, "K"), (L, "L")):
        # the estimators center with row sums only and pair K_ij with L_ij: an asymmetric
        # matrix (a cross-Gram k(X, Y) passed by mistake) gave a value that is not
        # tr(KHLH)/n² and changed with the orientation (unbiased: 0.018 against 0.0053
        # for the transposes); a dense one is checked in one pass, a lazy one is trusted.
        # The linalg rule: refused past 1 % of max |M|, a warning above √ε — a float32
        # Gram cast to float64 is symmetric only to float32's rounding, and was refused.
        if isinstance(M, DenseKernelMatrix):
            _check_symmetric(M.tensor, name)
    return K, L, K.shape[0]


def _block_size(n: int, device=None) -> int:
    # Two row blocks (and a few intermediates of the kernel formula) live at once.
    return max(1, int(config.block_bytes(device) // (8 * max(n, 1) * 8)))


def _frobenius(K: KernelMatrix, L: KernelMatrix, k_shift=None, l_shift=None):
    """Σ_ij K'_ij L'_ij (float64), where M' = M − s_i − s_j + mean(s) when a row-mean
    vector s is given (feature-space centering of a symmetric M), else M' = M.

    Dense matrices are multiplied at once; lazy ones by row blocks, O(n·block) memory.
    """
    n = K.shape[0]

    def center(block, shift, s, e):
        if shift is None:
            return block
        return block - shift[s:e, None] - shift[None, :] + shift.mean()

    if isinstance(K, DenseKernelMatrix) and isinstance(L, DenseKernelMatrix):
        A = center(K.tensor, k_shift, 0, n)
        B = center(L.tensor, l_shift, 0, n)
        return (A * B).sum(dtype=torch.float64)
    b = _block_size(n, K.device)
    acc = torch.zeros((), dtype=torch.float64, device=K.device)
    for (s, e, Kb), (_, _, Lb) in zip(K.row_blocks(b), L.row_blocks(b)):
        acc = acc + (center(Kb, k_shift, s, e) * center(Lb, l_shift, s, e)).sum(dtype=torch.float64)
    return acc


def hsic_biased(K, L) -> torch.Tensor:
    r"""The biased (V-statistic) HSIC estimate from two symmetric Gram matrices.

    .. math::
        \widehat{\mathrm{HSIC}}_b = \frac{1}{n^2}\,\mathrm{tr}(K H L H)
        = \frac{1}{n^2}\sum_{i,j} \tilde K_{ij}\tilde L_{ij},
        \qquad H = I - \tfrac1n \mathbf 1\mathbf 1^\top,

    with K̃ = HKH, L̃ = HLH the Gram matrices centered in feature space (Gretton et al.
    2005; Schölkopf, Smola and Müller 1998 for the centering). Working with both matrices centered
    avoids the cancellation of the expanded form tr(KL) − (2/n)1ᵀKL1 + (1ᵀK1)(1ᵀL1)/n².
    The bias is O(1/n).

    Cost: two matrix-vector products and one pass over the entries of both matrices:
    O(n²) kernel evaluations, O(n·block) memory for lazy inputs (row blocks of K and L
    side by side). Gradients flow, but autograd then keeps every block (O(n²) memory).

    Parameters
    ----------
    K : KernelMatrix or Tensor of shape (n, n)
        Gram matrix of the X sample.
    L : KernelMatrix or Tensor of shape (n, n)
        Gram matrix of the Y sample (same n).

    Returns
    -------
    Tensor
        0-d, in K's dtype.
    """
    K, L, n = _check_pair(K, L)
    rk = row_sums(K) / n
    rl = row_sums(L) / n
    for M, r, name in ((K, rk, "K"), (L, rl, "L")):
        tr = cheap_trace(M)
        if tr is not None:
            warn_if_centering_cancels(tr, float(r.detach().mean()), n, M.dtype,
                                      f"hsic ({name})")
    return _statistic((_frobenius(K, L, rk, rl) / n**2).to(K.dtype))


def hsic_unbiased(K, L) -> torch.Tensor:
    r"""The unbiased HSIC estimate of Song et al. (2012, eq. 5).

    With K̃, L̃ the Gram matrices with their diagonals set to zero,

    .. math::
        \widehat{\mathrm{HSIC}}_u = \frac{1}{n(n-3)}\Big[\mathrm{tr}(\tilde K\tilde L)
        + \frac{\mathbf 1^\top\tilde K\mathbf 1\;\mathbf 1^\top\tilde L\mathbf 1}{(n-1)(n-2)}
        - \frac{2}{n-2}\,\mathbf 1^\top\tilde K\tilde L\mathbf 1\Big],

    a U-statistic (an average over distinct 4-tuples of samples). tr(K̃L̃) =
    Σ_ij K_ij L_ij − Σ_i K_ii L_ii and 1ᵀK̃L̃1 = (K1 − diag K)ᵀ(L1 − diag L), so the cost
    is two matrix-vector products, two diagonals and one blocked pass over the entries of
    both matrices: O(n²) time, O(n·block) memory for lazy inputs.

    Parameters
    ----------
    K, L : KernelMatrix or Tensor of shape (n, n), n ≥ 4, symmetric

    Returns
    -------
    Tensor
        0-d, in K's dtype.
    """
    K, L, n = _check_pair(K, L)
    if n < 4:
        raise ValueError(f"the unbiased HSIC estimator needs at least 4 samples, got {n}")
    f64 = torch.float64
    dk, dl = K.diag().to(f64), L.diag().to(f64)
    rk, rl = row_sums(K).to(f64) - dk, row_sums(L).to(f64) - dl
    for d, r, M, name in ((dk, rk, K, "K"), (dl, rl, L, "L")):
        warn_if_centering_cancels(d.detach().sum(), float((r + d).detach().sum()) / n**2, n,
                                  M.dtype, f"hsic ({name})")
    trace = _frobenius(K, L) - dk @ dl
    out = (trace + rk.sum() * rl.sum() / ((n - 1) * (n - 2)) - 2.0 * (rk @ rl) / (n - 2))
    return _statistic((out / (n * (n - 3))).to(K.dtype))


def hsic(X, Y, kernel_x, kernel_y, estimator: str = "biased", *, backend=None) -> torch.Tensor:
    r"""HSIC between paired samples (x_i, y_i), i = 1..n.

    ``"biased"`` is tr(KHLH)/n² (:func:`hsic_biased`); ``"unbiased"`` the U-statistic of
    Song et al. (2012) (:func:`hsic_unbiased`, n ≥ 4). K = k(X, X), L = l(Y, Y); X and Y
    may have different numbers of features.

    Cost: O(n²(d_x + d_y)) time; O(n·block) memory with a lazy backend.

    Parameters
    ----------
    X : Tensor or ndarray of shape (n, d_x)
    Y : Tensor or ndarray of shape (n, d_y)
    kernel_x, kernel_y : Kernel
    estimator : {"biased", "unbiased"}, default "biased"
    backend : str, optional

    Returns
    -------
    Tensor
        0-d, in X's dtype.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    kernel_x, kernel_y = check_kernel(kernel_x, "kernel_x"), check_kernel(kernel_y, "kernel_y")
    X, Y = check_input(kernel_x, X, "X", allow_1d=True), check_input(kernel_y, Y, "Y", allow_1d=True)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y must hold the same number of (paired) samples, got "
                         f"{X.shape[0]} and {Y.shape[0]}")
    if isinstance(X, torch.Tensor) and isinstance(Y, torch.Tensor) and X.dtype != Y.dtype:
        raise TypeError(f"X and Y must have the same dtype, got {X.dtype} and {Y.dtype}")
    K = kernel_x(X, backend=backend)
    L = kernel_y(Y, backend=backend)
    if estimator == "unbiased":
        return hsic_unbiased(K, L)
    return hsic_biased(K, L)
