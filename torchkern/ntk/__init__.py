"""Neural tangent kernels: the empirical NTK of any ``nn.Module``, the analytic NTK and
NNGP kernels of infinitely wide fully connected networks and of any torch
``nn.Sequential`` with convolutions (:func:`infinite_width`), and the predictions of
infinitely wide networks trained by gradient flow (see ``docs/ntk.md``)."""
from .analytic import NNGP, NTK
from .empirical import EmpiricalNTK, empirical_ntk
from .module import Erf, InfiniteWidthKernel, Residual, infinite_width, parameterize
from .predict import infinite_width_predict

__all__ = ["empirical_ntk", "EmpiricalNTK", "NTK", "NNGP", "infinite_width_predict",
           "infinite_width", "InfiniteWidthKernel", "Residual", "Erf", "parameterize"]
