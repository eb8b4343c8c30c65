"""The base of kernels on structured inputs: graphs, strings, the nodes of a graph."""
from __future__ import annotations

import torch

from .._config import _check_backend
from ..gram import DenseKernelMatrix, KernelMatrix
from ..inputs import KernelInput
from .base import Kernel

__all__ = ["StructuredKernel"]


class StructuredKernel(Kernel):
    r"""Base class of kernels whose inputs are not (n, d) vectors.

    A subclass says what it takes and how it compares:

    - :meth:`check_input` turns user data (a list of graphs, of strings, node indices...)
      into its :class:`~torchkern.inputs.KernelInput`, raising a clear error otherwise;
    - :meth:`_gram` returns the :class:`~torchkern.gram.KernelMatrix` between two such
      inputs (features, operator or dense representation, as suits the kernel);
    - :meth:`_diag` returns k(x_i, x_i) (the default reads the diagonal of the Gram).

    The base class then offers what every torchkern kernel does: ``k(X, Y=None,
    backend=None)`` (``backend="dense"`` materializes; other backends keep the kernel's
    own lazy representation), ``k.diag(X)``, and cosine normalization
    k(x, y)/√(k(x, x) k(y, y)) applied lazily when ``self.normalize`` is true (a sample
    with k(x, x) = 0 gets a zero row). Such kernels have no vector formula: they add and
    scale with other structured kernels on the same inputs, not with vector kernels.
    """

    normalize: bool = False
    vector_input = False

    def check_input(self, X, name: str = "X", **kw) -> KernelInput:
        """``X`` as this kernel's :class:`~torchkern.inputs.KernelInput`, or a clear
        TypeError/ValueError naming ``name`` (written by each subclass)."""
        raise NotImplementedError

    def _gram(self, X: KernelInput, Y: KernelInput | None) -> KernelMatrix:
        """The unnormalized KernelMatrix k(X, Y) (``Y=None``: k(X, X)); by each subclass."""
        raise NotImplementedError

    def _diag(self, X: KernelInput) -> torch.Tensor:
        return self._gram(X, None).diag()

    def formula(self, X, Y=None):
        """Structured kernels have no vector formula: always a TypeError."""
        raise TypeError(f"{type(self).__name__} compares structured inputs; it has no vector "
                        f"formula and cannot be combined with vector kernels")

    def forward(self, X, Y=None, *, backend: str | None = None) -> KernelMatrix:
        """k(X, Y) as a lazy KernelMatrix (normalized if ``self.normalize``);
        ``backend="dense"`` materializes it."""
        name = _check_backend(backend) if backend is not None else None
        X = self.check_input(X, "X")
        if Y is not None:
            Y = _like(X, self.check_input(Y, "Y"))
        K = self._gram(X, Y)
        if self.normalize:
            dx = self._diag(X)
            dy = dx if Y is None else self._diag(Y)
            K = K.scaled(_inv_sqrt(dx), _inv_sqrt(dy))
        if name == "dense":
            return DenseKernelMatrix(K.to_dense())
        return K

    def pairs(self, X, Y) -> torch.Tensor:
        """k(x_i, y_i) for paired samples: the diagonal of k(X, Y), by :meth:`_pairs` (the
        default reads ``k(X, Y).diag()``; a subclass may compute it in O(n) memory)."""
        X, Y = self.check_input(X, "X"), self.check_input(Y, "Y")
        if len(X) != len(Y):
            raise ValueError(f"X and Y must have the same number of samples, got "
                             f"{len(X)} and {len(Y)}")
        return self._pairs(X, _like(X, Y))

    def _pairs(self, X: KernelInput, Y: KernelInput) -> torch.Tensor:
        return self(X, Y).diag()

    def diag(self, X) -> torch.Tensor:
        """k(x_i, x_i) for every item of X (ones where normalized, zeros for k(x, x) = 0)."""
        X = self.check_input(X, "X")
        d = self._diag(X)
        if self.normalize:
            return (d > 0).to(d.dtype)
        return d


def _like(X: KernelInput, Y: KernelInput) -> KernelInput:
    """Y on X's device (else a ValueError) and in X's dtype, as k(X, Y) and pairs take it."""
    if Y.device != X.device:
        raise ValueError(f"X and Y must be on the same device, got {X.device} and {Y.device}")
    return Y if Y.dtype == X.dtype else Y.to(dtype=X.dtype)


def _inv_sqrt(d: torch.Tensor) -> torch.Tensor:
    return torch.where(d > 0, d.clamp_min(torch.finfo(d.dtype).tiny).rsqrt(), torch.zeros_like(d))
