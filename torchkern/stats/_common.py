"""Helpers shared by the statistics in :mod:`torchkern.stats` (private)."""
from __future__ import annotations

import torch

from ..inputs import KernelInput, check_input
from ..gram import DenseKernelMatrix, FeatureKernelMatrix, FormulaKernelMatrix, KernelMatrix
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
from .._validation import caller_stacklevel  # noqa: E402

def randperm(n: int, gen: torch.Generator | None, device) -> torch.Tensor:
    """A random permutation of range(n) drawn on the generator's device, moved to ``device``."""
    gen_device = gen.device if gen is not None else torch.device("cpu")
    return torch.randperm(n, generator=gen, device=gen_device).to(device)


def warn_if_centering_cancels(trace, mean, n, dtype, who):
    r"""Warn where centering in feature space cancels most digits of the Gram matrix.

    Kernel PCA, kernel k-means, MMD and HSIC see the data only through the centered Gram
    matrix K̃ = HKH (feature-space distances and covariances do not move with the mean
    embedding), whose trace tr K̃ = Σ_i K_ii − 1ᵀK1/n is the total feature-space variance
    (``trace`` is tr K = Σ_i K_ii, ``mean`` is 1ᵀK1/n²).
    Each entry of K carries a rounding error of up to ε·max K_ii, so the entries of K̃ —
    of the size tr K̃ / n — keep a relative precision of about ε·tr K / tr K̃. Where
    that is above 10⁻³ (a dot-product kernel on float32 data far from the origin:
    offset 10³ gives 5·10⁻²; an RBF so wide that K ≈ 11ᵀ) a ``RuntimeWarning`` says so:
    the results hold fewer than three digits. Cost: O(1) given the trace and the mean.
    """
    import warnings
    tr = float(trace)
    centered = tr - n * float(mean)
    if centered == 0 or not tr > 0:  # identical points: nothing varies, nothing is lost
        return
    # a negative tr K̃ (impossible for a p.s.d. kernel) is rounding alone
    lost = torch.finfo(dtype).eps * tr / abs(centered)
    if lost > 1e-3:
        warnings.warn(f"{who}: the {str(dtype).replace('torch.', '')} Gram matrix varies "
                      f"around its mean by {centered / tr:.1e} of its diagonal, so the "
                      f"entries of the centered Gram keep a relative precision of only "
                      f"~{lost:.0e} (small components and distances lose digits first): "
                      f"center the data (a dot-product kernel), or use float64",
                      RuntimeWarning, stacklevel=caller_stacklevel())


def cheap_trace(K: KernelMatrix):
    """tr K (float64) where the diagonal costs O(n) (stored, formula or dense-feature Gram
    matrices), else None (a generic diagonal reads n rows; a sparse feature matrix's
    would densify its features)."""
    if isinstance(K, FeatureKernelMatrix):
        if K.phi_x.layout != torch.strided or K.phi_y.layout != torch.strided:
            return None
    elif not isinstance(K, (DenseKernelMatrix, FormulaKernelMatrix)):
        return None
    return K.diag().detach().sum(dtype=torch.float64)
