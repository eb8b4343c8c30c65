"""Kernels on learned features: k(φ(x), φ(y))."""
import torch
from torch import nn

from .base import Kernel, upcast_half

__all__ = ["FeatureKernel"]


class FeatureKernel(Kernel):
    r"""Deep kernel :math:`k(x, y) = k_0(\varphi(x), \varphi(y))` for any ``nn.Module`` φ.

    The building block of deep kernel learning (Wilson et al., 2016): gradients of anything
    computed from the Gram matrix reach φ's parameters and the base kernel's
    hyperparameters. φ is applied once per input set (O(n) evaluations), then the base
    kernel's formula runs on the features with any backend.

    Parameters
    ----------
    feature_map : nn.Module
        Maps a (n, d) tensor to (n, p) features.
    base : Kernel
        The kernel applied to the features.
    """

    def __init__(self, feature_map: nn.Module, base: Kernel):
        super().__init__()
        if not isinstance(feature_map, nn.Module):
            raise TypeError(f"feature_map must be an nn.Module, got {type(feature_map).__name__}")
        if not isinstance(base, Kernel):
            raise TypeError(f"base must be a Kernel, got {type(base).__name__}")
        self.feature_map = feature_map
        self.base = base

    def _network_dtypes(self) -> set:
        return {p.dtype for p in self.feature_map.parameters() if p.is_floating_point()}

    def accepts_dtype(self, dtype: torch.dtype) -> bool:
        """Whether the network takes inputs of ``dtype`` (its floating parameters have it, or
        it has none) and the base kernel does too."""
        dtypes = self._network_dtypes()
        return (not dtypes or dtype in dtypes) and self.base.accepts_dtype(dtype)

    def _features(self, X, name):
        dtypes = self._network_dtypes()
        if dtypes and X.dtype not in dtypes:
            have = ", ".join(sorted(str(d) for d in dtypes))
            raise TypeError(f"{name} has dtype {X.dtype} but feature_map's parameters have "
                            f"dtype {have}: cast one to the other (e.g. feature_map.to("
                            f"{X.dtype}))")
        Z = self.feature_map(X)
        if Z.dim() == 1:
            Z = Z.unsqueeze(-1)
        if Z.dim() != 2 or Z.shape[0] != X.shape[0]:
            raise ValueError(f"feature_map must map {name} of shape {tuple(X.shape)} to "
                             f"({X.shape[0]}, p), got {tuple(Z.shape)}")
        if not bool(torch.isfinite(Z.detach()).all()):  # O(n p): as cheap as φ itself
            raise ValueError(f"feature_map gave NaN or infinity on {name}")
        return upcast_half(Z)  # the base kernel computes in float32 at least

    #: φ takes X in its own dtype (a half-precision network takes half-precision data);
    #: its features are upcast instead.
    _upcast_half = False

    def formula(self, X, Y=None):
        zx = self._features(X, "X")
        zy = zx if (Y is None or Y is X) else self._features(Y, "Y")
        return self.base.formula(zx, zy)
