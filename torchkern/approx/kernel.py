r"""The kernel of an explicit feature map: k̃(x, y) = ⟨ψ(x), ψ(y)⟩."""
from __future__ import annotations

import torch
from torch import nn

from .._validation import as_tensor
from ..gram import FeatureKernelMatrix, Formula
from ..kernels import Kernel
from ..kernels._ops import dot

__all__ = ["ApproximateKernel"]


class ApproximateKernel(Kernel):
    r"""The approximate kernel :math:`\tilde k(x, y) = \psi(x)^\top \psi(y)` of a feature map.

    Wraps :class:`RandomFourierFeatures` (an ``nn.Module``) or a fitted :class:`Nystroem`
    (anything with ``transform``) into a torchkern kernel, so that every estimator and every
    tool that takes a kernel works on the approximation: ``KernelRidge(kernel=
    rff.as_kernel())``. Calling it returns a
    :class:`~torchkern.gram.FeatureKernelMatrix` ψ(X)ψ(Y)ᵀ whatever ``backend`` says —
    the features representation is the cheap one: O((n + m)·p) per product column instead
    of O(n·m·p). In kernel algebra (``c * k̃``, ``k̃ + RBF()``) its formula is the inner
    product of the features, so sums and products evaluate through the usual backends.

    Parameters
    ----------
    feature_map : nn.Module or fitted transformer
        ψ, mapping (n, d) to (n, p). An ``nn.Module`` is registered as a sub-module, so its
        parameters (an RFF's kernel hyperparameters) are this kernel's parameters.
    """

    def __init__(self, feature_map):
        super().__init__()
        if not (isinstance(feature_map, nn.Module) or callable(getattr(feature_map, "transform", None))):
            raise TypeError(f"feature_map must be an nn.Module or have a transform method, "
                            f"got {type(feature_map).__name__}")
        self.feature_map = feature_map
        base = getattr(feature_map, "kernel", None)
        self.vector_input = getattr(base, "vector_input", True)

    def features(self, X) -> torch.Tensor:
        """ψ(X), shape (n, p)."""
        fm = self.feature_map
        Z = fm(X) if isinstance(fm, nn.Module) else fm.transform(X)
        if not isinstance(Z, torch.Tensor):
            # a scikit-learn transformer (RBFSampler, Nystroem, ...) returns an ndarray: it
            # raised AttributeError ('numpy.ndarray' object has no attribute 'dim')
            Z = as_tensor(Z, "the feature map's output", dtype=X.dtype, device=X.device)
        if Z.dim() != 2 or Z.shape[0] != X.shape[0]:
            raise ValueError(f"the feature map must return shape ({X.shape[0]}, p), got {tuple(Z.shape)}")
        return Z

    def formula(self, X, Y=None) -> Formula:
        zx = self.features(X)
        zy = zx if (Y is None or Y is X) else self.features(Y)
        return Formula((zx,), (zy,), (), lambda xs, ys, ps: dot(xs[0], ys[0]))

    def check_input(self, X, name: str = "X", **kw):
        """What the approximated kernel takes (a Nyström map of a graph kernel takes graphs)."""
        base = getattr(self.feature_map, "kernel", None)
        if base is not None and hasattr(base, "check_input") and not isinstance(base, str):
            return base.check_input(X, name, **kw)
        return as_tensor(X, name, **kw)

    def forward(self, X, Y=None, *, backend: str | None = None) -> FeatureKernelMatrix:
        X = self.check_input(X, "X")
        zx = self.features(X)
        if Y is None:
            return FeatureKernelMatrix(zx)
        Y = self.check_input(Y, "Y")
        if isinstance(X, torch.Tensor) and Y.shape[1] != X.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features but Y has {Y.shape[1]}")
        return FeatureKernelMatrix(zx, self.features(Y))

    def diag(self, X) -> torch.Tensor:
        """k̃(x_i, x_i) = ‖ψ(x_i)‖², shape (n,)."""
        Z = self.features(self.check_input(X, "X"))
        return (Z * Z).sum(1)

    def extra_repr(self) -> str:
        return "" if isinstance(self.feature_map, nn.Module) else repr(self.feature_map)
