"""Kernels on vectors: ``nn.Module``\\ s whose call returns a lazy Gram matrix."""
from .base import Kernel, ProductKernel, ScaleKernel, StationaryKernel, SumKernel
from .dot_product import ArcCosine, Exponential, Linear, Polynomial
from .feature import FeatureKernel
from .histogram import Chi2, HistogramIntersection, Min
from .structured import StructuredKernel
from .stationary import (RBF, InverseMultiquadric, Laplacian, Matern, Periodic,
                         RationalQuadratic)

__all__ = [
    "Kernel", "SumKernel", "ProductKernel", "ScaleKernel", "StationaryKernel",
    "RBF", "Laplacian", "Matern", "RationalQuadratic", "InverseMultiquadric", "Periodic",
    "Linear", "Polynomial", "Exponential", "ArcCosine",
    "Min", "HistogramIntersection", "Chi2",
    "FeatureKernel", "StructuredKernel",
]
