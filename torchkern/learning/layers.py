r"""Kernels inside PyTorch models: a kernel layer with learnable centres, and an MMD loss."""
from __future__ import annotations

import math

import torch
from torch import nn

from .._validation import as_generator, is_int
from ..kernels.base import Kernel, upcast_half
from ..stats.mmd import ESTIMATORS, mmd2

__all__ = ["KernelLayer", "MMDLoss"]


class KernelLayer(nn.Module):
    r"""f(x) = Σ_j k(x, c_j) W_j + b: an RBF-network / inducing-point layer.

    The centres c_j (m × d), the output weights W (m × out_features), the bias and the
    kernel's hyperparameters are all learnable parameters (``nn.Parameter``), so it trains by
    backpropagation inside any model (Broomhead and Lowe 1988, "Multivariable functional
    interpolation and adaptive networks", Complex Systems 2; Moody and Darken 1989). The
    products go through the kernel's lazy Gram matrix K(x, C) (dense for small batches,
    row blocks or KeOps for large ones): a batch of b inputs costs O(b·m·d) kernel work
    and, on the lazy backends, O((b + m)·d) memory.

    Parameters
    ----------
    kernel : Kernel
        A kernel on vectors (``FeatureKernel`` for a deep kernel).
    n_centers : int, optional
        m, with ``in_features``: centres drawn from N(0, I).
    centers : Tensor of shape (m, d), optional
        Initial centres (e.g. a random subset of the training data).
    out_features : int
    in_features : int, optional
        d, needed with ``n_centers``.
    bias : bool
    learn_centers : bool
        False keeps the centres fixed (a buffer).
    dtype : torch.dtype
        Of the centres and weights when drawn (default float32).
    backend : str, optional
        Gram-matrix backend.
    random_state : None, int or torch.Generator

    Examples
    --------
    >>> import torch, torchkern
    >>> from torchkern.learning import KernelLayer
    >>> layer = KernelLayer(torchkern.RBF(), n_centers=16, in_features=2, out_features=3)
    >>> layer(torch.randn(5, 2)).shape
    torch.Size([5, 3])
    """

    def __init__(self, kernel, n_centers=None, centers=None, out_features=1, *,
                 in_features=None, bias=True, learn_centers=True, dtype=None, backend=None,
                 random_state=None):
        super().__init__()
        if not isinstance(kernel, Kernel) or not kernel.vector_input:
            raise TypeError(f"kernel must be a torchkern Kernel on vectors, got "
                            f"{type(kernel).__name__}")
        if not is_int(out_features) or out_features < 1:
            raise ValueError(f"out_features must be a positive int, got {out_features!r}")
        gen = as_generator(random_state)
        if centers is not None:
            if n_centers is not None:
                raise ValueError("give either n_centers or centers, not both")
            C = kernel.check_input(centers, "centers").detach().clone()
        else:
            if not is_int(n_centers) or n_centers < 1:
                raise ValueError(f"n_centers must be a positive int (or give centers), got "
                                 f"{n_centers!r}")
            if not is_int(in_features) or in_features < 1:
                raise ValueError(f"in_features must be a positive int with n_centers, got "
                                 f"{in_features!r}")
            C = torch.randn(n_centers, in_features, generator=gen,
                            dtype=dtype or torch.get_default_dtype())
        m = C.shape[0]
        self.kernel = kernel
        self.backend = backend
        if learn_centers:
            self.centers = nn.Parameter(C)
        else:
            self.register_buffer("centers", C)
        W = torch.randn(m, out_features, generator=gen, dtype=C.dtype) / math.sqrt(m)
        self.weight = nn.Parameter(W)
        self.bias = nn.Parameter(torch.zeros(out_features, dtype=C.dtype)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        C = self.centers
        # named here: the kernel's own checks call x and the centres "X" and "Y"
        if isinstance(x, torch.Tensor) and x.dim() == 2:
            if x.shape[1] != C.shape[1]:
                raise ValueError(f"x has {x.shape[1]} features but the layer's centers have "
                                 f"{C.shape[1]}")
            # read as the kernels read it: half precision as float32 (upcast_half),
            # integers as float64 (as_tensor)
            read = upcast_half(x).dtype if x.is_floating_point() else torch.float64
            if C.dtype not in (x.dtype, read):
                raise TypeError(f"x has dtype {x.dtype} but the layer's centers "
                                f"{C.dtype}: convert one of them (e.g. layer.to({read}))")
        K = self.kernel(x, C, backend=self.backend)
        out = K @ self.weight
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"n_centers={self.centers.shape[0]}, out_features={self.weight.shape[1]}"


class MMDLoss(nn.Module):
    r"""The squared MMD between two samples as a loss module (MMD-GANs, domain adaptation).

    ``MMDLoss(kernel)(X, Y)`` is :func:`torchkern.stats.mmd2`: the unbiased U-statistic
    (default), the biased V-statistic ‖μ̂_X − μ̂_Y‖²_H, or the linear-time estimate of
    Gretton et al. (2012, "A kernel two-sample test", JMLR 13). Differentiable with
    respect to both samples and the kernel's hyperparameters; the quadratic estimators
    read the Gram matrices through lazy products (O((n + m)·d) memory on large batches).
    Li, Swersky and Zemel (2015, "Generative moment matching networks", ICML) and
    Dziugaite, Roy and Ghahramani (2015, UAI) train generators with it; a kernel learned
    adversarially (maximizing the loss) gives the MMD-GAN of Li et al. (2017, NeurIPS).

    Parameters
    ----------
    kernel : Kernel
    estimator : {"unbiased", "biased", "linear"}
    backend : str, optional
    """

    def __init__(self, kernel, estimator="unbiased", *, backend=None):
        super().__init__()
        if not isinstance(kernel, Kernel):
            raise TypeError(f"kernel must be a torchkern Kernel, got {type(kernel).__name__}")
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
        self.kernel = kernel
        self.estimator = estimator
        self.backend = backend

    def forward(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        return mmd2(X, Y, self.kernel, self.estimator, backend=self.backend)

    def extra_repr(self) -> str:
        return f"estimator={self.estimator!r}"
