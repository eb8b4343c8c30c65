"""Helpers shared by the statistics in :mod:`torchkern.stats` (private)."""
from __future__ import annotations

import torch

from ..inputs import KernelInput, check_input
from ..gram import DenseKernelMatrix, KernelMatrix
from ..kernels import Kernel

def check_kernel(kernel, name: str = "kernel") -> Kernel:
    """The kernel itself (not a copy: gradients must reach its hyperparameters)."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"{name} must be a torchkern Kernel, got {type(kernel).__name__}")
    return kernel

def check_samples(X, Y, x_name: str = "X", y_name: str = "Y", kernel=None):
    """Two samples as the kernel takes them (2-D tensors with the same number of features
    for vector kernels and ``kernel=None``; see :mod:`torchkern.inputs`)."""
    X = check_input(kernel, X, x_name, allow_1d=True)
    Y = check_input(kernel, Y, y_name, allow_1d=True)
    if isinstance(X, KernelInput) or isinstance(Y, KernelInput):
        X.check_compatible(Y, y_name)
        if X.device != Y.device:
            raise ValueError(f"{x_name} and {y_name} must be on the same device, got "
                             f"{X.device} and {Y.device}")
        return X, Y.to(dtype=X.dtype)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"{x_name} and {y_name} must have the same number of features, "
                         f"got {X.shape[1]} and {Y.shape[1]}")
    if X.dtype != Y.dtype:
        raise TypeError(f"{x_name} and {y_name} must have the same dtype, got {X.dtype} "
                        f"and {Y.dtype}")
    if X.device != Y.device:
        raise ValueError(f"{x_name} and {y_name} must be on the same device, got {X.device} "
                         f"and {Y.device}")
    return X, Y

def as_gram(K, name: str, square: bool = False) -> KernelMatrix:
    """A KernelMatrix from a KernelMatrix or a 2-D tensor."""
    if isinstance(K, KernelMatrix):
        out = K
    elif isinstance(K, torch.Tensor):
        if K.dim() != 2:
            raise ValueError(f"{name} must be a 2-D Gram matrix, got shape {tuple(K.shape)}")
        if not K.is_floating_point():
            raise TypeError(f"{name} must be a floating-point Gram matrix, got {K.dtype}")
        if not bool(torch.isfinite(K.detach()).all()):
            raise ValueError(f"{name} contains NaN or infinity")
        out = DenseKernelMatrix(K)
    else:
        raise TypeError(f"{name} must be a KernelMatrix or a torch.Tensor, got {type(K).__name__}")
    if square and out.shape[0] != out.shape[1]:
        raise ValueError(f"{name} must be square, got shape {tuple(out.shape)}")
    return out

def total(K: KernelMatrix) -> torch.Tensor:
    """1ᵀK1 (float64): one matrix-vector product, or a plain sum for a dense matrix."""
    if isinstance(K, DenseKernelMatrix):
        return K.tensor.sum(dtype=torch.float64)
    return row_sums(K).sum(dtype=torch.float64)

def row_sums(K: KernelMatrix) -> torch.Tensor:
    """K1 (in K's dtype), by one matrix-vector product."""
    if isinstance(K, DenseKernelMatrix):
        return K.tensor.sum(1)
    return K @ torch.ones(K.shape[1], dtype=K.dtype, device=K.device)

from .._validation import as_generator as generator  # noqa: E402,F401 (re-exported)

def randperm(n: int, gen: torch.Generator | None, device) -> torch.Tensor:
    """A random permutation of range(n) drawn on the generator's device, moved to ``device``."""
    gen_device = gen.device if gen is not None else torch.device("cpu")
    return torch.randperm(n, generator=gen, device=gen_device).to(device)
