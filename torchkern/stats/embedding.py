r"""Kernel mean embeddings of empirical distributions.

The mean embedding of a distribution P is μ_P = E_{X∼P}[k(X, ·)] ∈ H (Smola,
Gretton, Song and Schölkopf 2007, "A Hilbert space embedding for distributions", ALT;
Muandet et al. 2017, "Kernel mean embedding of distributions: a review and beyond",
Found. Trends Mach. Learn. 10, §3). From n samples it is estimated by

.. math:: \hat\mu_P = \frac1n \sum_{i=1}^n k(x_i, \cdot),

a finite combination of kernel sections. :class:`KernelMeanEmbedding` holds any such
combination Σ_i w_i k(z_i, ·) — a mean embedding, or the witness μ̂_P − μ̂_Q — without
evaluating a Gram matrix until it is asked for one.
"""
from __future__ import annotations

import numbers

import torch

from .._validation import real_tensor
from ..inputs import KernelInput, check_input, concat
from ._common import check_kernel
from .mmd import _statistic

__all__ = ["KernelMeanEmbedding", "mean_embedding"]


class KernelMeanEmbedding:
    r"""A function f = Σ_i w_i k(z_i, ·) of the RKHS H of ``kernel``, held lazily.

    Evaluating it at m points costs one product of the lazy (m, n) Gram matrix with w:
    O(m·n) time and, with a lazy backend, O(m + n) memory. Inner products in H follow from
    the reproducing property, ⟨Σ_i a_i k(x_i, ·), Σ_j b_j k(y_j, ·)⟩_H = aᵀ K(X, Y) b
    (Schölkopf and Smola 2002, "Learning with Kernels", §2.2). Embeddings of the same kernel can be added,
    subtracted and scaled; everything stays differentiable with respect to the points, the
    weights and the kernel's hyperparameters.

    Usually built by :func:`mean_embedding` or :func:`~torchkern.stats.witness`.

    Parameters
    ----------
    points : Tensor of shape (n, d), or any input of ``kernel`` (graphs, strings: a
        :class:`~torchkern.inputs.KernelInput` of n items)
    weights : Tensor of shape (n,)
    kernel : Kernel
        Used as is, not copied, so that gradients reach its hyperparameters.
    backend : str, optional
        Backend of the Gram matrices it builds (see :class:`~torchkern.kernels.Kernel`).
    """

    def __init__(self, points, weights, kernel, backend=None):
        kernel = check_kernel(kernel)
        self.points = check_input(kernel, points, "points", allow_1d=True)
        # real_tensor: complex weights lost their imaginary part with only torch's warning,
        # a string raised "new(): invalid data type 'str'" naming nothing
        w = weights if (isinstance(weights, torch.Tensor) and weights.is_floating_point()) \
            else real_tensor(weights, "weights")
        self.weights = w.to(dtype=self.points.dtype, device=self.points.device)
        if self.weights.shape != (self.points.shape[0],):
            raise ValueError(f"weights must have shape ({self.points.shape[0]},), "
                             f"got {tuple(self.weights.shape)}")
        if not bool(torch.isfinite(self.weights.detach()).all()):
            raise ValueError("weights contains NaN or infinity")
        self.kernel = check_kernel(kernel)
        self.backend = backend

    @property
    def n_points(self) -> int:
        """Number of kernel sections in the combination."""
        return self.points.shape[0]

    def __call__(self, Z) -> torch.Tensor:
        """f(z) = Σ_i w_i k(z_i, z) at every row (item) of Z, shape (m,): one lazy
        product. Z is any input of the kernel of the embedding's kind (vectors, graphs,
        strings)."""
        Z = check_input(self.kernel, Z, "Z", allow_1d=True)
        if isinstance(self.points, KernelInput):
            self.points.check_compatible(Z, "Z")
            Z = Z.to(dtype=self.points.dtype)
        else:
            if Z.shape[1] != self.points.shape[1]:
                raise ValueError(f"Z has {Z.shape[1]} features but the embedding's points "
                                 f"have {self.points.shape[1]}")
            if Z.dtype != self.points.dtype:
                raise TypeError(f"Z has dtype {Z.dtype} but the embedding's points have "
                                f"{self.points.dtype}")
        return self.kernel(Z, self.points, backend=self.backend) @ self.weights

    def inner(self, other: "KernelMeanEmbedding") -> torch.Tensor:
        r"""⟨f, g⟩_H = aᵀ K(Z_f, Z_g) b, one lazy product: O(n_f·n_g) time.

        For two mean embeddings this is the mean of all k(x_i, y_j), the empirical
        E k(X, Y) = ⟨μ̂_P, μ̂_Q⟩_H.
        """
        self._check_compatible(other)
        K = self.kernel(self.points, other.points, backend=self.backend)
        return _statistic(self.weights @ (K @ other.weights))

    def norm(self) -> torch.Tensor:
        """‖f‖_H = √(wᵀ K w), O(n²) time, O(n) memory with a lazy backend.

        For the witness μ̂_P − μ̂_Q this is the biased (V-statistic) MMD estimate.
        """
        K = self.kernel(self.points, backend=self.backend)
        return _statistic((self.weights @ (K @ self.weights)).clamp_min(0).sqrt())

    # -- algebra in H ------------------------------------------------------------------
    def _check_compatible(self, other):
        if not isinstance(other, KernelMeanEmbedding):
            raise TypeError(f"expected a KernelMeanEmbedding, got {type(other).__name__}")
        if other.kernel is not self.kernel:
            raise ValueError("both embeddings must use the same kernel object")
        if isinstance(self.points, KernelInput) or isinstance(other.points, KernelInput):
            if type(other.points) is not type(self.points):
                raise TypeError(f"the embeddings' points are a {type(self.points).__name__} "
                                f"and a {type(other.points).__name__}")
            self.points.check_compatible(other.points, "the other embedding's points")
            return
        if other.points.shape[1] != self.points.shape[1]:
            raise ValueError(f"the embeddings live on inputs of {self.points.shape[1]} and "
                             f"{other.points.shape[1]} features")
        if other.points.dtype != self.points.dtype:
            raise TypeError(f"the embeddings' points have dtypes {self.points.dtype} and "
                            f"{other.points.dtype}")

    def __add__(self, other):
        if not isinstance(other, KernelMeanEmbedding):
            return NotImplemented
        self._check_compatible(other)
        return KernelMeanEmbedding(concat([self.points, other.points]),
                                   torch.cat([self.weights, other.weights]),
                                   self.kernel, self.backend)

    def __mul__(self, c):
        if not isinstance(c, (numbers.Real, torch.Tensor)):
            return NotImplemented
        return KernelMeanEmbedding(self.points, self.weights * c, self.kernel, self.backend)

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1.0

    def __sub__(self, other):
        if not isinstance(other, KernelMeanEmbedding):
            return NotImplemented
        return self + (-other)

    def __truediv__(self, c):
        return self * (1.0 / c)

    def __repr__(self):
        what = (f"n_features={self.points.shape[1]}" if isinstance(self.points, torch.Tensor)
                else f"points={type(self.points).__name__}")
        return f"KernelMeanEmbedding(n_points={self.n_points}, {what}, kernel={self.kernel})"


def mean_embedding(X, kernel, *, backend=None) -> KernelMeanEmbedding:
    r"""The empirical kernel mean embedding μ̂_P = (1/n) Σ_i k(x_i, ·).

    Returns a callable: ``mu(Z)`` evaluates μ̂_P(z) = (1/n) Σ_i k(x_i, z) at every row of
    Z as ``kernel(Z, X) @ (1/n)`` (O(m·n) time, lazy); ``mu.inner(nu)`` is
    ⟨μ̂_P, μ̂_Q⟩_H = (1/(n m)) Σ_ij k(x_i, y_j); ``mu.norm()`` is ‖μ̂_P‖_H.

    Smola et al. 2007 (ALT); Muandet et al. 2017, §3 (the empirical estimator).

    Parameters
    ----------
    X : Tensor or ndarray of shape (n, d), or any input of ``kernel`` (graphs, strings)
        Samples of P.
    kernel : Kernel
        Used as is (not copied): gradients reach its hyperparameters.
    backend : str, optional
        Gram-matrix backend (``"dense"``, ``"blocked"``, ``"keops"``, ``"auto"``).

    Returns
    -------
    KernelMeanEmbedding

    Examples
    --------
    >>> import torch, torchkern
    >>> from torchkern.stats import mean_embedding
    >>> X = torch.randn(100, 2, dtype=torch.float64)
    >>> mu = mean_embedding(X, torchkern.RBF(1.0))
    >>> mu(torch.zeros(1, 2, dtype=torch.float64)).shape
    torch.Size([1])
    """
    kernel = check_kernel(kernel)
    X = check_input(kernel, X, "X", allow_1d=True)
    n = X.shape[0]
    w = torch.full((n,), 1.0 / n, dtype=X.dtype, device=X.device)
    return KernelMeanEmbedding(X, w, kernel, backend)
