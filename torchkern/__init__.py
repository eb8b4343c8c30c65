"""torchkern: kernel methods in PyTorch, lazy Gram matrices and matrix-free solvers."""
import os as _os

# KeOps prints banners at import; torchkern keeps them quiet unless the user asked.
_os.environ.setdefault("PYKEOPS_VERBOSE", "0")
_os.environ.setdefault("KEOPS_VERBOSE", "0")

from . import gram, kernels  # noqa: E402
from ._config import config, get_backend, set_backend, use_backend  # noqa: E402
from .gram import KernelMatrix  # noqa: E402
from .kernels import *  # noqa: F401,F403,E402
from .kernels import __all__ as _kernel_names  # noqa: E402
from . import inputs, linalg, approx, supervised, unsupervised, stats  # noqa: E402
from . import graphs, sequences, datasets, ntk, learning, distributed  # noqa: E402
from .supervised import *  # noqa: F401,F403,E402
from .unsupervised import *  # noqa: F401,F403,E402

__version__ = "0.1.0"

__all__ = ["config", "get_backend", "set_backend", "use_backend", "KernelMatrix", "gram",
           "inputs", "kernels", "linalg", "approx", "supervised", "unsupervised", "stats",
           "graphs", "sequences", "datasets", "ntk", "learning", "distributed",
           *_kernel_names, *supervised.__all__, *unsupervised.__all__]
