"""Explicit feature maps that approximate a kernel: random Fourier features and Nyström.

Both give ψ: ℝ^d → ℝ^p with ψ(x)ᵀψ(y) ≈ k(x, y) (Rahimi and Recht 2007; Williams and
Seeger 2001), their approximate Gram matrix as a lazy
:class:`~torchkern.gram.FeatureKernelMatrix` (``kernel_matrix``), and an
:class:`ApproximateKernel` (``as_kernel()``) that any torchkern estimator accepts.
See ``docs/approx.md``.
"""
from .kernel import ApproximateKernel
from .nystroem import Nystroem
from .rff import RandomFourierFeatures

__all__ = ["RandomFourierFeatures", "Nystroem", "ApproximateKernel"]
