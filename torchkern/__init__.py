"""torchkern: kernel methods in PyTorch, lazy Gram matrices and matrix-free solvers."""
from . import gram, kernels
from ._config import config, get_backend, set_backend, use_backend
from .gram import KernelMatrix
from .kernels import *  # noqa: F401,F403
from .kernels import __all__ as _kernel_names

__version__ = "0.1.0"

__all__ = ["config", "get_backend", "set_backend", "use_backend", "KernelMatrix", "gram",
           "kernels", *_kernel_names]
