"""What every torchkern estimator shares: kernel resolution, the Gram matrix of the
training data, and fitted-state checks. Estimators subclass scikit-learn's
``BaseEstimator`` (and the matching mixin) so ``clone``, ``GridSearchCV``, ``Pipeline``
and ``cross_val_score`` work unchanged."""
from __future__ import annotations

import copy

import torch
from sklearn.exceptions import NotFittedError

from ._config import config
from .gram import DenseKernelMatrix, KernelMatrix
from .inputs import check_input
from .kernels import RBF, Kernel

__all__ = ["resolve_kernel", "kernel_matrix", "check_fitted", "is_precomputed", "NotFittedError"]


def is_precomputed(kernel) -> bool:
    """Whether an estimator's (resolved) kernel is the string ``"precomputed"``."""
    return isinstance(kernel, str) and kernel == "precomputed"


def resolve_kernel(kernel, name: str = "kernel"):
    """A private copy of the estimator's kernel: ``None`` gives ``RBF()``,
    ``"precomputed"`` stays as is; anything else must be a torchkern Kernel."""
    if kernel is None:
        return RBF()
    if isinstance(kernel, str):
        if kernel != "precomputed":
            raise ValueError(f"{name} must be a torchkern Kernel, None or 'precomputed', got {kernel!r}")
        return kernel
    if not isinstance(kernel, Kernel):
        raise TypeError(f"{name} must be a torchkern Kernel, None or 'precomputed', "
                        f"got {type(kernel).__name__}")
    return copy.deepcopy(kernel)


def kernel_matrix(kernel, X, Y=None, *, backend=None, name: str = "X",
                  reuse: bool = False) -> KernelMatrix:
    """k(X, Y) as a KernelMatrix; with ``kernel="precomputed"``, X *is* the Gram matrix
    (a tensor, an array or a KernelMatrix) and Y is ignored.

    ``reuse=True`` says the caller (a fit, not differentiated) will multiply the matrix
    many times: under the ``"auto"`` backend it is then stored densely, without autograd
    state, if it fits ``config.materialize_max_bytes``.
    """
    if is_precomputed(kernel):
        X = check_input(kernel, X, name)
        return X if isinstance(X, KernelMatrix) else DenseKernelMatrix(X)
    if reuse and (config.backend if backend is None else backend) == "auto":
        m = X.shape[0] if Y is None else Y.shape[0]
        item = torch.empty((), dtype=X.dtype).element_size()
        if X.shape[0] * m * item <= config.materialize_max_bytes:
            with torch.no_grad():
                return kernel(X, Y, backend="dense")
    return kernel(X, Y, backend=backend)


def input_matrix(kernel, X, name: str = "X", **kw):
    """Validated data (:func:`torchkern.inputs.check_input`): a Gram matrix when the kernel
    is precomputed, otherwise what the kernel takes."""
    return check_input(kernel, X, name, **kw)


def check_fitted(estimator, attribute: str) -> None:
    """Raise scikit-learn's NotFittedError unless ``estimator.<attribute>`` exists."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(f"This {type(estimator).__name__} instance is not fitted yet; "
                             f"call 'fit' before using it.")

