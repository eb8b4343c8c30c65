"""Matrix-free numerics on anything with ``@``: CG, Lanczos, log-determinants, preconditioners.

This layer knows nothing of kernels. Every routine takes ``A``: a dense tensor or any
object with ``shape``, ``dtype``, ``device`` and ``A @ V`` (V of shape (n,) or (n, r)),
such as a lazy :class:`torchkern.gram.KernelMatrix`. See ``docs/linalg.md``.
"""

from ._common import ConvergenceWarning
from .cg import CGInfo, cg
from .lanczos import eigsh
from .logdet import LogdetInfo, inv_quad_logdet, logdet, trace
from .preconditioners import NystromPreconditioner, PivotedCholesky

__all__ = [
    "CGInfo",
    "ConvergenceWarning",
    "LogdetInfo",
    "NystromPreconditioner",
    "PivotedCholesky",
    "cg",
    "eigsh",
    "inv_quad_logdet",
    "logdet",
    "trace",
]
